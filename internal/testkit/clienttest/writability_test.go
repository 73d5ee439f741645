package clienttest

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

var updateSurfaces = flag.Bool("update-writability", false, "rewrite codegen/testdata/writability/surface.*.txt from the live bridge")

// writabilityDir holds the evaluation: the tasks (TASKS.md), the
// surfaces the programs were written from, the programs in each language
// and what each must print (want/).
func writabilityDir() string { return filepath.Join(root(), "codegen", "testdata", "writability") }

// writabilityTasks are the tasks, in the order they run (the memory and
// filesystem ones build on the server's state as left by those before).
var writabilityTasks = []string{"graph", "search", "files", "edit", "sum", "weather", "image", "link", "research"}

// writabilityServers are the servers the programs may use, in surface
// order.
var writabilityServers = []string{"memory", "filesystem", "everything"}

// TestWritability is the writability evaluation, run by one command
// (make writability, or this test): a bridge serving the pinned npm
// memory, filesystem and everything servers; the surfaces it shows a model
// in each language, which must equal the ones the programs were written
// from (-update-writability rewrites them); and every program, in Go,
// TypeScript and Python, type-checked with its language's strict checker
// (go vet, tsc --strict, mypy --strict) against the façades the bridge
// serves, laid out as capbridge gen lays them out, and run with only
// CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN, printing exactly what its task
// asks.
func TestWritability(t *testing.T) {
	node := need(t, "node")
	py := need(t, "python3")
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	langs := []struct{ lang, ext string }{{"go", ".go"}, {"ts", ".ts"}, {"python", ".py"}}
	for _, l := range langs {
		t.Run(l.lang, func(t *testing.T) {
			srv, ctl, token := writabilityBridge(t, ctx)
			defer srv.Close()
			var surface strings.Builder
			facades := map[string]string{}
			for i, server := range writabilityServers {
				f, err := ctl.Facade(ctx, &control.FacadeRequest{Server: server, Lang: l.lang})
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					surface.WriteString(f.Preamble)
				}
				surface.WriteString("\n" + f.Surface)
				facades[f.Module] = f.Source
			}
			surfacePath := filepath.Join(writabilityDir(), "surface."+l.lang+".txt")
			if *updateSurfaces {
				writeFile(t, surfacePath, surface.String())
			}
			shown, err := os.ReadFile(surfacePath)
			if err != nil || string(shown) != surface.String() {
				t.Fatalf("%s is not the surface the bridge shows now (%v): the programs were written against another; rerun with -update-writability and rewrite them", surfacePath, err)
			}
			dir := t.TempDir()
			env := []string{"CAPBRIDGE_SOCKET=" + srv.CallSocket(), "CAPBRIDGE_TOKEN=" + token}
			var argv func(task string) []string
			switch l.lang {
			case "go":
				argv = writabilityGo(t, dir, facades)
			case "ts":
				argv = writabilityTS(t, node, dir, facades)
			case "python":
				argv = writabilityPython(t, py, dir, facades)
			}
			for _, task := range writabilityTasks {
				want, err := os.ReadFile(filepath.Join(writabilityDir(), "want", task+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				if out := runProgram(t, ctx, ctl, dir, env, argv(task)...); !matchLines(out, string(want)) {
					t.Errorf("%s %s printed:\n%s\nwant:\n%s", l.lang, task, out, want)
				}
			}
		})
	}
}

// writabilityBridge serves the three npm servers, the filesystem one over
// a fresh directory and the memory one over a fresh file, and grants a
// program all of them, destructive tools and everything's resources
// included.
func writabilityBridge(t *testing.T, ctx context.Context) (*bridgetest.Server, *control.Client, string) {
	t.Helper()
	state := t.TempDir()
	files := filepath.Join(state, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	var servers []config.Server
	for _, s := range []struct{ name, bin string }{{"memory", interop.Memory}, {"filesystem", interop.Filesystem}, {"everything", interop.Everything}} {
		argv := interop.Command(t, s.bin, files)
		var env []string
		if s.name == "memory" {
			env = []string{"MEMORY_FILE_PATH=" + filepath.Join(state, "memory.jsonl")}
		}
		servers = append(servers, bridgetest.Stdio(s.name, argv, env))
	}
	srv := bridgetest.NewServer(t, bridgetest.WithServers(servers...))
	ctl := srv.Control()
	granted, err := ctl.Grant(ctx, &control.GrantRequest{
		Servers:          map[string][]string{"memory": nil, "filesystem": nil, "everything": nil},
		Resources:        []string{"everything"},
		AllowDestructive: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, ctl, granted.Token
}

// writabilityGo lays the Go façades and programs out as one module,
// "writability" (façade p at writability/p, task x at writability/x),
// vets and builds them offline against this checkout's capwire.
func writabilityGo(t *testing.T, dir string, facades map[string]string) func(string) []string {
	sum, err := os.ReadFile(filepath.Join(root(), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.mod"), "module writability\n\ngo 1.26\n\nrequire github.com/capbridge/capbridge v0.0.0\n\nreplace github.com/capbridge/capbridge => "+root()+"\n")
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
	for module, src := range facades {
		mkdir(t, filepath.Join(dir, module))
		writeFile(t, filepath.Join(dir, module, module+".go"), src)
	}
	for _, task := range writabilityTasks {
		mkdir(t, filepath.Join(dir, task))
		copyFile(t, filepath.Join(writabilityDir(), "go", task, "main.go"), filepath.Join(dir, task, "main.go"))
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	runEnv(t, dir, env, "go", "vet", "./...")
	runEnv(t, dir, env, "go", "build", "-o", filepath.Join(dir, "bin")+string(filepath.Separator), "./...")
	return func(task string) []string { return []string{filepath.Join(dir, "bin", task)} }
}

// writabilityTS writes the TypeScript façades and programs side by side
// (import from "./m.js"), installs @capbridge/capwire as gen does, and compiles them with
// tsc --strict.
func writabilityTS(t *testing.T, node, dir string, facades map[string]string) func(string) []string {
	var files []string
	for module, src := range facades {
		writeFile(t, filepath.Join(dir, module+".ts"), src)
		files = append(files, jsonString(module+".ts"))
	}
	for _, task := range writabilityTasks {
		copyFile(t, filepath.Join(writabilityDir(), "ts", task+".ts"), filepath.Join(dir, task+".ts"))
		files = append(files, jsonString(task+".ts"))
	}
	slices.Sort(files)
	installCapwireTS(t, dir)
	capTS := filepath.Join(root(), "capwire", "ts")
	writeFile(t, filepath.Join(dir, "tsconfig.json"), `{"compilerOptions":{"strict":true,"target":"ES2022","lib":["ES2022"],
"module":"NodeNext","moduleResolution":"NodeNext","types":["node"],"typeRoots":[`+jsonString(filepath.Join(capTS, "node_modules", "@types"))+`],
"noEmitOnError":true,"outDir":"out"},"files":[`+strings.Join(files, ",")+`]}`)
	writeFile(t, filepath.Join(dir, "package.json"), `{"type":"module","private":true}`)
	run(t, dir, nil, 3*time.Minute, node, filepath.Join(capTS, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	return func(task string) []string { return []string{node, filepath.Join(dir, "out", task+".js")} }
}

// writabilityPython writes the Python façades and programs side by side
// (import m), with capwire beside them, and checks them with mypy
// --strict when it is installed.
func writabilityPython(t *testing.T, py, dir string, facades map[string]string) func(string) []string {
	var files []string
	for module, src := range facades {
		writeFile(t, filepath.Join(dir, module+".py"), src)
	}
	for _, task := range writabilityTasks {
		copyFile(t, filepath.Join(writabilityDir(), "python", task+".py"), filepath.Join(dir, task+".py"))
		files = append(files, task+".py")
	}
	if err := os.Symlink(filepath.Join(root(), "capwire", "python", "capwire"), filepath.Join(dir, "capwire")); err != nil {
		t.Fatal(err)
	}
	if mypy, err := exec.LookPath("mypy"); err == nil {
		run(t, dir, nil, 3*time.Minute, append([]string{mypy, "--strict", "--python-version", "3.10", "--cache-dir", t.TempDir()}, files...)...)
	} else {
		t.Logf("mypy is not installed (%v): type check skipped; install it with apt-get install mypy", err)
	}
	return func(task string) []string { return []string{py, "-B", filepath.Join(dir, task+".py")} }
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// runEnv runs argv in dir with env, failing t with its output if it fails
// or outlives five minutes.
func runEnv(t *testing.T, dir string, env []string, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// matchLines reports whether out is want, line for line, where a want
// line ending in "*" matches any line it begins (what a server prints with
// the time in it).
func matchLines(out, want string) bool {
	o, w := strings.Split(out, "\n"), strings.Split(want, "\n")
	if len(o) != len(w) {
		return false
	}
	for i := range w {
		if prefix, ok := strings.CutSuffix(w[i], "*"); ok && strings.HasPrefix(o[i], prefix) {
			continue
		}
		if o[i] != w[i] {
			return false
		}
	}
	return true
}
