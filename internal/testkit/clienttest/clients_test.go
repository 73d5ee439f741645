package clienttest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// The test binary doubles as the mcptest server the end-to-end test's
// bridge runs.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	leakcheck.Main(m)
}

// root is the repository root.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file))))
}

func specPath() string { return filepath.Join(root(), "docs", "capwire.md") }

// need returns the path of an interpreter, or skips t when it is not
// installed: the only reason these tests skip.
func need(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (%v): the %s client is not tested", name, err, map[string]string{"node": "TypeScript", "python3": "Python"}[name])
	}
	return p
}

// run runs argv in dir with env added to a minimal environment, failing t
// with the output if it fails or outlives limit.
func run(t *testing.T, dir string, env []string, limit time.Duration, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v after %v\n%s", argv, err, time.Since(start).Round(time.Millisecond), out.String())
	}
	t.Logf("%s: %v", filepath.Base(argv[0]), time.Since(start).Round(time.Millisecond))
	return out.String()
}

// buildTS compiles capwire/ts (sources, tests and the end-to-end program)
// with its pinned tsc into a temporary directory that borrows the
// package's node_modules, and returns that directory. Type errors fail
// the build.
func buildTS(t *testing.T, node string) string {
	t.Helper()
	pkg := filepath.Join(root(), "capwire", "ts")
	tsc := filepath.Join(pkg, "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("capwire/ts: dependencies are not installed (%v); run `make deps` (npm ci in %s)", err, pkg)
	}
	dir := t.TempDir()
	// Node resolves @msgpack/msgpack upwards from the compiled files, and
	// reads "type": "module" from the nearest package.json.
	if err := os.Symlink(filepath.Join(pkg, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type":"module","private":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, 5*time.Minute, node, tsc, "-p", pkg, "--outDir", filepath.Join(dir, "dist"))
	return dir
}

// TestTypeScript runs capwire/ts's node:test suites (the spec's worked
// example byte for byte, the codec's refusals, the Client against a
// scripted capbridge) and its end-to-end program.
func TestTypeScript(t *testing.T) {
	node := need(t, "node")
	dir := buildTS(t, node)
	t.Run("unit", func(t *testing.T) {
		tests, err := filepath.Glob(filepath.Join(dir, "dist", "test", "*.test.js"))
		if err != nil || len(tests) == 0 {
			t.Fatalf("no compiled tests in %s (%v)", dir, err)
		}
		// --test-timeout turns a hang into a failure that names its test.
		argv := append([]string{node, "--test", "--test-timeout=60000"}, tests...)
		out := run(t, dir, []string{"CAPWIRE_SPEC=" + specPath()}, 3*time.Minute, argv...)
		if testing.Verbose() {
			t.Log(out)
		}
	})
	t.Run("exports", func(t *testing.T) { checkExports(t, dir) })
	t.Run("end to end", func(t *testing.T) {
		e2e(t, dir, nil, e2eWant, node, filepath.Join(dir, "dist", "e2e", "program.js"))
	})
}

// checkExports checks that the files package.json tells importers to load
// are what tsc produced.
func checkExports(t *testing.T, dir string) {
	raw, err := os.ReadFile(filepath.Join(root(), "capwire", "ts", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Exports map[string]struct {
			Types   string `json:"types"`
			Default string `json:"default"`
		} `json:"exports"`
		Types string `json:"types"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	main, ok := pkg.Exports["."]
	if !ok || main.Types == "" || main.Default == "" || pkg.Types != main.Types {
		t.Fatalf("package.json: exports %+v, types %q", pkg.Exports, pkg.Types)
	}
	for _, f := range []string{main.Types, main.Default} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("package.json names %s, which the build does not produce: %v", f, err)
		}
	}
}

// TestPython runs capwire/python's unittest suites (the spec's worked
// example byte for byte, the codec's refusals, both clients against a
// scripted capbridge), byte-compiles and type-checks the package, and
// runs its end-to-end programs, asyncio's and the blocking client's.
func TestPython(t *testing.T) {
	py := need(t, "python3")
	pkg := filepath.Join(root(), "capwire", "python")
	t.Run("unit", func(t *testing.T) {
		// -B: no __pycache__ in the checkout; warnings about unclosed
		// resources are errors.
		out := run(t, pkg, []string{"CAPWIRE_SPEC=" + specPath()}, 3*time.Minute,
			py, "-B", "-W", "error::ResourceWarning", "-m", "unittest", "discover", "-s", "tests", "-t", ".")
		if testing.Verbose() {
			t.Log(out)
		}
	})
	t.Run("compiles", func(t *testing.T) { compilePython(t, py, pkg) })
	t.Run("end to end", func(t *testing.T) {
		e2e(t, pkg, []string{"PYTHONPATH=" + pkg}, e2eWant, py, "-B", filepath.Join(pkg, "e2e", "program.py"))
	})
	t.Run("end to end, blocking", func(t *testing.T) {
		e2e(t, pkg, []string{"PYTHONPATH=" + pkg}, blockingWant, py, "-B", "-W", "error::ResourceWarning", filepath.Join(pkg, "e2e", "blocking.py"))
	})
}

// compilePython byte-compiles every module, and type-checks the package
// with mypy --strict when mypy is installed (apt-get install mypy).
func compilePython(t *testing.T, py, pkg string) {
	files, err := filepath.Glob(filepath.Join(pkg, "capwire", "*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no modules in %s (%v)", pkg, err)
	}
	tests, _ := filepath.Glob(filepath.Join(pkg, "tests", "*.py"))
	e2e, _ := filepath.Glob(filepath.Join(pkg, "e2e", "*.py"))
	all := append(append(files, tests...), e2e...)
	// py_compile writes where it is told: into a temporary directory.
	out := t.TempDir()
	const compile = "import py_compile, sys\nfor i, f in enumerate(sys.argv[2:]): py_compile.compile(f, cfile=f'{sys.argv[1]}/{i}.pyc', doraise=True)"
	run(t, pkg, nil, time.Minute, append([]string{py, "-c", compile, out}, all...)...)
	mypy, err := exec.LookPath("mypy")
	if err != nil {
		t.Skipf("mypy is not installed (%v): type check skipped; install it with apt-get install mypy", err)
	}
	run(t, pkg, nil, 3*time.Minute, append([]string{mypy, "--strict", "--cache-dir", t.TempDir(), "capwire", "tests"}, e2e...)...)
}
