package rawecho

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/mcpwire"
)

func TestServe(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a \"quoted\" \\ line"},"_meta":{"progressToken":3}}}`,
		`{"jsonrpc":"2.0","id":"s","method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":-6,"result":{}}`,
		strings.Repeat("x", 100<<10),
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := Serve(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"rawecho","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a \"quoted\" \\ line"}]}}`,
		`{"jsonrpc":"2.0","id":"s","result":{}}`,
		`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range got {
		if !json.Valid([]byte(l)) {
			t.Errorf("reply is not JSON: %s", l)
		}
	}
}

// The HTTP face meets a 2026-07-28 client in its era and an older one in
// theirs: capbridge's client over each, the discover probe answered or
// refused.
func TestServeHTTPEras(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Handler
		era  mcpwire.Era
	}{
		{"both eras", ServeHTTP(), mcpwire.EraModern},
		{"2025 only", ServeHTTP2025(), mcpwire.EraLegacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(tc.h)
			defer ts.Close()
			c, err := mcpwire.Dial(context.Background(), mcpwire.Remote{URL: ts.URL + "/mcp"}, mcpwire.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Era() != tc.era {
				t.Fatalf("era %v, want %v", c.Era(), tc.era)
			}
			tools, err := c.ListTools(context.Background())
			if err != nil || len(tools) != 1 {
				t.Fatalf("ListTools = %v, %v", tools, err)
			}
			res, err := c.CallTool(context.Background(), "echo", mcpwire.JSONArgs([]byte(`{"text":"héllo"}`)), mcpwire.CallOptions{})
			if err != nil || res.Content[0].Text != "héllo" {
				t.Fatalf("echo: %+v, %v", res, err)
			}
		})
	}
}
