// Package ts carries capwire's TypeScript client (the npm package in
// this directory) into Go binaries and builds it as Node finds an
// installed package: capbridge gen lays it beside a TypeScript façade and
// capbridge's code mode gives it to the programs it runs, so an installed
// binary needs no checkout of this directory, no npm and no network.
package ts

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// Source holds src/*.ts, the client as written.
//
//go:embed src/*.ts
var Source embed.FS

// declarations are src's declarations as the pinned tsc writes them
// (TestDeclarations keeps them so): esbuild compiles, but does not
// declare.
//
//go:embed pkg/*.d.ts
var declarations embed.FS

// msgpackJS is @msgpack/msgpack, the client's one dependency, bundled into
// one ES module (TestMsgpackBundle keeps it what package-lock.json pins).
//
//go:embed pkg/msgpack.mjs
var msgpackJS []byte

// manifest is the client's package.json, whose name and version the built
// package keeps.
//
//go:embed package.json
var manifest []byte

// File is one file of the built package: its path, slash-separated and
// relative to the package's directory, and its content.
type File struct {
	Path string
	Data []byte
}

// Package returns the client as the directory of an installed package
// (node_modules/@capbridge/capwire) holds it: a package.json, each source
// compiled to JavaScript (StripTypes), and @msgpack/msgpack bundled in its
// own node_modules, so Node resolves `import "@capbridge/capwire"` from
// any directory above with nothing else installed. src holds the sources
// as src/*.ts; nil means the embedded ones, whose declarations (.d.ts)
// come too, so tsc type-checks a program against the package. A
// checkout's sources (for developing the client) get none: the embedded
// declarations would not describe them.
func Package(src fs.FS) ([]File, error) {
	var m struct {
		Name, Version, Description, License string
		Dependencies                        map[string]string
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("capwire/ts: package.json: %v", err)
	}
	typed := src == nil
	if typed {
		src = Source
	}
	names, err := fs.Glob(src, "src/*.ts")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("capwire/ts: no src/*.ts")
	}
	pj := map[string]any{"name": m.Name, "version": m.Version, "description": m.Description, "license": m.License,
		"private": true, "type": "module", "dependencies": m.Dependencies}
	exports := map[string]string{"default": "./index.js"}
	if typed {
		exports = map[string]string{"types": "./index.d.ts", "default": "./index.js"}
		pj["types"] = "./index.d.ts"
	}
	pj["exports"] = map[string]any{".": exports}
	meta, err := json.MarshalIndent(pj, "", "  ")
	if err != nil {
		return nil, err
	}
	files := []File{
		{"package.json", append(meta, '\n')},
		{"node_modules/@msgpack/msgpack/package.json", []byte(`{"name": "@msgpack/msgpack", "version": "` + m.Dependencies["@msgpack/msgpack"] + `", "type": "module", "exports": "./index.mjs"}` + "\n")},
		{"node_modules/@msgpack/msgpack/index.mjs", msgpackJS},
	}
	for _, n := range names {
		ts, err := fs.ReadFile(src, n)
		if err != nil {
			return nil, err
		}
		js, err := StripTypes(path.Base(n), ts)
		if err != nil {
			return nil, fmt.Errorf("capwire/ts: compiling the client: %v", err)
		}
		files = append(files, File{strings.TrimSuffix(path.Base(n), ".ts") + ".js", js})
	}
	if typed {
		decls, err := fs.Glob(declarations, "pkg/*.d.ts")
		if err != nil {
			return nil, err
		}
		for _, n := range decls {
			d, err := declarations.ReadFile(n)
			if err != nil {
				return nil, err
			}
			files = append(files, File{path.Base(n), d})
		}
	}
	return files, nil
}

// StripTypes compiles a TypeScript module to JavaScript that the
// installed Node runs (ES2022, an ES module), by esbuild's transform: types
// are removed and TypeScript's own syntax (enums, parameter properties)
// lowered; nothing is bundled, so imports stay as written. Package
// compiles the client with it, and the jail compiles a program's text
// with it. An error names each problem by file, line and column, as a
// compiler would.
func StripTypes(name string, src []byte) ([]byte, error) {
	res := api.Transform(string(src), api.TransformOptions{
		Loader:     api.LoaderTS,
		Format:     api.FormatESModule,
		Target:     api.ES2022,
		Sourcefile: name,
		LogLevel:   api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		var b strings.Builder
		for i, m := range res.Errors {
			if i == 10 {
				fmt.Fprintf(&b, "… and %d more errors\n", len(res.Errors)-i)
				break
			}
			if m.Location != nil {
				fmt.Fprintf(&b, "%s:%d:%d: error: %s\n", m.Location.File, m.Location.Line, m.Location.Column+1, m.Text)
				if m.Location.LineText != "" {
					fmt.Fprintf(&b, "    %s\n", m.Location.LineText)
				}
			} else {
				fmt.Fprintf(&b, "%s: error: %s\n", name, m.Text)
			}
		}
		return nil, errors.New(strings.TrimRight(b.String(), "\n"))
	}
	return res.Code, nil
}
