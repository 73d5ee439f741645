package mcpwire

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// Both modern eras of the test server, as a child process: the probe
// finds them modern, and every kind of call works with _meta on it (the
// server answers -32022 or -32602 to a request without it).
func TestChildModernEras(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, era := range []string{mcptest.EraModern, mcptest.EraModernOnly} {
		t.Run(era, func(t *testing.T) {
			relisted := json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`)
			c := startTest(t, mcptest.Scenario{Era: era, ServerName: "m", Relisted: []json.RawMessage{relisted}}, Config{})
			defer closeClean(t, c)
			if c.Era() != EraModern || c.ServerInfo().Name != "m" || c.Discover() == nil || !c.Discover().ToolsListChanged {
				t.Fatalf("era %v info %+v discover %+v", c.Era(), c.ServerInfo(), c.Discover())
			}
			ctx := context.Background()
			tools, err := c.ListTools(ctx)
			if err != nil || len(tools) < 19 {
				t.Fatalf("tools: %d, %v", len(tools), err)
			}
			r, err := callT(t, c, "echo", `{"text":"hi"}`, CallOptions{})
			if err != nil || r.Content[0].Text != "hi" {
				t.Fatalf("echo: %+v %v", r, err)
			}
			r, err = callT(t, c, "add", `{"a":2,"b":3}`, CallOptions{})
			if err != nil || string(r.StructuredContent) != `{"sum":5}` {
				t.Fatalf("add: %+v %v", r, err)
			}
			if r, err = callT(t, c, "fail", `{"message":"no"}`, CallOptions{}); err != nil || !r.IsError {
				t.Fatalf("fail: %+v %v", r, err)
			}
			if r, err = callT(t, c, "content", `{}`, CallOptions{}); err != nil || len(r.Content) < 4 {
				t.Fatalf("content: %+v %v", r, err)
			}
			// Progress keeps a call alive past its idle timeout: 8 steps
			// 500 ms apart outlive 2.5 s only through progress (a stall
			// of 2 s between two would fail it).
			if _, err = callT(t, c, "progress", `{"steps":8,"interval_ms":500}`, CallOptions{IdleTimeout: 2500 * time.Millisecond, MaxTimeout: waitFor}); err != nil {
				t.Fatalf("progress: %v", err)
			}
			// Cancellation reaches the server as notifications/cancelled.
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { _, err := c.CallTool(cctx, "hang", JSONArgs(nil), CallOptions{}); done <- err }()
			for {
				r, err := callT(t, c, "running", `{}`, CallOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(r.StructuredContent), "hang") {
					break
				}
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("hang: %v", err)
			}
			for {
				r, err := callT(t, c, "cancellations", `{}`, CallOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(r.StructuredContent), `"hang"`) {
					break
				}
			}
			// list_changed arrives on the listen stream.
			if _, err := callT(t, c, "relist", `{}`, CallOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.ToolsChanged():
			case <-time.After(waitFor):
				t.Fatal("list_changed on the stream not surfaced")
			}
			if tools, err := c.ListTools(ctx); err != nil || len(tools) != 1 {
				t.Fatalf("relisted: %d %v", len(tools), err)
			}
		})
	}
}

// Server requests in the modern era are counted and never answered
// (the server logs any answer on stderr); input_required and an unknown
// resultType fail the call, not the connection.
func TestChildModernFaults(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, tt := range []struct {
		resultType string
		check      func(error) bool
	}{
		{"input_required", func(err error) bool { return errors.Is(err, ErrInputRequired) }},
		{"deferred", func(err error) bool { var pf *ProtocolFault; return errors.As(err, &pf) && pf.Path == "/resultType" }},
	} {
		t.Run(tt.resultType, func(t *testing.T) {
			c := startTest(t, mcptest.Scenario{Era: mcptest.EraModernOnly, ResultType: tt.resultType, RequestsOnListen: 3,
				NotifyOnListen: []string{"notifications/tools/list_changed"}}, Config{})
			defer closeClean(t, c)
			select {
			case <-c.ToolsChanged():
			case <-time.After(waitFor):
				t.Fatal("list_changed on the stream not surfaced")
			}
			// The requests came before the notification on the stream.
			if n := c.ServerRequests(); n != 3 {
				t.Errorf("server requests = %d, want 3", n)
			}
			if _, err := callT(t, c, "echo", `{"text":"x"}`, CallOptions{}); !tt.check(err) {
				t.Errorf("call: %v", err)
			}
			// The server reads in order: had the client answered a
			// request, the log line would precede this call's answer.
			if _, err := callT(t, c, "echo", `{"text":"x"}`, CallOptions{}); c.Err() != nil {
				t.Fatalf("connection died: %v (%v)", c.Err(), err)
			}
			if tail := string(c.StderrTail()); strings.Contains(tail, "answered server request") {
				t.Errorf("the client answered a server request: %s", tail)
			}
		})
	}
}

// A server too slow for the probe is spoken to in the legacy era, and
// its late discover answer is ignored.
func TestChildLateDiscover(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startTest(t, mcptest.Scenario{DiscoverLate: true}, Config{DiscoverTimeout: 200 * time.Millisecond})
	defer closeClean(t, c)
	if c.Era() != EraLegacy || c.Initialize() == nil {
		t.Fatalf("era %v", c.Era())
	}
	if _, err := callT(t, c, "echo", `{"text":"x"}`, CallOptions{}); err != nil {
		t.Fatal(err)
	}
}
