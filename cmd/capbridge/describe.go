package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/codegen"
)

// runDescribe is `capbridge describe SERVER [TOOL...]`: the full
// declarations of the named tools (every tool when none is named), by
// function or wire name, as the running capbridge's describe serves them.
func runDescribe(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("describe", "capbridge describe [flags] SERVER [TOOL...]", `
Show the full declarations of the named tools (every tool when none is
named), by function or wire name, in the surface's notation: what a lean
surface leaves out.`)
	cf := addClientFlags(fs, false)
	lang := langFlag(fs)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) < 1 {
		return fs.usageError(stderr, "name a server")
	}
	if _, ok := sourceExt[codegen.Lang(*lang)]; !ok {
		return fs.usageError(stderr, "no façade language %q (go, ts or python)", *lang)
	}
	req := &control.DescribeRequest{Server: pos[0], Tools: pos[1:], Lang: *lang}
	d, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Described, error) { return c.Describe(ctx, req) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge describe:", explain(err))
		return exitError
	}
	fmt.Fprint(stdout, d.Declarations)
	return exitOK
}

// langFlag adds --lang: the language whose notation declarations and
// signatures are written in.
func langFlag(fs *cmdFlags) *string {
	return fs.String("lang", string(codegen.Go), "the façade language to write declarations in: go, ts or python")
}

// runSearch is `capbridge search [--server S]... [--limit N] QUERY...`:
// the tools that match the query, best first, one a line.
func runSearch(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("search", "capbridge search [flags] QUERY...", `
Find tools by words in their names, titles, descriptions and arguments, best
first, one a line: score, server, the call's signature and the tool's wire
name.`)
	cf := addClientFlags(fs, true)
	var servers []string
	fs.Func("server", "search only this server (repeatable; default: every server with a façade)", func(s string) error {
		servers = append(servers, s)
		return nil
	})
	limit := fs.Uint("limit", control.DefaultSearchLimit, fmt.Sprintf("the most matches to print (at most %d)", control.MaxSearchLimit))
	lang := langFlag(fs)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return fs.usageError(stderr, "give the words to search for")
	}
	if *limit == 0 || *limit > control.MaxSearchLimit {
		return fs.usageError(stderr, "--limit must be from 1 to %d", control.MaxSearchLimit)
	}
	if _, ok := sourceExt[codegen.Lang(*lang)]; !ok {
		return fs.usageError(stderr, "no façade language %q (go, ts or python)", *lang)
	}
	req := &control.SearchRequest{Servers: servers, Query: strings.Join(pos, " "), Limit: uint32(*limit), Lang: *lang}
	found, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Found, error) { return c.Search(ctx, req) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge search:", explain(err))
		return exitError
	}
	if cf.json {
		b, _ := json.Marshal(found.Matches)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	if len(found.Matches) == 0 {
		fmt.Fprintf(stderr, "capbridge search: no tool matches %q; try other words, or `capbridge tools` for every tool\n", req.Query)
		return exitError
	}
	mark := "//" // the language's line comment
	if codegen.Lang(*lang) == codegen.Python {
		mark = "#"
	}
	for _, m := range found.Matches {
		fmt.Fprintf(stdout, "%3d %s %s %s tool %q\n", m.Score, m.Server, m.Signature, mark, m.Tool)
	}
	return exitOK
}
