package codemode

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"
)

var update = flag.Bool("update", false, "rewrite runner/msgpack.mjs from capwire/ts's pinned @msgpack/msgpack")

// runner/msgpack.mjs is @msgpack/msgpack, the TypeScript client's one
// dependency, bundled into one ES module so a capbridge binary carries it.
// It must be what capwire/ts's lock pins, bundled as this test does: a
// version bump there fails here until `go test ./codemode -run
// TestMsgpackBundle -update` rewrites it.
func TestMsgpackBundle(t *testing.T) {
	pkg := filepath.Join(repo(), "capwire", "ts", "node_modules", "@msgpack", "msgpack")
	meta, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		t.Fatalf("%v: run `make deps` (npm ci in capwire/ts)", err)
	}
	var p struct{ Version, License string }
	if err := json.Unmarshal(meta, &p); err != nil {
		t.Fatal(err)
	}
	license, err := os.ReadFile(filepath.Join(pkg, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	banner := "// @msgpack/msgpack " + p.Version + ", bundled by codemode's TestMsgpackBundle for the programs\n" +
		"// capbridge runs. Generated: do not edit. Its license (" + p.License + "):\n//\n"
	for line := range strings.Lines(strings.TrimSpace(string(license))) {
		banner += strings.TrimRight("// "+line, " \n") + "\n"
	}
	res := api.Build(api.BuildOptions{
		EntryPoints:   []string{"./dist.esm/index.mjs"},
		AbsWorkingDir: pkg,
		Bundle:        true,
		Format:        api.FormatESModule,
		Target:        api.ES2022,
		LegalComments: api.LegalCommentsEndOfFile,
		Banner:        map[string]string{"js": strings.TrimSuffix(banner, "\n")},
		Write:         false,
		LogLevel:      api.LogLevelSilent,
	})
	if len(res.Errors) > 0 || len(res.OutputFiles) != 1 {
		t.Fatalf("bundling: %+v", res.Errors)
	}
	got := res.OutputFiles[0].Contents
	const path = "runner/msgpack.mjs"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, msgpackJS) {
		t.Fatalf("%s is not @msgpack/msgpack %s as capwire/ts pins it: run go test ./codemode -run TestMsgpackBundle -update", path, p.Version)
	}
}
