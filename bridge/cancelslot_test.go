package bridge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/mcptest"
)

// TestCancelKeepsSlot: MCP cancellation is advisory and mcptest's hang
// ignores it, so a cancelled call must keep its max_inflight slot while
// the server has not answered: two call-then-cancel rounds fill a
// two-slot server, a third call is refused overloaded, and status counts
// both as abandoned.
func TestCancelKeepsSlot(t *testing.T) {
	s := mcptestServer("t", mcptest.Scenario{})
	s.MaxInflight, s.MaxQueue, s.CancelGrace = 2, 0, time.Hour
	soleGrant(&s)
	tb := startBridge(t, nil, s)
	defer tb.shutdown()
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	defer c.Close()

	for i := range 2 {
		ctx, cancel := context.WithCancel(denialCtx(t))
		done := make(chan error, 1)
		go func() { _, err := c.Call(ctx, "t", "hang", nil); done <- err }()
		tb.waitRunning("t", int64(i+1))
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	srv := tb.servers["t"]
	eventually(t, "both cancelled calls abandoned", func() bool { return srv.status().Abandoned == 2 })
	_, err := c.Call(denialCtx(t), "t", "echo", map[string]any{"text": "x"})
	wantDenial(t, err, capwire.CodeOverloaded, "")
	st, err := tb.control().Status(denialCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Servers[0]; got.Inflight != 2 || got.Abandoned != 2 {
		t.Errorf("status inflight %d abandoned %d, want 2 and 2", got.Inflight, got.Abandoned)
	}
}
