package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/interchange"
	"github.com/capbridge/capbridge/internal/inert"
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
--allow-destructive is given.

--quota [SCOPE:]KEY=VALUE[,KEY=VALUE…] bounds what the grant's calls may use,
over the operator's defaults ([quota] and [mcp.X.quota] in capbridge.toml);
give it once per scope. SCOPE is a server ("github") or a tool
("github/create_issue"); without one the quota is the whole grant's. KEYs:
rate (calls per second, or N/m, N/h), burst, calls, bytes_in and bytes_out
(bytes, or 64KiB, 16MiB), time (a duration: the calls' time in capbridge).
  capbridge grant --servers github --quota rate=5,calls=1000 --quota github/create_issue:calls=3`)
	cf := addClientFlags(fs, false)
	servers := fs.String("servers", "", "comma-separated servers the grant reaches (required)")
	tools := fs.String("tools", "", "comma-separated server:tool pairs limiting a server to those tools")
	var ttl ttlFlag
	fs.Var(&ttl, "ttl", "how long the grant lives, from 1s to 24h (default 10m)")
	peerUID := fs.Int("peer-uid", -1, "only a peer with this uid may use the grant (-1: any peer the call socket lets in)")
	allowDestructive := fs.Bool("allow-destructive", false, "let the grant call the servers' destructive tools without naming each in --tools")
	resources := fs.String("resources", "", "comma-separated servers, among --servers, whose resources the program may read")
	var quotas quotaFlag
	fs.Var(&quotas, "quota", "[SCOPE:]KEY=VALUE,… a quota of the grant's calls (repeatable; see above)")
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
	req := &control.GrantRequest{Servers: spec, AllowDestructive: *allowDestructive, Quotas: quotas.q}
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
	switch {
	case *peerUID < -1 || *peerUID >= math.MaxUint32:
		// uid_t is 32 bits and (uid_t)-1 is no uid: a value outside would
		// wrap to another user's uid, or to none.
		return fs.usageError(stderr, "--peer-uid %d is not a uid (0 to %d, or -1 for any peer)", *peerUID, uint32(math.MaxUint32-1))
	case *peerUID >= 0:
		req.PeerUID = new(uint32(*peerUID))
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

// quotaFlag is --quota, repeatable: one scope's quotas each time.
type quotaFlag struct{ q []control.Quota }

func (f *quotaFlag) String() string { return "" }

func (f *quotaFlag) Set(s string) error {
	q, err := parseQuota(s)
	if err != nil {
		return err
	}
	for _, have := range f.q {
		if have.Scope == q.Scope {
			return fmt.Errorf("scope %q is given twice; put its quotas in one --quota", q.Scope)
		}
	}
	f.q = append(f.q, q)
	return nil
}

// parseQuota reads "[SCOPE:]KEY=VALUE,…". The scope ends at the last
// colon before the first "=", so a tool's name may hold colons.
func parseQuota(s string) (control.Quota, error) {
	var q control.Quota
	body := s
	if eq := strings.IndexByte(s, '='); eq >= 0 {
		if c := strings.LastIndexByte(s[:eq], ':'); c >= 0 {
			q.Scope, body = s[:c], s[c+1:]
			if q.Scope == "" {
				return q, fmt.Errorf("%q: the scope before ':' is empty (leave it out for the whole grant)", s)
			}
		}
	}
	for _, kv := range strings.Split(body, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return q, fmt.Errorf("%q: write KEY=VALUE (rate, burst, calls, bytes_in, bytes_out, time)", kv)
		}
		bad := func(want string) error { return fmt.Errorf("%s=%s: want %s", k, v, want) }
		switch k {
		case "rate":
			num, per, _ := strings.Cut(v, "/")
			f, err := strconv.ParseFloat(num, 64)
			div := map[string]float64{"": 1, "s": 1, "m": 60, "h": 3600}[per]
			if err != nil || div == 0 || !(f > 0) || math.IsInf(f, 0) {
				return q, bad("calls per second above 0, or N/m, N/h")
			}
			q.Rate = f / div
		case "burst":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return q, bad("a whole number of calls above 0")
			}
			q.Burst = uint32(n)
		case "calls":
			n, err := strconv.ParseUint(v, 10, 63)
			if err != nil || n == 0 {
				return q, bad("a whole number of calls above 0")
			}
			q.Calls = n
		case "bytes_in", "bytes_out":
			n, ok := config.ParseSize(v, math.MaxInt64)
			if !ok || n == 0 {
				return q, bad("a byte count above 0, or a size such as 64KiB or 16MiB")
			}
			if k == "bytes_in" {
				q.BytesIn = uint64(n)
			} else {
				q.BytesOut = uint64(n)
			}
		case "time":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d > bridge.MaxGrantTTL {
				return q, bad("a duration from 1ms to 24h, such as 90s or 10m")
			}
			q.TimeMS = uint64(d / time.Millisecond)
		default:
			return q, fmt.Errorf("unknown quota %q (rate, burst, calls, bytes_in, bytes_out, time)", k)
		}
	}
	return q, nil
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
	fmt.Fprintf(stderr, "calls=%d denied=%d arg_bytes=%d result_bytes=%d took=%s\n", r.Calls, r.Denied, r.ArgBytes, r.ResultBytes, time.Duration(r.TookMS)*time.Millisecond)
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
			fmt.Fprintf(stdout, "  reason: %s\n", inert.Line(s.Reason))
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
			fmt.Fprintf(stdout, "  stderr: %s\n", strings.ReplaceAll(inert.Lines(strings.TrimSpace(s.StderrTail)), "\n", "\n          "))
		}
	}
	for _, s := range r.Draining {
		fmt.Fprintf(stdout, "%-20s draining after a reload: pid=%d inflight=%d abandoned=%d\n", s.Name, s.PID, s.Inflight, s.Abandoned)
	}
	for _, g := range r.GrantUsage {
		fmt.Fprintf(stdout, "grant %s calls=%d denied=%d arg_bytes=%d result_bytes=%d took=%s", g.Grant, g.Calls, g.Denied, g.ArgBytes, g.ResultBytes, time.Duration(g.TookMS)*time.Millisecond)
		if g.Run != "" {
			fmt.Fprintf(stdout, " run=%s", g.Run)
		}
		fmt.Fprintln(stdout)
		for _, q := range g.Quotas {
			fmt.Fprintf(stdout, "  quota %s\n", quotaLine(q))
		}
	}
	if r.GrantUsageOmitted > 0 {
		fmt.Fprintf(stdout, "(%d quieter grant(s) not shown)\n", r.GrantUsageOmitted)
	}
	if rl := r.Reloaded; rl != nil {
		at := time.UnixMilli(rl.AtMS).Format(time.RFC3339)
		if rl.Error != "" {
			fmt.Fprintf(stdout, "last reload (%s, %s) refused: %s\n", rl.Trigger, at, rl.Error)
		} else {
			fmt.Fprintf(stdout, "last reload (%s, %s): %s\n", rl.Trigger, at, reloadSummary(rl))
		}
	}
	return exitOK
}

func runReload(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("reload", "capbridge reload [flags]", `
Have the running capbridge read its config files (and lock) again and apply
them without a restart: added servers boot, removed ones finish their calls
and stop, a server whose command, args, env, cwd, url or headers changed is
replaced once its calls finish (the new process boots first), and tools,
destructive, restrict, timeouts, quotas and the lock apply from the next
call. Unchanged servers, grants and connections are untouched. A config that
does not validate is refused whole, naming its file:line, and the running
one stays. [bridge] settings other than lock and lock_mode need a restart.
Prints what changed; status shows the last reload.`)
	cf := addClientFlags(fs, true)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; reload takes only flags", pos[0])
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Reloaded, error) { return c.Reload(ctx) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge reload:", explain(err))
		return exitError
	}
	if cf.json {
		b, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintln(stdout, "reloaded:", reloadSummary(r))
	return exitOK
}

// quotaLine renders one scope's quotas and use: "github: calls 3/10,
// rate 5/s (2.0 tokens)".
func quotaLine(q control.QuotaUsage) string {
	scope := q.Scope
	if scope == "" {
		scope = "(grant)"
	}
	var parts []string
	if q.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %g/s burst %d (%.1f tokens left)", q.Rate, q.Burst, q.Tokens))
	}
	if q.Calls > 0 {
		parts = append(parts, fmt.Sprintf("calls %d/%d", q.UsedCalls, q.Calls))
	}
	if q.BytesIn > 0 {
		parts = append(parts, fmt.Sprintf("bytes_in %d/%d", q.UsedBytesIn, q.BytesIn))
	}
	if q.BytesOut > 0 {
		parts = append(parts, fmt.Sprintf("bytes_out %d/%d", q.UsedBytesOut, q.BytesOut))
	}
	if q.TimeMS > 0 {
		parts = append(parts, fmt.Sprintf("time %s/%s", time.Duration(q.UsedTimeMS)*time.Millisecond, time.Duration(q.TimeMS)*time.Millisecond))
	}
	return scope + ": " + strings.Join(parts, ", ")
}

// reloadSummary renders what a reload changed, one clause per kind.
func reloadSummary(r *control.Reloaded) string {
	var parts []string
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"removed", r.Removed}, {"replaced", r.Replaced}, {"changed", r.Changed}, {"unchanged", r.Unchanged}} {
		if len(l.names) > 0 {
			parts = append(parts, l.what+" "+strings.Join(l.names, ","))
		}
	}
	if r.Defaults {
		parts = append(parts, "quota defaults changed")
	}
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, "; ")
}
