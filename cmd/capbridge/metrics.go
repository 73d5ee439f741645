package main

import (
	"context"
	"fmt"
	"io"

	"github.com/capbridge/capbridge/bridge/control"
)

func runMetrics(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("metrics", "capbridge metrics [flags]", `
Print the running capbridge's metrics in the Prometheus text format, read
over the control socket: what [bridge] metrics_listen serves at /metrics,
whether or not it is set (docs/operating.md, "Metrics").`)
	cf := addClientFlags(fs, false)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; metrics takes only flags", pos[0])
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Metrics, error) { return c.Metrics(ctx) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge metrics:", explain(err))
		return exitError
	}
	fmt.Fprint(stdout, r.Text)
	return exitOK
}
