package ts

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evanw/esbuild/pkg/api"
)

var update = flag.Bool("update", false, "rewrite pkg/: msgpack.mjs from the pinned @msgpack/msgpack, the declarations with the pinned tsc")

// pinned returns the path of the package's pinned node_modules, failing t
// when `make deps` has not installed them.
func pinned(t *testing.T) string {
	t.Helper()
	nm, err := filepath.Abs("node_modules")
	if err == nil {
		_, err = os.Stat(filepath.Join(nm, "typescript", "bin", "tsc"))
	}
	if err != nil {
		t.Fatalf("%v: run `make deps` (npm ci in capwire/ts)", err)
	}
	return nm
}

// run runs argv in dir, failing t with its output if it fails or outlives
// three minutes.
func run(t *testing.T, dir string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// pkg/msgpack.mjs is @msgpack/msgpack bundled into one ES module so a
// capbridge binary carries it. It must be what package-lock.json pins,
// bundled as this test does: a version bump there fails here until `go
// test ./capwire/ts -run TestMsgpackBundle -update` rewrites it.
func TestMsgpackBundle(t *testing.T) {
	pkg := filepath.Join(pinned(t), "@msgpack", "msgpack")
	meta, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Version, License string }
	if err := json.Unmarshal(meta, &p); err != nil {
		t.Fatal(err)
	}
	license, err := os.ReadFile(filepath.Join(pkg, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	banner := "// @msgpack/msgpack " + p.Version + ", bundled by capwire/ts's TestMsgpackBundle for the\n" +
		"// package capbridge builds. Generated: do not edit. Its license (" + p.License + "):\n//\n"
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
	const path = "pkg/msgpack.mjs"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, msgpackJS) {
		t.Fatalf("%s is not @msgpack/msgpack %s as package-lock.json pins it: run go test ./capwire/ts -run TestMsgpackBundle -update", path, p.Version)
	}
}

// pkg/*.d.ts are the declarations the pinned tsc writes for src/*.ts
// under tsconfig.json: a change to the client's sources fails here until
// `go test ./capwire/ts -run TestDeclarations -update` rewrites them.
func TestDeclarations(t *testing.T) {
	nm := pinned(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): the declarations cannot be checked", err)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	conf, err := json.Marshal(map[string]any{
		"extends": filepath.Join(here, "tsconfig.json"),
		"compilerOptions": map[string]any{"rootDir": filepath.Join(here, "src"), "outDir": out,
			"declaration": true, "emitDeclarationOnly": true, "typeRoots": []string{filepath.Join(nm, "@types")}},
		"include": []string{filepath.Join(here, "src")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, node, filepath.Join(nm, "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	written, _ := filepath.Glob(filepath.Join(out, "*.d.ts"))
	kept, _ := filepath.Glob(filepath.Join("pkg", "*.d.ts"))
	if *update {
		for _, f := range kept {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range written {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("pkg", filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	base := func(fs []string) []string {
		var out []string
		for _, f := range fs {
			out = append(out, filepath.Base(f))
		}
		return out
	}
	if !slices.Equal(base(written), base(kept)) {
		t.Fatalf("tsc declares %q, pkg/ holds %q: run go test ./capwire/ts -run TestDeclarations -update", base(written), base(kept))
	}
	for _, f := range written {
		want, _ := os.ReadFile(f)
		got, _ := os.ReadFile(filepath.Join("pkg", filepath.Base(f)))
		if !bytes.Equal(got, want) {
			t.Errorf("pkg/%s is not what tsc declares for the sources: run go test ./capwire/ts -run TestDeclarations -update", filepath.Base(f))
		}
	}
}

// The built package works where it is written, as an installed one
// would: in a fresh directory holding nothing but it, Node imports it by
// name (its bundled @msgpack/msgpack included) and the pinned tsc, in
// its strictest settings and checking the declarations too, type-checks
// a program against it.
func TestPackage(t *testing.T) {
	nm := pinned(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v)", err)
	}
	files, err := Package(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, "node_modules", "@capbridge", "capwire", filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Encoding the arguments runs @msgpack/msgpack; decoding a denial runs
	// the client's own reader.
	write("program.ts", `import * as capwire from "@capbridge/capwire";

const args: Uint8Array = capwire.encodeArgs({ path: "/tmp", depth: 2 });
const denial = Uint8Array.from([0x85, 0xa1, 0x74, 0xa6, 0x64, 0x65, 0x6e, 0x69, 0x65, 0x64, 0xa2, 0x69, 0x64, 0x07,
  0xa4, 0x63, 0x6f, 0x64, 0x65, 0xad, 0x62, 0x61, 0x64, 0x5f, 0x61, 0x72, 0x67, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73,
  0xa7, 0x6d, 0x65, 0x73, 0x73, 0x61, 0x67, 0x65, 0xa1, 0x78, 0xa4, 0x70, 0x61, 0x74, 0x68, 0xa2, 0x2f, 0x61]);
const m: capwire.Message = capwire.decode(denial);
const opts: capwire.CallOptions = { timeoutMs: 1000 };
console.log(capwire.version, args.length, m.t === "denied" ? m.code + " at " + m.path : m.t, typeof capwire.Client, opts.timeoutMs);
`)
	write("package.json", `{"type": "module", "private": true}`)
	conf, err := json.Marshal(map[string]any{"compilerOptions": map[string]any{"strict": true, "target": "ES2022", "lib": []string{"ES2022"},
		"module": "NodeNext", "moduleResolution": "NodeNext", "types": []string{"node"}, "typeRoots": []string{filepath.Join(nm, "@types")},
		"exactOptionalPropertyTypes": true, "noUncheckedIndexedAccess": true, "skipLibCheck": false, "noEmitOnError": true, "outDir": "out"},
		"files": []string{"program.ts"}})
	if err != nil {
		t.Fatal(err)
	}
	write("tsconfig.json", string(conf))
	run(t, dir, node, filepath.Join(nm, "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	if got := run(t, dir, node, filepath.Join("out", "program.js")); got != "1 18 bad_arguments at /a function 1000\n" {
		t.Errorf("the program printed %q", got)
	}
}
