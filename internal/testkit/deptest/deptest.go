// Package deptest reads the module's import graph with the go command, for
// tests that hold the layering in place: what a binary may link, what a
// package may import.
package deptest

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Module is the import path of capbridge's module.
const Module = "github.com/capbridge/capbridge"

// Package is one package as go list describes it: its path and the
// packages its non-test files import.
type Package struct {
	ImportPath string
	Imports    []string
}

// Deps returns every package pkg links, itself included (go list -deps),
// when built for goos ("" for the host's). pkg is a go list pattern,
// resolved in the test's directory.
func Deps(t testing.TB, goos, pkg string) []string {
	t.Helper()
	var paths []string
	for _, p := range list(t, goos, "-deps", pkg) {
		paths = append(paths, p.ImportPath)
	}
	return paths
}

// Imports returns the packages pattern matches, with their imports.
func Imports(t testing.TB, pattern string) []Package {
	t.Helper()
	return list(t, "", pattern)
}

// InModule reports whether path is a package of this module, and returns
// its path within it ("bridge/internal/fairshare"; "" for the root).
func InModule(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, Module+"/")
	return rest, ok
}

func list(t testing.TB, goos string, args ...string) []Package {
	t.Helper()
	// go test puts its own go command first on PATH.
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
	cmd.Stderr = os.Stderr
	if goos != "" {
		cmd.Env = append(os.Environ(), "GOOS="+goos)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deptest: go list %s: %v", strings.Join(args, " "), err)
	}
	var pkgs []Package
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p Package
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("deptest: reading go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("deptest: go list %s named no package", strings.Join(args, " "))
	}
	return pkgs
}
