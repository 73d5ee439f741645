package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/interchange"
)

// The client commands talk to a running `capbridge serve` through its
// control socket. Each takes --control PATH, whose default is the path
// serve uses without a config ($XDG_RUNTIME_DIR/capbridge/control.sock,
// else /tmp/capbridge-$UID/control.sock).

func defaultControl() string {
	_, control := config.DefaultSockets(os.Getenv("XDG_RUNTIME_DIR"), os.Getuid())
	return control
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	control string
	timeout time.Duration
	json    bool
}

func newClientFlags(name string, stderr io.Writer, withJSON bool) (*flag.FlagSet, *clientFlags) {
	fs := flag.NewFlagSet("capbridge "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := &clientFlags{}
	fs.StringVar(&cf.control, "control", defaultControl(), "the control socket of the running capbridge")
	fs.DurationVar(&cf.timeout, "timeout", 60*time.Second, "give up after this long")
	if withJSON {
		fs.BoolVar(&cf.json, "json", false, "print the reply as JSON, for scripts")
	}
	return fs, cf
}

// withControl dials the control socket and runs one request on it, the
// whole exchange bounded by --timeout.
func withControl[R any](cf *clientFlags, request func(context.Context, *control.Client) (R, error)) (R, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c, err := control.Dial(ctx, cf.control)
	if err != nil {
		var zero R
		return zero, err
	}
	defer c.Close()
	return request(ctx, c)
}

func runCall(args []string, stdout, stderr io.Writer) int {
	fs, cf := newClientFlags("call", stderr, true)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: capbridge call [--control PATH] [--json] [--timeout D] SERVER TOOL ['{\"json\":\"arguments\"}']")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() < 2 || fs.NArg() > 3 {
		fs.Usage()
		return exitUsage
	}
	argsJSON := []byte("{}")
	if fs.NArg() == 3 {
		argsJSON = []byte(fs.Arg(2))
	}
	// The same total conversion the bridge applies to a program's
	// arguments, in reverse: a JSON value that has no exact MessagePack
	// form is refused here, naming its path.
	mp, err := interchange.ToMsgPack(argsJSON)
	if err != nil {
		fmt.Fprintf(stderr, "capbridge call: the arguments are not valid: %v\n", err)
		return exitUsage
	}
	if len(mp) == 0 || (mp[0]&0xf0 != 0x80 && mp[0] != 0xde && mp[0] != 0xdf) {
		fmt.Fprintln(stderr, "capbridge call: the arguments must be a JSON object, such as '{\"text\":\"hi\"}'")
		return exitUsage
	}
	// The bridge's deadline is a little shorter than ours, so a slow tool
	// is reported as the bridge's timeout denial, not as our read timing
	// out on the socket.
	bridgeTimeout := cf.timeout - min(time.Second, cf.timeout/10)
	req := &control.CallRequest{Server: fs.Arg(0), Tool: fs.Arg(1), Args: mp, TimeoutMS: uint64(max(bridgeTimeout, time.Millisecond) / time.Millisecond)}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*capwire.Result, error) { return c.Call(ctx, req) })
	var denied *capwire.Denied
	if err != nil && !errors.As(err, &denied) {
		fmt.Fprintln(stderr, "capbridge call:", err)
		return exitError
	}
	if cf.json {
		return printCallJSON(r, denied, stdout, stderr)
	}
	if denied != nil {
		fmt.Fprintf(stderr, "denied: %s: %s", denied.Code, denied.Message)
		if denied.Path != "" {
			fmt.Fprintf(stderr, " (at %s)", denied.Path)
		}
		if denied.RPCCode != 0 {
			fmt.Fprintf(stderr, " [rpc %d]", denied.RPCCode)
		}
		fmt.Fprintln(stderr)
		return exitError
	}
	for _, b := range r.Content {
		if b.Type == capwire.BlockText {
			fmt.Fprintln(stdout, b.Text)
		} else {
			fmt.Fprintf(stdout, "[%s]\n", b.Kind)
		}
	}
	if len(r.Structured) > 0 {
		js, err := interchange.ToJSON(r.Structured)
		if err == nil {
			var out bytes.Buffer
			if json.Indent(&out, js, "", "  ") == nil {
				js = out.Bytes()
			}
			fmt.Fprintf(stdout, "structured: %s\n", js)
		}
	}
	if r.Truncated {
		fmt.Fprintln(stderr, "(the text was truncated to the bridge's max_result_text)")
	}
	if r.IsError {
		fmt.Fprintln(stderr, "the tool reported an error")
		return exitError
	}
	return exitOK
}

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
	fs, cf := newClientFlags("grant", stderr, false)
	servers := fs.String("servers", "", "comma-separated servers the grant reaches (required)")
	tools := fs.String("tools", "", "comma-separated server:tool pairs limiting a server to those tools")
	ttl := fs.Duration("ttl", bridge.DefaultGrantTTL, "how long the grant lives")
	peerUID := fs.Int("peer-uid", -1, "only a peer with this uid may use the grant")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *servers == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: capbridge grant --servers a,b [--tools a:x,a:y] [--ttl 10m] [--peer-uid N]")
		return exitUsage
	}
	spec := map[string][]string{}
	for _, s := range strings.Split(*servers, ",") {
		spec[strings.TrimSpace(s)] = nil
	}
	if *tools != "" {
		for _, pair := range strings.Split(*tools, ",") {
			server, tool, ok := strings.Cut(strings.TrimSpace(pair), ":")
			if _, granted := spec[server]; !ok || !granted || tool == "" {
				fmt.Fprintf(stderr, "capbridge grant: --tools entry %q must be server:tool for a server in --servers\n", pair)
				return exitUsage
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
		fmt.Fprintln(stderr, "capbridge grant:", err)
		return exitError
	}
	// The token alone on stdout: scripts capture it with $(...).
	fmt.Fprintln(stdout, r.Token)
	return exitOK
}

func runRevoke(args []string, stdout, stderr io.Writer) int {
	fs, cf := newClientFlags("revoke", stderr, false)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: capbridge revoke TOKEN|GRANT-ID")
		return exitUsage
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Revoked, error) {
		return c.Revoke(ctx, &control.RevokeRequest{Grant: fs.Arg(0)})
	})
	if err != nil {
		fmt.Fprintln(stderr, "capbridge revoke:", err)
		return exitError
	}
	if !r.Found {
		fmt.Fprintln(stderr, "capbridge revoke: no live grant by that name (already revoked or expired?)")
		return exitError
	}
	fmt.Fprintln(stdout, "revoked")
	return exitOK
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs, cf := newClientFlags("status", stderr, true)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: capbridge status [--control PATH] [--json]")
		return exitUsage
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Status, error) { return c.Status(ctx) })
	if err != nil {
		fmt.Fprintln(stderr, "capbridge status:", err)
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

// runTools prints the preamble once, then the surface of each named
// server (all when none is named): what a model is shown.
func runTools(args []string, stdout, stderr io.Writer) int {
	fs, cf := newClientFlags("tools", stderr, false)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	names := fs.Args()
	if len(names) == 0 {
		r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Status, error) { return c.Status(ctx) })
		if err != nil {
			fmt.Fprintln(stderr, "capbridge tools:", err)
			return exitError
		}
		for _, s := range r.Servers {
			if bridge.State(s.State) == bridge.StateReady {
				names = append(names, s.Name)
			}
		}
	}
	code := exitOK
	preamble := false
	for _, n := range names {
		r, err := fetchFacade(cf, n, codegen.Go)
		if err != nil {
			fmt.Fprintf(stderr, "capbridge tools: %s: %v\n", n, err)
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

// fetchFacade asks the running capbridge for a server's Go façade.
func fetchFacade(cf *clientFlags, server string, lang codegen.Lang) (*control.Facade, error) {
	return withControl(cf, func(ctx context.Context, c *control.Client) (*control.Facade, error) {
		return c.Facade(ctx, &control.FacadeRequest{Server: server, Lang: string(lang)})
	})
}
