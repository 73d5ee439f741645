package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/inert"
)

// runResources is `capbridge resources [--json] SERVER`: the resources
// and resource templates a server offers, as the running capbridge lists
// them (control's resources), for the operator or harness deciding
// whether a grant may read them (grant --resources).
func runResources(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("resources", "capbridge resources [flags] SERVER", `
List the resources and resource templates a server offers (its
resources/list and resources/templates/list, followed page by page): what a grant's
--resources lets a program read. One a line: URI, name, MIME type and the
first line of its description; --json prints {"resources": [...],
"templates": [...]}, each entry as the server sent it.`)
	cf := addClientFlags(fs, true)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "name one server")
	}
	req := &control.ResourcesRequest{Server: pos[0]}
	list, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.ResourceList, error) {
		return c.Resources(ctx, req)
	})
	if err != nil {
		fmt.Fprintln(stderr, "capbridge resources:", explain(err))
		return exitError
	}
	if cf.json {
		b, err := json.Marshal(struct {
			Resources json.RawMessage `json:"resources"`
			Templates json.RawMessage `json:"templates"`
		}{json.RawMessage(list.Resources), json.RawMessage(list.Templates)})
		if err != nil {
			fmt.Fprintln(stderr, "capbridge resources: the reply is not JSON:", err)
			return exitError
		}
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	resources, templates := gjson.Parse(list.Resources).Array(), gjson.Parse(list.Templates).Array()
	fmt.Fprintf(stdout, "%s: %d resource(s), %d template(s)\n", inert.Line(pos[0]), len(resources), len(templates))
	printResources(stdout, "resources", "uri", resources)
	printResources(stdout, "templates", "uriTemplate", templates)
	return exitOK
}

// printResources writes one list's entries for a person, under title,
// each addressed by its key member.
func printResources(w io.Writer, title, key string, entries []gjson.Result) {
	if len(entries) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range entries {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", inert.Line(e.Get(key).String()), inert.Line(e.Get("name").String()),
			inert.Line(e.Get("mimeType").String()), inert.Line(firstLine(e.Get("description").String())))
	}
	tw.Flush()
}
