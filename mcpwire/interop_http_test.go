package mcpwire

import (
	"context"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// TestInteropHTTP meets real HTTP servers from npm: server-everything in
// its streamableHttp mode (SDK 1.x, sessions, SSE answers, resumable
// streams) and its sse mode (the legacy HTTP+SSE transport, reached by
// the fallback), and the SDK v2's createMcpHandler serving 2026-07-28
// only.
func TestInteropHTTP(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	everything := interop.Bin(t, interop.Everything)
	for _, tc := range []struct {
		name, path string
		argv       []string
		era        Era
		transport  string
		tool, args string
	}{
		{"everything streamableHttp", "/mcp", []string{everything, "streamableHttp"}, EraLegacy, "streamable-http", "echo", `{"message":"héllo"}`},
		{"everything sse", "/sse", []string{everything, "sse"}, EraLegacy, "sse", "echo", `{"message":"héllo"}`},
		{"sdk v2 createMcpHandler reject", "/mcp", interop.Script(t, interop.ModernHTTPServer, "reject"), EraModern, "streamable-http", "echo", `{"text":"héllo"}`},
		{"sdk v2 createMcpHandler serve", "/mcp", interop.Script(t, interop.ModernHTTPServer, "serve"), EraModern, "streamable-http", "echo", `{"text":"héllo"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := interop.HTTP(t, tc.argv) + tc.path
			c := dial(t, url, Remote{}, Config{})
			if c.Era() != tc.era || c.Transport() != tc.transport {
				t.Fatalf("era %v over %s, want %v over %s", c.Era(), c.Transport(), tc.era, tc.transport)
			}
			tools, err := c.ListTools(context.Background())
			if err != nil || len(tools) == 0 {
				t.Fatalf("ListTools: %d, %v", len(tools), err)
			}
			res, err := c.CallTool(context.Background(), tc.tool, JSONArgs([]byte(tc.args)), CallOptions{})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("%s: %+v, %v", tc.tool, res, err)
			}
			closeHTTP(t, c)
		})
	}
}
