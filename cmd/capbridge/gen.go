package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	pyclient "github.com/capbridge/capbridge/capwire/python"
	tsclient "github.com/capbridge/capbridge/capwire/ts"
	"github.com/capbridge/capbridge/codegen"
)

// runGen is `capbridge gen`: it writes a server's façade where the
// import its language's preamble shows finds it — DIR/<m>/<m>.go for Go
// (import "<module>/m"), DIR/<m>.ts for TypeScript (import from
// "<dir>/m.js" once compiled), DIR/<m>.py for Python (import m, with DIR
// on the path) — and its surface as DIR/<m>.surface.<lang>.txt (the
// preamble, a blank line, then the surface: what a model reads for this
// one server in that language), so façades of several servers and
// languages share one DIR. They are generated from a saved tools/list
// result (--listing, offline), or else fetched from the running capbridge,
// which generated them at boot (--control).
func runGen(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("gen", "capbridge gen --server NAME [--listing FILE | -c FILE | --control PATH] [--lang go|ts|python] --out DIR", "Write a server's façade and its surface, for the language's import, into DIR.")
	listing := fs.String("listing", "", "saved tools/list result: {\"tools\":[…]} or a bare array (required)")
	server := fs.String("server", "", "the server's name, sent verbatim in every call (required)")
	lang := fs.String("lang", "go", "language of the façade: go, ts or python")
	out := fs.String("out", "", "directory to write <package>/ into (required)")
	budget := fs.Int("surface-budget", codegen.DefaultSurfaceBudget, "surface size budget in bytes (with --listing)")
	cf := addClientFlags(fs, false)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 || *server == "" || *out == "" {
		fmt.Fprintln(stderr, "usage: capbridge gen --server NAME [--listing FILE | -c FILE | --control PATH] [--lang go|ts|python] --out DIR")
		return exitUsage
	}
	ext, ok := sourceExt[codegen.Lang(*lang)]
	if !ok {
		fmt.Fprintf(stderr, "capbridge gen: no façade generator for language %q (go, ts or python)\n", *lang)
		return exitUsage
	}
	if *listing == "" {
		f, err := fetchFacade(cf, *server, codegen.Lang(*lang))
		if err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %s\n", explain(err))
			return exitError
		}
		files := facadeFiles{source: []byte(f.Source), js: []byte(f.JS), dts: []byte(f.DTS)}
		return writeFacade(*out, codegen.Lang(*lang), f.Module, ext, files, f.Preamble+"\n"+f.Surface, stdout, stderr, "from the running capbridge")
	}
	f, err := os.Open(*listing)
	if err != nil {
		fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
		return exitError
	}
	// Read one byte past the limit so an oversized file is refused by
	// ParseListing without being read whole.
	data, err := io.ReadAll(io.LimitReader(f, codegen.MaxListingBytes+1))
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
		return exitError
	}
	tools, err := codegen.ParseListing(data)
	if err != nil {
		fmt.Fprintf(stderr, "capbridge gen: %s: %v\n", *listing, err)
		return exitError
	}
	g, err := codegen.Generate(*server, tools, codegen.Options{Lang: codegen.Lang(*lang), SurfaceBudget: *budget})
	if err != nil {
		fmt.Fprintf(stderr, "capbridge gen: server %q refused: %v\n", *server, err)
		if errors.Is(err, codegen.ErrUnsupportedLang) {
			return exitUsage
		}
		return exitError
	}
	preamble, err := codegen.Preamble(codegen.Lang(*lang))
	if err != nil {
		fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
		return exitError
	}
	files := facadeFiles{source: g.Source, js: g.JS, dts: g.DTS}
	return writeFacade(*out, codegen.Lang(*lang), g.ModuleName, ext, files, preamble+"\n"+g.Surface, stdout, stderr,
		fmt.Sprintf("%d tools, surface %d bytes (%s), listing sha256 %s", len(tools), len(g.Surface), g.Level, g.ListingSHA256))
}

// sourceExt is the file extension of a façade, by language.
var sourceExt = map[codegen.Lang]string{codegen.Go: ".go", codegen.TypeScript: ".ts", codegen.Python: ".py"}

// facadeFiles are what gen writes for one façade beside its surface.
type facadeFiles struct {
	source  []byte
	js, dts []byte // TypeScript: the module as JavaScript, and its declarations
}

// writeFacade writes module's files (its source has extension ext) and
// its surface in lang into out: a Go package in its own directory; a
// TypeScript module beside the others, as .ts and as .js with .d.ts (and
// a package.json making .js an ES module, unless one is there), with the
// capwire client as node_modules/@capbridge/capwire, so Node runs it and
// tsc checks against it as they are; a Python module beside the others,
// with the capwire package beside it. Either way the import works from
// out with nothing installed.
func writeFacade(out string, lang codegen.Lang, module, ext string, files facadeFiles, surface string, stdout, stderr io.Writer, summary string) int {
	type file struct {
		path    string
		content []byte
		keep    bool // written only if absent
	}
	src := filepath.Join(out, module+ext)
	if lang == codegen.Go || lang == "" {
		src = filepath.Join(out, module, module+ext)
		lang = codegen.Go
	}
	surf := filepath.Join(out, module+".surface."+string(lang)+".txt")
	write := []file{{path: src, content: files.source}, {path: surf, content: []byte(surface)}}
	switch lang {
	case codegen.TypeScript:
		write = append(write, file{path: filepath.Join(out, module+".js"), content: files.js},
			file{path: filepath.Join(out, module+".d.ts"), content: files.dts},
			file{path: filepath.Join(out, "package.json"), content: []byte("{\"type\": \"module\", \"private\": true}\n"), keep: true})
		// The client, built from the source this binary carries, where
		// Node and tsc resolve "@capbridge/capwire" from out; a stale
		// copy (or link) is replaced whole.
		pkg, err := tsclient.Package(nil)
		if err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
			return exitError
		}
		dir := filepath.Join(out, "node_modules", "@capbridge", "capwire")
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
			return exitError
		}
		for _, f := range pkg {
			write = append(write, file{path: filepath.Join(dir, filepath.FromSlash(f.Path)), content: f.Data})
		}
	case codegen.Python:
		err := fs.WalkDir(pyclient.Client, "capwire", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := pyclient.Client.ReadFile(p)
			write = append(write, file{path: filepath.Join(out, filepath.FromSlash(p)), content: data})
			return err
		})
		if err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
			return exitError
		}
	}
	for _, w := range write {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
			return exitError
		}
		if _, err := os.Stat(w.path); w.keep && err == nil {
			continue
		}
		if err := os.WriteFile(w.path, w.content, 0o644); err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
			return exitError
		}
	}
	fmt.Fprintf(stdout, "%s, %s: %s\n", src, surf, summary)
	return exitOK
}
