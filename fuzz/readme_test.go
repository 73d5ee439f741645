package fuzz

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's table is how a reader finds a fuzz target and the command
// that runs it, so it must name every target in the module and no other.
func TestREADMEListsEveryTarget(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `(Fuzz\\w+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		listed[m[1]+"."+m[2]] = true
	}

	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
	found := map[string]bool{}
	root := ".."
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The bench module, npm installs and hidden tool folders are
			// not this module's packages.
			if path != root && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || path == filepath.Join(root, "bench")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			found[filepath.ToSlash(pkg)+"."+m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("found no fuzz target in the module")
	}
	for _, k := range slices.Sorted(maps.Keys(found)) {
		if !listed[k] {
			t.Errorf("fuzz/README.md does not list %s", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(listed)) {
		if !found[k] {
			t.Errorf("fuzz/README.md lists %s, which does not exist", k)
		}
	}
}
