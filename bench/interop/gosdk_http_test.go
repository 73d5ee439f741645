// Package interop holds capbridge's interop tests against servers built
// on the Go MCP SDKs, which live in this module so that capbridge's own
// go.mod never depends on them.
package interop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capbridge/capbridge/mcpwire"
)

type echoArgs struct {
	Text string `json:"text"`
}

func server() *gosdk.Server {
	s := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-http", Version: "1"}, nil)
	gosdk.AddTool(s, &gosdk.Tool{Name: "echo", Description: "echoes text"}, func(ctx context.Context, req *gosdk.CallToolRequest, a echoArgs) (*gosdk.CallToolResult, any, error) {
		if err := req.Session.NotifyProgress(ctx, &gosdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 1}); err != nil && req.Params.GetProgressToken() != nil {
			return nil, nil, err
		}
		return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: a.Text}}}, nil, nil
	})
	return s
}

// TestGoSDKStreamableHTTP: mcpwire meets go-sdk's StreamableHTTPHandler
// with sessions and SSE answers (progress, then the reply), with JSON
// answers, and stateless.
func TestGoSDKStreamableHTTP(t *testing.T) {
	s := server()
	for _, tc := range []struct {
		name string
		opts *gosdk.StreamableHTTPOptions
	}{
		{"sessions, SSE answers", nil},
		{"sessions, JSON answers", &gosdk.StreamableHTTPOptions{JSONResponse: true}},
		{"stateless", &gosdk.StreamableHTTPOptions{Stateless: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return s }, tc.opts))
			defer ts.Close()
			c, err := mcpwire.Dial(context.Background(), mcpwire.Remote{URL: ts.URL}, mcpwire.Config{})
			if err != nil {
				t.Fatal(err)
			}
			tools, err := c.ListTools(context.Background())
			if err != nil || len(tools) != 1 || tools[0].Name != "echo" {
				t.Fatalf("ListTools = %v, %v", tools, err)
			}
			res, err := c.CallTool(context.Background(), "echo", mcpwire.JSONArgs([]byte(`{"text":"héllo"}`)), mcpwire.CallOptions{})
			if err != nil || res.Content[0].Text != "héllo" {
				t.Fatalf("echo = %+v, %v", res, err)
			}
			exit, err := c.Close()
			if err != nil || !strings.Contains(exit.Status, map[bool]string{true: "no session", false: "session"}[tc.opts != nil && tc.opts.Stateless]) {
				t.Fatalf("Close = %+v, %v", exit, err)
			}
		})
	}
}
