package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/capbridge/capbridge/codegen"
)

// runGen is `capbridge gen`: it reads a saved tools/list result and writes
// the façade and surface codegen generates for it, as
// DIR/<package>/<package>.go and DIR/<package>/SURFACE.txt.
func runGen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capbridge gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listing := fs.String("listing", "", "saved tools/list result: {\"tools\":[…]} or a bare array (required)")
	server := fs.String("server", "", "the server's name, sent verbatim in every call (required)")
	lang := fs.String("lang", "go", "language of the façade (go)")
	out := fs.String("out", "", "directory to write <package>/ into (required)")
	budget := fs.Int("surface-budget", codegen.DefaultSurfaceBudget, "surface size budget in bytes")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 0 || *listing == "" || *server == "" || *out == "" {
		fmt.Fprintln(stderr, "usage: capbridge gen --listing FILE --server NAME [--lang go] --out DIR")
		return exitUsage
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
	dir := filepath.Join(*out, g.ModuleName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
		return exitError
	}
	for name, content := range map[string][]byte{
		g.ModuleName + ".go": g.Source,
		"SURFACE.txt":        []byte(g.Surface),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			fmt.Fprintf(stderr, "capbridge gen: %v\n", err)
			return exitError
		}
	}
	fmt.Fprintf(stdout, "%s: %d tools, surface %d bytes (%s), listing sha256 %s\n",
		dir, len(tools), len(g.Surface), g.Level, g.ListingSHA256)
	return exitOK
}
