package codegen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestCompile builds the façade of every golden listing, and of the hostile
// listings that generate, with `go build` in a temporary module that
// replaces this module by the checkout, offline: generated source must
// compile against the real capwire client, not just parse.
func TestCompile(t *testing.T) {
	defer leakcheck.Check(t)()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module facades.test\n\ngo 1.26\n\nrequire github.com/capbridge/capbridge v0.0.0\n\n" +
		"replace github.com/capbridge/capbridge => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), []byte(gomod))
	write(t, filepath.Join(dir, "go.sum"), sum)

	listings, _ := filepath.Glob("testdata/*.json")
	hostileOK, _ := filepath.Glob("testdata/hostile/*.json")
	built := 0
	for _, path := range append(listings, hostileOK...) {
		g, err := generateFile(t, path, Options{})
		if err != nil {
			continue // refusals are TestHostile's business
		}
		write(t, filepath.Join(dir, g.ModuleName, g.ModuleName+".go"), g.Source)
		built++
	}
	if built < len(listings) {
		t.Fatalf("only %d façades generated", built)
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build of %d façades: %v\n%s", built, err, clipLines(out.String(), 40))
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func clipLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
