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
	fs, cf := newClientFlags("describe", stderr, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: capbridge describe [--control PATH] SERVER [TOOL...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return exitUsage
	}
	req := &control.DescribeRequest{Server: fs.Arg(0), Tools: fs.Args()[1:], Lang: string(codegen.Go)}
	d, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Described, error) { return c.Describe(ctx, req) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge describe:", err)
		return exitError
	}
	fmt.Fprint(stdout, d.Declarations)
	return exitOK
}

// runSearch is `capbridge search [--server S]... [--limit N] QUERY...`:
// the tools that match the query, best first, one a line.
func runSearch(args []string, stdout, stderr io.Writer) int {
	fs, cf := newClientFlags("search", stderr, true)
	var servers []string
	fs.Func("server", "search only this server (repeatable; default: every server with a façade)", func(s string) error {
		servers = append(servers, s)
		return nil
	})
	limit := fs.Uint("limit", control.DefaultSearchLimit, fmt.Sprintf("the most matches to print (at most %d)", control.MaxSearchLimit))
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: capbridge search [--control PATH] [--server S]... [--limit N] [--json] QUERY...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 || *limit == 0 || *limit > control.MaxSearchLimit {
		fs.Usage()
		return exitUsage
	}
	req := &control.SearchRequest{Servers: servers, Query: strings.Join(fs.Args(), " "), Limit: uint32(*limit), Lang: string(codegen.Go)}
	found, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Found, error) { return c.Search(ctx, req) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge search:", err)
		return exitError
	}
	if cf.json {
		b, _ := json.Marshal(found.Matches)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	if len(found.Matches) == 0 {
		fmt.Fprintf(stderr, "capbridge search: no tool matches %q\n", req.Query)
		return exitError
	}
	for _, m := range found.Matches {
		fmt.Fprintf(stdout, "%3d %s %s // tool %q\n", m.Score, m.Server, m.Signature, m.Tool)
	}
	return exitOK
}
