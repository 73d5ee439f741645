package mcpwire

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// The TypeScript SDKs' own servers (servers/*.mjs) through both eras:
// SDK v2 as a dual-era server (the probe pins it modern) and as a
// modern-only one, and SDK 1.x, which refuses the probe with -32601;
// and the v2 server's legacy path, which a client that initializes first
// pins.
// Each answers every kind of call, progress keeps a call alive,
// cancellation reaches the server, list_changed reaches the owner (on
// the listen stream in the modern era), and the server exits on stdin
// EOF at Close.
func TestInteropSDKEras(t *testing.T) {
	for _, tt := range []struct {
		name   string
		argv   func(t *testing.T) []string
		era    Era
		server string
		force  Era // Config.Era
	}{
		{"v2 dual-era", func(t *testing.T) []string { return interop.Script(t, interop.ModernServer, "serve") }, EraModern, "capbridge-interop-modern", EraAuto},
		{"v2 modern only", func(t *testing.T) []string { return interop.Script(t, interop.ModernServer, "reject") }, EraModern, "capbridge-interop-modern", EraAuto},
		{"v1 legacy", func(t *testing.T) []string { return interop.Script(t, interop.LegacyServer) }, EraLegacy, "capbridge-interop-legacy", EraAuto},
		// The v2 server's legacy path, reached by initializing first.
		{"v2 dual-era, legacy forced", func(t *testing.T) []string { return interop.Script(t, interop.ModernServer, "serve") }, EraLegacy, "capbridge-interop-modern", EraLegacy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			root := t.TempDir()
			cmd := Command{Argv: tt.argv(t), Dir: root, Inherit: []string{"PATH", "HOME"},
				StdinGrace: waitFor, TermGrace: waitFor, KillGrace: waitFor}
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			c, err := Start(ctx, cmd, Config{ClientName: "mcpwire-interop", ClientVersion: "1", Era: tt.force})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			defer func() {
				ex, err := c.Close()
				if err != nil || ex.How != ExitedOnEOF {
					t.Errorf("close: %+v %v; want an exit on stdin EOF", ex, err)
				}
			}()
			if c.Era() != tt.era || c.ServerInfo().Name != tt.server {
				t.Fatalf("era %v server %+v", c.Era(), c.ServerInfo())
			}
			tools, err := c.ListTools(ctx)
			if err != nil || len(tools) != 8 {
				t.Fatalf("list: %d %v", len(tools), err)
			}
			for _, call := range []struct {
				tool, args, kind, text string
				structured, isError    bool
			}{
				{tool: "echo", args: `{"text":"héllo"}`, kind: "text", text: "héllo"},
				{tool: "image", args: `{}`, kind: "image"},
				{tool: "add", args: `{"a":2,"b":40}`, kind: "text", text: "42", structured: true},
				{tool: "fail", args: `{}`, kind: "text", text: "it failed", isError: true},
			} {
				r, err := c.CallTool(ctx, call.tool, JSONArgs([]byte(call.args)), CallOptions{})
				if err != nil {
					t.Fatalf("%s: %v", call.tool, err)
				}
				if len(r.Content) != 1 || r.Content[0].Type != call.kind || r.Content[0].Text != call.text ||
					(r.StructuredContent != nil) != call.structured || r.IsError != call.isError {
					t.Errorf("%s: %+v", call.tool, r)
				}
			}
			// 10 steps 300 ms apart outlive a 2 s idle timeout only
			// through progress; a stall of 1.7 s would fail it.
			if r, err := c.CallTool(ctx, "progress", JSONArgs([]byte(`{"steps":10,"interval_ms":300}`)), CallOptions{IdleTimeout: 2 * time.Second}); err != nil || textOf(r) != "done" {
				t.Errorf("progress: %v %v", r, err)
			}
			// Cancellation: hang answers only once cancelled, and
			// records it; the late answer is ignored.
			hctx, hcancel := context.WithCancel(ctx)
			hdone := make(chan error, 1)
			go func() { _, err := c.CallTool(hctx, "hang", JSONArgs([]byte(`{}`)), CallOptions{}); hdone <- err }()
			waitText(t, c, "cancelled", "started 1; cancelled ")
			hcancel()
			if err := <-hdone; !errors.Is(err, context.Canceled) {
				t.Errorf("hang: %v", err)
			}
			waitText(t, c, "cancelled", "started 1; cancelled hang")
			// A change of the tool list reaches the owner.
			drain(c.ToolsChanged())
			if _, err := c.CallTool(ctx, "relist", JSONArgs([]byte(`{}`)), CallOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.ToolsChanged():
			case <-ctx.Done():
				t.Fatal("list_changed not surfaced")
			}
			if tools, err := c.ListTools(ctx); err != nil || len(tools) != 9 {
				t.Errorf("relisted: %d %v", len(tools), err)
			}
		})
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

func textOf(r *CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// waitText calls tool until its text is want: each answer is an event,
// and the outer bound is waitFor.
func waitText(t *testing.T, c *Client, tool, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		r, err := c.CallTool(ctx, tool, JSONArgs([]byte(`{}`)), CallOptions{})
		if err != nil {
			t.Fatalf("%s: %v (waiting for %q)", tool, err, want)
		}
		if textOf(r) == want {
			return
		}
	}
}
