package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A run's grant: each call's audit line carries the run's id, revoking it
// with the run's end returns the run's accounting and writes the run's
// own audit line, and status names the call socket a front binds.
func TestRunGrant(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	tb.audit = zerolog.New(&sink)
	cc := tb.control()
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, Run: &control.Run{}}); err == nil {
		t.Fatal("a run without an id was granted")
	}
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil},
		Run: &control.Run{ID: "r1", Language: "python", CodeSHA256: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(g.Token)
	if _, err := c.Call(ctx, "t", "echo", map[string]any{"text": "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "t", "no_such_tool", nil); err == nil {
		t.Fatal("a call to an unknown tool succeeded")
	}
	c.Close()
	st, err := cc.Status(ctx)
	if err != nil || st.CallSocket != tb.CallSocket() {
		t.Fatalf("status names call socket %q (%v), want %q", st.CallSocket, err, tb.CallSocket())
	}
	rv, err := cc.Revoke(ctx, &control.RevokeRequest{Grant: g.Grant, Run: &control.RunEnd{Ended: "exit", ExitCode: 3, TookMS: 42}})
	if err != nil {
		t.Fatal(err)
	}
	if !rv.Found || rv.Calls != 2 || rv.Denied != 1 || rv.ArgBytes == 0 || rv.ResultBytes == 0 {
		t.Fatalf("revoked %+v, want found, 2 calls, 1 denied, bytes counted", rv)
	}
	cc.Close()
	tb.shutdown()

	calls := sink.lines("call")
	if len(calls) != 2 {
		t.Fatalf("%d call lines, want 2", len(calls))
	}
	for _, l := range calls {
		if l["run"] != "r1" || l["grant"] != g.Grant {
			t.Errorf("call line %v does not carry run r1 and grant %s", l, g.Grant)
		}
	}
	runs := sink.lines("run")
	if len(runs) != 1 {
		t.Fatalf("%d run lines, want 1", len(runs))
	}
	r := runs[0]
	want := map[string]any{"run": "r1", "grant": g.Grant, "language": "python", "code_sha256": "abc", "ended": "exit",
		"exit_code": float64(3), "took_ms": float64(42), "calls": float64(2), "denied": float64(1)}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("run line %s = %v, want %v", k, r[k], v)
		}
	}
	if s, ok := r["servers"].([]any); !ok || len(s) != 1 || s[0] != "t" {
		t.Errorf("run line servers = %v, want [t]", r["servers"])
	}
}
