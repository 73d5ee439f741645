package clienttest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/control"
	tsclient "github.com/capbridge/capbridge/capwire/ts"
	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// facadeWant is what both façade programs print. Server t is mcptest
// playing testdata/facades/t.tools.json, whose content tool declares its
// kinds integers although they are strings, and whose hang and
// cancellations tools declare no properties, closed and open (both are
// called with no arguments); the grant leaves out slow.
// The weather is server-everything's fixed answer for Chicago.
const facadeWant = `servers: everything,t
echo: Echo: hello façade is_error=false
image: text,other:image,text
weather: temperature=36.0 humidity=82.0 conditions=Light rain / drizzle
task: # Research Report: façades
add: sum=42
fail: as asked is_error=true
denied: bad_arguments at /blob/bytes
mismatch: at /kinds/0 want integer got string
cancel: waiting
cancel: gave up
cancelled at the server: hang
not_granted: not_granted
`

// facadeGrant is the grant both programs run under.
var facadeGrant = map[string][]string{
	"everything": {"echo", "get-tiny-image", "get-structured-content", "simulate-research-query"},
	"t":          {"add", "fail", "content", "hang", "cancellations"},
}

// TestFacades is the end-to-end test of the TypeScript and Python façades
// with real processes: a bridge serving mcptest and the pinned npm
// server-everything; the façades fetched over the control plane
// (`facade` with lang) and written beside a program that imports them
// (TypeScript's as the JavaScript and declarations Node runs as they are);
// each program type-checked with its language's strict checker against
// the façades (tsc --strict, mypy --strict as Python 3.10) and run with
// CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN as its whole environment.
func TestFacades(t *testing.T) {
	node := need(t, "node")
	py := need(t, "python3")
	defer leakcheck.Check(t)()
	tools, err := os.ReadFile(filepath.Join("testdata", "facades", "t.tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listing []json.RawMessage
	if err := json.Unmarshal(tools, &listing); err != nil {
		t.Fatal(err)
	}
	argv := interop.Command(t, interop.Everything, t.TempDir())
	ev := bridgetest.Stdio("everything", argv, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	srv := bridgetest.NewServer(t, bridgetest.WithServers(ev, mcptestServer("t", mcptest.Scenario{Tools: listing})))
	defer srv.Close()
	ctl := srv.Control()
	t.Logf("bridge ready in %v", time.Since(start).Round(time.Millisecond))
	granted, err := ctl.Grant(ctx, &control.GrantRequest{Servers: facadeGrant})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"CAPBRIDGE_SOCKET=" + srv.CallSocket(), "CAPBRIDGE_TOKEN=" + granted.Token}
	facades := func(t *testing.T, lang, ext, dir string) []string {
		var files []string
		for _, server := range []string{"everything", "t"} {
			f, err := ctl.Facade(ctx, &control.FacadeRequest{Server: server, Lang: lang})
			if err != nil {
				t.Fatal(err)
			}
			if f.Module != server {
				t.Fatalf("façade of %s: module %q", server, f.Module)
			}
			writeFile(t, filepath.Join(dir, f.Module+ext), f.Source)
			files = append(files, f.Module+ext)
		}
		return files
	}

	t.Run("typescript", func(t *testing.T) {
		// The façades as Node runs them, with no compiler: m.js beside
		// m.d.ts. Only the program is compiled, against the declarations.
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		mkdir(t, out)
		for _, server := range []string{"everything", "t"} {
			f, err := ctl.Facade(ctx, &control.FacadeRequest{Server: server, Lang: "ts"})
			if err != nil {
				t.Fatal(err)
			}
			if f.JS == "" || f.DTS == "" {
				t.Fatalf("façade of %s has no JavaScript form", server)
			}
			writeFile(t, filepath.Join(dir, f.Module+".d.ts"), f.DTS)
			writeFile(t, filepath.Join(out, f.Module+".js"), f.JS)
		}
		installCapwireTS(t, dir)
		copyFile(t, filepath.Join("testdata", "facades", "program.ts"), filepath.Join(dir, "program.ts"))
		// The program's own strict settings, as a user would have them.
		capTS := filepath.Join(root(), "capwire", "ts")
		writeFile(t, filepath.Join(dir, "tsconfig.json"), `{"compilerOptions":{"strict":true,"target":"ES2022","lib":["ES2022"],
"module":"NodeNext","moduleResolution":"NodeNext","types":["node"],"typeRoots":[`+jsonString(filepath.Join(capTS, "node_modules", "@types"))+`],
"exactOptionalPropertyTypes":true,"noUnusedLocals":true,"noUnusedParameters":true,"noEmitOnError":true,"outDir":"out"},
"files":["program.ts"]}`)
		writeFile(t, filepath.Join(dir, "package.json"), `{"type":"module","private":true}`)
		run(t, dir, nil, 3*time.Minute, node, filepath.Join(capTS, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
		if out := runProgram(t, ctx, ctl, dir, env, node, filepath.Join(out, "program.js")); out != facadeWant {
			t.Errorf("program output:\n%s\nwant:\n%s", out, facadeWant)
		}
	})

	t.Run("python", func(t *testing.T) {
		dir := t.TempDir()
		files := facades(t, "python", ".py", dir)
		// The program's directory is on its sys.path: capwire is found
		// there, as the façades are, with nothing in the environment.
		if err := os.Symlink(filepath.Join(root(), "capwire", "python", "capwire"), filepath.Join(dir, "capwire")); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join("testdata", "facades", "program.py"), filepath.Join(dir, "program.py"))
		if mypy, err := exec.LookPath("mypy"); err == nil {
			run(t, dir, nil, 3*time.Minute, append([]string{mypy, "--strict", "--python-version", "3.10", "--cache-dir", t.TempDir(), "program.py"}, files...)...)
		} else {
			t.Logf("mypy is not installed (%v): type check skipped; install it with apt-get install mypy", err)
		}
		if out := runProgram(t, ctx, ctl, dir, env, py, "-B", filepath.Join(dir, "program.py")); out != facadeWant {
			t.Errorf("program output:\n%s\nwant:\n%s", out, facadeWant)
		}
	})
}

// installCapwireTS writes the capwire client into dir as capbridge gen
// does (capwire/ts.Package: compiled from the embedded sources, with
// their declarations and @msgpack/msgpack bundled), so a program in dir
// imports "@capbridge/capwire" as a user's would: through the package's
// exports, with nothing else installed.
func installCapwireTS(t *testing.T, dir string) {
	t.Helper()
	files, err := tsclient.Package(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join(dir, "node_modules", "@capbridge", "capwire", filepath.FromSlash(f.Path))
		mkdir(t, filepath.Dir(p))
		writeFile(t, p, string(f.Data))
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
