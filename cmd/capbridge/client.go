package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	fs := newCmdFlags("grant", "capbridge grant --servers a,b [--tools a:x,a:y] [--allow-destructive] [--ttl 10m] [--peer-uid N] [flags]", `
Issue a grant and print its token alone on stdout, for a program in a jail
(CAPBRIDGE_TOKEN); the grant's public id, which revoke takes, goes to stderr.
The grant reaches the named servers, limited to the named tools where --tools
names any, until it expires or is revoked. --ttl is from 1s to 24h. A tool
the operator declared destructive is callable only if --tools names it or
--allow-destructive is given.`)
	cf := addClientFlags(fs, false)
	servers := fs.String("servers", "", "comma-separated servers the grant reaches (required)")
	tools := fs.String("tools", "", "comma-separated server:tool pairs limiting a server to those tools")
	var ttl ttlFlag
	fs.Var(&ttl, "ttl", "how long the grant lives, from 1s to 24h (default 10m)")
	peerUID := fs.Int("peer-uid", -1, "only a peer with this uid may use the grant")
	allowDestructive := fs.Bool("allow-destructive", false, "let the grant call the servers' destructive tools without naming each in --tools")
	resources := fs.String("resources", "", "comma-separated servers, among --servers, whose resources the program may read")
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
	req := &control.GrantRequest{Servers: spec, AllowDestructive: *allowDestructive}
	if *resources != "" {
		req.Resources = strings.Split(*resources, ",")
	}
	if ttl.text != "" {
		// Checked here, in the unit the operator typed, as well as by
		// capbridge: a TTL that is not a whole number of milliseconds in
		// range must not reach the wire rounded down to 0.
		if err := bridge.CheckTTL(ttl.d); err != nil {
			return fs.usageError(stderr, "--ttl %s is not within [%s, %s]", ttl.text, bridge.MinGrantTTL, bridge.MaxGrantTTL)
		}
		req.TTLMS = new(uint64(ttl.d / time.Millisecond))
	}
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
	fmt.Fprintf(stderr, "grant %s, expires %s (revoke it with: capbridge revoke %s)\n", r.Grant, time.UnixMilli(r.ExpiresMS).Format(time.RFC3339), r.Grant)
	return exitOK
}

// ttlFlag is --ttl: a duration, kept with the text the operator typed so
// that a refusal quotes it in their unit.
type ttlFlag struct {
	d    time.Duration
	text string
}

func (f *ttlFlag) String() string { return f.text }

func (f *ttlFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (write it like 90s, 10m or 2h)")
	}
	f.d, f.text = d, s
	return nil
}

// maxTokenInput bounds what revoke reads from stdin: a token is 44
// bytes, so a few KiB is generous and a mistaken pipe cannot fill memory.
const maxTokenInput = 4 << 10

// stdin is what commands read input from; tests replace it.
var stdin io.Reader = os.Stdin

func runRevoke(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("revoke", "capbridge revoke [flags] [GRANT-ID | -]", `
End a grant at once: its calls in flight are cancelled and its connections
closed. Name the grant by its public id (capbridge grant prints it on stderr;
the audit trail has it), or give its token on stdin (with - or no argument),
never on the command line, where every user on the host can read it (ps).`)
	cf := addClientFlags(fs, false)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	var grant string
	switch {
	case len(pos) > 1:
		return fs.usageError(stderr, "name one grant, by its id, or give its token on stdin")
	case len(pos) == 0 || pos[0] == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, maxTokenInput+1))
		if err != nil {
			fmt.Fprintln(stderr, "capbridge revoke: reading stdin:", err)
			return exitError
		}
		if len(b) > maxTokenInput {
			return fs.usageError(stderr, "stdin holds more than %d bytes; give one token or grant id", maxTokenInput)
		}
		grant = strings.TrimSpace(string(b))
		if grant == "" || strings.ContainsAny(grant, " \t\n") {
			return fs.usageError(stderr, "stdin must hold one token or grant id")
		}
	default:
		grant = pos[0]
		if strings.HasPrefix(grant, "cbt1.") {
			// Revoked all the same: the secret is already exposed, and
			// ending the grant is what makes that harmless.
			fmt.Fprintln(stderr, "capbridge revoke: warning: a token on the command line is visible to every user on the host; pass the grant id, or the token on stdin (capbridge revoke - <<<\"$TOKEN\")")
		}
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Revoked, error) {
		return c.Revoke(ctx, &control.RevokeRequest{Grant: grant})
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
	fmt.Fprintf(stdout, "%d live grant(s), %d connection(s), procs %d\n", r.Grants, r.Connections, r.Procs)
	for _, s := range r.Servers {
		fmt.Fprintf(stdout, "%-20s %-8s pid=%d tools=%d inflight=%d abandoned=%d queued=%d calls=%d errors=%d\n", s.Name, s.State, s.PID, s.Tools, s.Inflight, s.Abandoned, s.Queued, s.Calls, s.Errors)
		if s.Reason != "" {
			fmt.Fprintf(stdout, "  reason: %s\n", s.Reason)
		}
		if s.URL != "" {
			fmt.Fprintf(stdout, "  remote: %s (%s)\n", s.URL, s.Transport)
		}
		if s.Login != "" {
			fmt.Fprintf(stdout, "  login: %s\n", s.Login)
		}
		if s.Era != "" {
			fmt.Fprintf(stdout, "  mcp: %s %s, server %q %q\n", s.Era, s.Protocol, s.ServerName, s.ServerVersion)
		}
		if s.StderrTail != "" {
			fmt.Fprintf(stdout, "  stderr: %s\n", strings.ReplaceAll(strings.TrimSpace(s.StderrTail), "\n", "\n          "))
		}
	}
	return exitOK
}
