package bridge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// TestCancelKeepsSlot: MCP cancellation is advisory and mcptest does not
// answer a call it saw cancelled, so a cancelled call must keep its
// max_inflight slot while the server has not answered. Two
// call-then-cancel rounds (each cancelled only once the server is running
// it) hold two of three slots; a third call fills the last, a fourth is
// refused overloaded, and status counts the two as abandoned.
func TestCancelKeepsSlot(t *testing.T) {
	s := mcptestServer("t", mcptest.Scenario{})
	s.MaxInflight, s.MaxQueue, s.CancelGrace = 3, 0, time.Hour
	soleGrant(&s)
	tb := startBridge(t, nil, s)
	defer tb.shutdown()
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	defer c.Close()

	seen := map[string]bool{}
	for i := range 2 {
		ctx, cancel := context.WithCancel(denialCtx(t))
		done := make(chan error, 1)
		go func() { _, err := c.Call(ctx, "t", "hang", nil); done <- err }()
		waitNewHang(t, c, seen)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	srv := tb.srv("t")
	eventually(t, "both cancelled calls abandoned", func() bool { return srv.status().Abandoned == 2 })
	waitCancelled(t, c, "t", "hang", 2)

	ctx, cancel := context.WithCancel(denialCtx(t))
	defer cancel()
	third := make(chan error, 1)
	go func() { _, err := c.Call(ctx, "t", "hang", nil); third <- err }()
	tb.waitRunning("t", 3)
	_, err := c.Call(denialCtx(t), "t", "echo", map[string]any{"text": "x"})
	wantDenial(t, err, capwire.CodeOverloaded, "")
	st, err := tb.control().Status(denialCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Servers[0]; got.Inflight != 3 || got.Abandoned != 2 {
		t.Errorf("status inflight %d abandoned %d, want 3 and 2", got.Inflight, got.Abandoned)
	}
	cancel()
	if err := <-third; !errors.Is(err, context.Canceled) {
		t.Fatalf("third call: %v", err)
	}
}

// waitNewHang asks server t until a hang call it has not seen before is
// running there, and marks it seen. Calls counted at the bridge may not
// have reached the server yet, and a hang cancelled earlier stops
// running there, so only a new request id tells this round's call apart.
func waitNewHang(t *testing.T, c *capwire.Client, seen map[string]bool) {
	t.Helper()
	eventually(t, "a new hang call running at the server", func() bool {
		for _, x := range runningAt(t, c, "t") {
			if x.Tool == "hang" && !seen[x.RequestID] {
				seen[x.RequestID] = true
				return true
			}
		}
		return false
	})
}

// TestCancelFloodStaysBounded: many callers calling and cancelling at
// once can never give the server more than max_inflight calls: every slot
// still taken after the flood belongs to an abandoned call, nothing waits
// in the queue, and each round ended cancelled or refused overloaded.
// (Without the slot hold each round frees its slot at once, and the
// server ends up running every call it was sent.)
func TestCancelFloodStaysBounded(t *testing.T) {
	const inflight, callers, rounds = 4, 8, 40
	s := mcptestServer("t", mcptest.Scenario{})
	s.MaxInflight, s.MaxQueue, s.CancelGrace = inflight, inflight, time.Hour
	soleGrant(&s)
	tb := startBridge(t, nil, s, mcptestServer("u", mcptest.Scenario{}))
	defer tb.shutdown()
	c := tb.dial(tb.grant(map[string][]string{"t": nil, "u": nil}))
	defer c.Close()

	var wg sync.WaitGroup
	errs := make(chan error, callers*rounds)
	for range callers {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithCancel(denialCtx(t))
				done := make(chan error, 1)
				go func() { _, err := c.Call(ctx, "t", "hang", nil); done <- err }()
				// A round trip to another server gives the call time
				// to reach t before it is cancelled; without the slot
				// hold nearly every round's call would.
				if _, err := c.Call(ctx, "u", "echo", map[string]any{"text": "x"}); err != nil {
					t.Errorf("echo at u: %v", err)
				}
				cancel()
				errs <- <-done
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var d *capwire.Denied
		if !errors.Is(err, context.Canceled) && !(errors.As(err, &d) && d.Code == capwire.CodeOverloaded) {
			t.Fatalf("a round ended %v, want cancelled or overloaded", err)
		}
	}
	// A caller's cancel returns at once; the bridge settles each call
	// just after.
	srv := tb.srv("t")
	var st serverStatus
	eventually(t, "every call settled at the bridge", func() bool {
		st = srv.status()
		return st.Inflight == st.Abandoned && st.Queued == 0
	})
	if st.Inflight > inflight {
		t.Errorf("after the flood %d slots are taken, more than max_inflight %d", st.Inflight, inflight)
	}
	// The server's side: mcptest logs each notifications/cancelled it
	// reads, one per call it was sent and then told to stop. Every such
	// call still holds its slot, so the server was sent no more calls
	// than max_inflight.
	seen := func() int {
		return strings.Count(string(srv.status().StderrTail), "notifications/cancelled for request")
	}
	eventually(t, "the server told of each abandoned call", func() bool { return seen() >= int(st.Abandoned) })
	if n := seen(); n != int(st.Abandoned) || n > inflight {
		t.Errorf("the server saw %d calls cancelled, %d abandoned; want equal and at most %d", n, st.Abandoned, inflight)
	}
}
