package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/inert"
)

// runTools is `capbridge tools [SERVER...]`: each tool of the named
// servers (every serving one when none is named) with its parameters, as
// an operator reads them; --surface shows instead what a model is shown.
func runTools(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("tools", "capbridge tools [flags] [SERVER...]", `
List the tools of the named servers (every ready server when none is named):
each tool's name and description, then its parameters, with their types,
whether they are required, and their descriptions; what capbridge call's
key=value arguments are typed by. --schema adds each tool's input schema;
--json prints {"server": [tools/list entries]} instead; --surface prints what
a model is shown (the preamble once, then each server's surface), in --lang
go, ts or python.`)
	cf := addClientFlags(fs, true)
	schema := fs.Bool("schema", false, "print each tool's input schema as JSON too")
	surface := fs.Bool("surface", false, "print the preamble and surfaces a model is shown instead")
	lang := fs.String("lang", "go", "the surface's language, with --surface: go, ts or python")
	names, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case !*surface && flagGiven(fs, "lang"):
		return fs.usageError(stderr, "--lang is the surface's language: use it with --surface")
	case *surface && (*schema || cf.json):
		return fs.usageError(stderr, "--surface prints the surfaces as a model reads them; --schema and --json do not apply to it")
	}
	if _, err := codegen.Preamble(codegen.Lang(*lang)); err != nil {
		fmt.Fprintf(stderr, "capbridge tools: --lang %q: no surface for it (go, ts or python)\n", *lang)
		return exitUsage
	}
	if len(names) == 0 {
		r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Status, error) { return c.Status(ctx) })
		if err != nil {
			fmt.Fprintln(stderr, "capbridge tools:", explain(err))
			return exitError
		}
		for _, s := range r.Servers {
			if bridge.State(s.State) == bridge.StateReady {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			fmt.Fprintln(stderr, "capbridge tools: no server is ready; `capbridge status` shows why")
			return exitError
		}
	}
	if *surface {
		return printSurfaces(cf, names, codegen.Lang(*lang), stdout, stderr)
	}
	code = exitOK
	all := map[string]json.RawMessage{}
	for i, n := range names {
		listing, err := fetchListing(cf, n)
		if err != nil {
			fmt.Fprintf(stderr, "capbridge tools: %s: %s\n", n, explain(err))
			code = exitError
			continue
		}
		tools := gjson.Get(listing, "tools")
		if cf.json {
			all[n] = json.RawMessage(tools.Raw)
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printTools(stdout, n, tools, *schema)
	}
	if cf.json {
		b, err := json.Marshal(all)
		if err != nil {
			fmt.Fprintln(stderr, "capbridge tools:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return code
}

// printTools writes one server's tools for a person.
func printTools(w io.Writer, server string, tools gjson.Result, schema bool) {
	list := tools.Array()
	fmt.Fprintf(w, "%s: %d tool(s)\n", server, len(list))
	for _, t := range list {
		fmt.Fprintf(w, "\n  %s", inert.Line(t.Get("name").String()))
		if d := firstLine(t.Get("description").String()); d != "" {
			fmt.Fprintf(w, ": %s", inert.Line(d))
		}
		fmt.Fprintln(w)
		in := t.Get("inputSchema")
		required := map[string]bool{}
		for _, r := range in.Get("required").Array() {
			required[r.String()] = true
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		n := 0
		in.Get("properties").ForEach(func(k, p gjson.Result) bool {
			n++
			req := "optional"
			if required[k.String()] {
				req = "required"
			}
			doc := firstLine(p.Get("description").String())
			if d := p.Get("default"); d.Exists() {
				doc = strings.TrimSpace(doc + " (default " + d.Raw + ")")
			}
			fmt.Fprintf(tw, "      %s\t%s\t%s\t%s\n", inert.Line(k.String()), inert.Line(typeText(p)), req, inert.Line(doc))
			return true
		})
		tw.Flush()
		if n == 0 {
			fmt.Fprintln(w, "      (no parameters)")
		}
		if schema {
			var b bytes.Buffer
			if json.Indent(&b, []byte(in.Raw), "      ", "  ") == nil {
				fmt.Fprintf(w, "      schema: %s\n", inert.Lines(b.String()))
			}
		}
	}
}

// typeText names the type a property schema wants, for a person.
func typeText(p gjson.Result) string {
	if e := p.Get("enum"); e.IsArray() {
		var vals []string
		for _, v := range e.Array() {
			vals = append(vals, v.Raw)
		}
		return "one of " + strings.Join(vals, "|")
	}
	t := schemaType(p)
	switch t {
	case "":
		return "any"
	case "array":
		if it := schemaType(p.Get("items")); it != "" {
			return "array of " + it
		}
	}
	return t
}

// firstLine is a description's first line, clipped for a listing.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return s
}

// printSurfaces prints the preamble once, then each server's surface, in
// lang.
func printSurfaces(cf *clientFlags, names []string, lang codegen.Lang, stdout, stderr io.Writer) int {
	code := exitOK
	preamble := false
	for _, n := range names {
		r, err := fetchFacade(cf, n, lang)
		if err != nil {
			fmt.Fprintf(stderr, "capbridge tools: %s: %s\n", n, explain(err))
			code = exitError
			continue
		}
		if !preamble {
			// The same for every server: the bridge sends it with each
			// façade, and it is shown once.
			fmt.Fprint(stdout, r.Preamble)
			preamble = true
		}
		fmt.Fprint(stdout, "\n"+r.Surface)
		if !strings.HasSuffix(r.Surface, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	return code
}

// fetchFacade asks the running capbridge for a server's façade in lang.
func fetchFacade(cf *clientFlags, server string, lang codegen.Lang) (*control.Facade, error) {
	return withControl(cf, func(ctx context.Context, c *control.Client) (*control.Facade, error) {
		return c.Facade(ctx, &control.FacadeRequest{Server: server, Lang: string(lang)})
	})
}

// runListing is `capbridge listing SERVER`: the tools/list result the
// server's façade was generated from, as JSON, which `capbridge gen
// --listing` reads.
func runListing(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("listing", "capbridge listing [flags] SERVER", `
Print the tools/list result (JSON) the server's façade was generated from:
its callable tools after tools.allow and tools.deny, in the server's order.
Save it to regenerate the façade offline with capbridge gen --listing FILE.`)
	cf := addClientFlags(fs, false)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "name one server")
	}
	listing, err := fetchListing(cf, pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "capbridge listing:", explain(err))
		return exitError
	}
	fmt.Fprintln(stdout, forTerminal(stdout, listing))
	return exitOK
}
