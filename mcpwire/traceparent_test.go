package mcpwire

import (
	"context"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A call's Traceparent reaches the server as _meta.traceparent (SEP-414),
// and over Streamable HTTP as the W3C traceparent header too; a call
// without one carries neither.
func TestCallTraceparent(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name string
		sc   mcptest.Scenario
		o    mcptest.HTTPOptions
	}{
		{"legacy json", mcptest.Scenario{}, mcptest.HTTPOptions{}},
		{"legacy sse", mcptest.Scenario{}, mcptest.HTTPOptions{SSE: true}},
		{"modern", mcptest.Scenario{Era: mcptest.EraModern}, mcptest.HTTPOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			face, url := httpServer(t, tc.sc, tc.o)
			c := dial(t, url, Remote{}, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			res, err := c.CallTool(ctx, "meta", JSONArgs(nil), CallOptions{Traceparent: tp})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.Content[0].Text != tp {
				t.Errorf("the server saw _meta.traceparent %+v, want %s", res.Content, tp)
			}
			if got := face.LastHeaders("POST tools/call").Get("Traceparent"); got != tp {
				t.Errorf("traceparent header %q, want %s", got, tp)
			}
			res, err = c.CallTool(ctx, "meta", JSONArgs(nil), CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.Content[0].Text != "" {
				t.Errorf("a call without a traceparent carried %+v", res.Content)
			}
			if got := face.LastHeaders("POST tools/call").Get("Traceparent"); got != "" {
				t.Errorf("a call without a traceparent sent the header %q", got)
			}
			closeHTTP(t, c)
		})
	}
}
