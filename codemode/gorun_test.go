package codemode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/need"

	"github.com/capbridge/capbridge/internal/testkit/deptest"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// The binary carries every package of the module the capwire client
// imports, and the program's go.mod requires every module it imports
// from outside.
func TestGoClientComplete(t *testing.T) {
	var inModule, outside []string
	for _, d := range deptest.Deps(t, "linux", deptest.Module+"/capwire") {
		if rel, ok := deptest.InModule(d); ok {
			inModule = append(inModule, rel)
		} else if strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			outside = append(outside, d)
		}
	}
	src := t.TempDir()
	if err := writeGoSrc(src); err != nil {
		t.Fatal(err)
	}
	for _, rel := range inModule {
		if m, _ := filepath.Glob(filepath.Join(src, rel, "*.go")); len(m) == 0 {
			t.Errorf("capwire imports %s, which the binary does not carry: add it to gosource.go's go:embed", rel)
		}
	}
	for _, d := range outside {
		if !slices.ContainsFunc(goClientDeps, func(m string) bool { return d == m || strings.HasPrefix(d, m+"/") }) {
			t.Errorf("capwire imports %s, whose module goClientDeps does not list", d)
		}
	}
}

// A Go program runs by go run in the jail against its façade, offline:
// it calls the server, prints, and returns a value with run.Return. The
// first run waits for the build cache to be prepared (once per binary
// and Go version, kept); a compile error is the program's, on its stderr.
func TestRunGo(t *testing.T) {
	defer leakcheck.Check(t)()
	need.Command(t, "go", "the README names Go 1.26")
	r, srv := newRunner(t, func(c *Config) {
		c.Languages = []string{Go}
		c.GoCache = goTestCache(t)
	})
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	start := time.Now()
	if err := r.PrepareGo(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("prepared in %v", time.Since(start))
	res, err := r.Run(ctx, Request{Language: Go, Timeout: 2 * time.Minute, Code: `package main

import (
	"context"
	"fmt"

	"mcp/run"
	"mcp/t"
)

func main() {
	r, err := t.Echo(context.Background(), t.EchoArgs{Text: "hello from go"})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Text())
	run.Return(map[string]any{"echoed": r.Text(), "n": 1 + 1})
}
`})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Stdout != "hello from go\n" || string(res.Value) != `{"echoed":"hello from go","n":2}` || res.Calls != 1 {
		t.Fatalf("run: %+v", res)
	}
	t.Logf("a Go run took %d ms", res.TookMS)
	res, err = r.Run(ctx, Request{Language: Go, Timeout: 2 * time.Minute, Code: "package main\n\nfunc main() { undefined() }\n"})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || !strings.Contains(res.Stderr, "undefined: undefined") {
		t.Errorf("a compile error: %+v", res)
	}
}

// goTestCache is where the tests keep Go's prepared trees: across runs
// (a tree is named by what it holds, so a stale one is never used), in a
// directory the jail's user can reach.
func goTestCache(t testing.TB) string {
	dir := filepath.Join(os.TempDir(), "capbridge-gotest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
