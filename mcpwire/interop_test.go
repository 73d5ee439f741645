package mcpwire

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// startInterop starts one pinned npm server; node needs PATH and HOME.
func startInterop(t *testing.T, name string, env ...string) *Client {
	t.Helper()
	root := t.TempDir()
	cmd := Command{
		Argv: interop.Command(t, name, root), Env: env, Dir: root,
		// How a node server ends is not asserted here, only that it does:
		// short first rungs keep Close quick for a server that ignores
		// stdin EOF, and SIGKILL's reap gets the generous bound.
		StdinGrace: 3 * time.Second, TermGrace: 2 * time.Second, KillGrace: waitFor,
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := Start(ctx, cmd, Config{ClientName: "mcpwire-interop", ClientVersion: "1"})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return c
}

func kinds(r *CallToolResult) map[string]int {
	m := map[string]int{}
	for _, b := range r.Content {
		m[b.Type]++
	}
	return m
}

func TestInteropEverything(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startInterop(t, interop.Everything)
	defer func() {
		if _, err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if v := c.Initialize().ProtocolVersion; !versionSupported(v) {
		t.Fatalf("version %q", v)
	}
	// server-everything sends tools/list_changed before its initialize
	// response; the owner must see it, not lose it or choke on it.
	select {
	case <-c.ToolsChanged():
	case <-time.After(waitFor):
		t.Error("unsolicited tools/list_changed not surfaced")
	}
	ctx := context.Background()
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
	}
	for _, n := range []string{"echo", "get-sum", "get-tiny-image", "get-resource-links", "get-resource-reference", "get-structured-content", "trigger-long-running-operation"} {
		if !names[n] {
			t.Errorf("tool %q not listed", n)
		}
	}
	for _, tt := range []struct {
		tool, args string
		want       map[string]int
		text       string
		structured bool
	}{
		{tool: "echo", args: `{"message":"héllo"}`, want: map[string]int{"text": 1}, text: "Echo: héllo"},
		{tool: "get-sum", args: `{"a":2,"b":40}`, want: map[string]int{"text": 1}, text: "42"},
		{tool: "get-tiny-image", args: `{}`, want: map[string]int{"text": 2, "image": 1}},
		{tool: "get-resource-links", args: `{"count":2}`, want: map[string]int{"text": 1, "resource_link": 2}},
		{tool: "get-resource-reference", args: `{"resourceType":"Text","resourceId":1}`, want: map[string]int{"text": 2, "resource": 1}},
		{tool: "get-structured-content", args: `{"location":"Chicago"}`, want: map[string]int{"text": 1}, structured: true},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, waitFor)
			defer cancel()
			r, err := c.CallTool(ctx, tt.tool, JSONArgs([]byte(tt.args)), CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := kinds(r)
			for k, n := range tt.want {
				if got[k] != n {
					t.Errorf("kinds %v, want %v", got, tt.want)
				}
			}
			if tt.text != "" && !strings.Contains(texts(r), tt.text) {
				t.Errorf("text %q lacks %q", texts(r), tt.text)
			}
			if tt.structured != (r.StructuredContent != nil) || r.IsError {
				t.Errorf("structured %s isError %v", r.StructuredContent, r.IsError)
			}
		})
	}
	// Progress: 25 steps over 5 s survive a 2.5 s idle timeout only
	// because each progress notification (every 200 ms) resets it. The
	// exact arithmetic of idle and maximum deadlines is pinned on a fake
	// clock (TestMemoryProgress*); this checks that a real SDK server's
	// progress reaches the call it names. A real process cannot run on a
	// fake clock, so the margin is wide: only a stall of more than 2.3 s
	// between two notifications could fail it.
	ctx2, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	r, err := c.CallTool(ctx2, "trigger-long-running-operation", JSONArgs([]byte(`{"duration":5,"steps":25}`)), CallOptions{IdleTimeout: 2500 * time.Millisecond})
	if err != nil || !strings.Contains(texts(r), "completed") {
		t.Errorf("long running: %v %v", r, err)
	}
}

func TestInteropOthers(t *testing.T) {
	mem := filepath.Join(t.TempDir(), "memory.jsonl")
	for _, tt := range []struct {
		server, tool, args, want string
		env                      []string
		prepare                  func(t *testing.T, c *Client)
	}{
		{server: interop.Filesystem, tool: "list_allowed_directories", args: `{}`, want: "Allowed directories"},
		{server: interop.Memory, env: []string{"MEMORY_FILE_PATH=" + mem}, tool: "read_graph", args: `{}`, want: "capbridge"},
		{server: interop.SequentialThinking, tool: "sequentialthinking", args: `{"thought":"first","nextThoughtNeeded":false,"thoughtNumber":1,"totalThoughts":1}`, want: "thoughtNumber"},
	} {
		t.Run(tt.server, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c := startInterop(t, tt.server, tt.env...)
			defer func() {
				if _, err := c.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			tools, err := c.ListTools(ctx)
			if err != nil || len(tools) == 0 {
				t.Fatalf("list: %d %v", len(tools), err)
			}
			if tt.server == interop.Memory {
				if _, err := c.CallTool(ctx, "create_entities", JSONArgs([]byte(`{"entities":[{"name":"capbridge","entityType":"project","observations":["bridges MCP"]}]}`)), CallOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			r, err := c.CallTool(ctx, tt.tool, JSONArgs([]byte(tt.args)), CallOptions{})
			if err != nil || r.IsError || !strings.Contains(texts(r), tt.want) {
				t.Fatalf("%s: %v %v", tt.tool, r, err)
			}
		})
	}
	if _, err := os.Stat(mem); err != nil {
		t.Errorf("memory server did not write MEMORY_FILE_PATH: %v", err)
	}
}
