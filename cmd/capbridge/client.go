package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/interchange"
)

// printCallJSON prints the outcome (r, or denied when the call was
// denied) as one JSON object with the same fields as the capwire envelope,
// structured content converted to JSON.
func printCallJSON(r *capwire.Result, denied *capwire.Denied, stdout, stderr io.Writer) int {
	var out map[string]any
	if denied != nil {
		out = map[string]any{"t": (&capwire.DeniedMsg{}).Type(), "code": denied.Code, "message": denied.Message}
		if denied.Path != "" {
			out["path"] = denied.Path
		}
		if denied.RPCCode != 0 {
			out["rpc_code"] = denied.RPCCode
		}
	} else {
		content := make([]map[string]string, 0, len(r.Content))
		for _, b := range r.Content {
			if b.Type == capwire.BlockText {
				content = append(content, map[string]string{"type": b.Type, "text": b.Text})
			} else {
				content = append(content, map[string]string{"type": b.Type, "kind": b.Kind})
			}
		}
		out = map[string]any{"t": (&capwire.ResultMsg{}).Type(), "is_error": r.IsError, "truncated": r.Truncated, "content": content, "structured": nil}
		if len(r.Structured) > 0 {
			js, err := interchange.ToJSON(r.Structured)
			if err != nil {
				fmt.Fprintln(stderr, "capbridge call: structured content:", err)
				return exitError
			}
			out["structured"] = json.RawMessage(js)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintln(stderr, "capbridge call:", err)
		return exitError
	}
	fmt.Fprintf(stdout, "%s\n", b)
	if denied != nil || r.IsError {
		return exitError
	}
	return exitOK
}

func runGrant(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("grant", "capbridge grant --servers a,b [--tools a:x,a:y] [--ttl 10m] [--peer-uid N] [flags]", `
Issue a grant and print its token alone on stdout, for a program in a jail
(CAPBRIDGE_TOKEN). The grant reaches the named servers, limited to the named
tools where --tools names any, until it expires or is revoked.`)
	cf := addClientFlags(fs, false)
	servers := fs.String("servers", "", "comma-separated servers the grant reaches (required)")
	tools := fs.String("tools", "", "comma-separated server:tool pairs limiting a server to those tools")
	ttl := fs.Duration("ttl", bridge.DefaultGrantTTL, "how long the grant lives")
	peerUID := fs.Int("peer-uid", -1, "only a peer with this uid may use the grant")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q (name servers with --servers)", pos[0])
	}
	if *servers == "" {
		return fs.usageError(stderr, "name the servers the grant reaches with --servers")
	}
	spec := map[string][]string{}
	for _, s := range strings.Split(*servers, ",") {
		spec[strings.TrimSpace(s)] = nil
	}
	if *tools != "" {
		for _, pair := range strings.Split(*tools, ",") {
			server, tool, ok := strings.Cut(strings.TrimSpace(pair), ":")
			if _, granted := spec[server]; !ok || !granted || tool == "" {
				return fs.usageError(stderr, "--tools entry %q must be server:tool for a server in --servers", pair)
			}
			spec[server] = append(spec[server], tool)
		}
	}
	req := &control.GrantRequest{Servers: spec, TTLMS: uint64(*ttl / time.Millisecond)}
	if *peerUID >= 0 {
		u := uint32(*peerUID)
		req.PeerUID = &u
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Granted, error) { return c.Grant(ctx, req) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge grant:", explain(err))
		return exitError
	}
	// The token alone on stdout: scripts capture it with $(...).
	fmt.Fprintln(stdout, r.Token)
	return exitOK
}

func runRevoke(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("revoke", "capbridge revoke [flags] TOKEN|GRANT-ID", `
End a grant at once: its calls in flight are cancelled and its connections
closed.`)
	cf := addClientFlags(fs, false)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "name one grant, by its token or its id")
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Revoked, error) {
		return c.Revoke(ctx, &control.RevokeRequest{Grant: pos[0]})
	})
	if err != nil {
		fmt.Fprintln(stderr, "capbridge revoke:", explain(err))
		return exitError
	}
	if !r.Found {
		fmt.Fprintln(stderr, "capbridge revoke: no live grant by that name; it was already revoked or has expired (`capbridge status` counts the live ones)")
		return exitError
	}
	fmt.Fprintln(stdout, "revoked")
	return exitOK
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("status", "capbridge status [flags]", `
Show each configured server's state (with why it is not serving, and the end
of its stderr), the live grants and the open connections.`)
	cf := addClientFlags(fs, true)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q", pos[0])
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Status, error) { return c.Status(ctx) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge status:", explain(err))
		return exitError
	}
	if cf.json {
		b, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "%d live grant(s), %d connection(s)\n", r.Grants, r.Connections)
	for _, s := range r.Servers {
		fmt.Fprintf(stdout, "%-20s %-8s pid=%d tools=%d inflight=%d queued=%d calls=%d errors=%d\n", s.Name, s.State, s.PID, s.Tools, s.Inflight, s.Queued, s.Calls, s.Errors)
		if s.Reason != "" {
			fmt.Fprintf(stdout, "  reason: %s\n", s.Reason)
		}
		if s.StderrTail != "" {
			fmt.Fprintf(stdout, "  stderr: %s\n", strings.ReplaceAll(strings.TrimSpace(s.StderrTail), "\n", "\n          "))
		}
	}
	return exitOK
}
