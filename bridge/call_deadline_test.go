package bridge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// call_timeout is an idle deadline: a call that reports progress more
// often than that runs past it (up to max_call_timeout), and one that
// stays silent does not. A caller's own deadline (timeout_ms) is a hard
// one that progress does not stretch. The margins are generous in the
// direction a busy machine moves them: progress every 100 ms against an
// idle deadline of 3 s, a silent call of 4.5 s against the same 3 s, and a
// hard deadline of 2 s against a call of 4.5 s.
func TestCallTimeoutIsIdle(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) { c.Servers[0].CallTimeout = 3 * time.Second }, mcptestServer("t", mcptest.Scenario{}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	// No deadline on ctx, so no timeout_ms: the server's own apply. The
	// backstop only cancels a call that never ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(backstop, cancel)
	defer stop.Stop()

	r, err := c.Call(ctx, "t", "progress", map[string]any{"steps": 45, "interval_ms": 100})
	if err != nil || r.IsError || r.Text() != "done" {
		t.Fatalf("a 4.5 s call reporting progress every 100 ms, idle deadline 3 s: %+v, %v", r, err)
	}

	var d *capwire.Denied
	_, err = c.Call(ctx, "t", "slow", map[string]any{"ms": 4500, "text": "late"})
	if !errors.As(err, &d) || d.Code != capwire.CodeTimeout {
		t.Fatalf("a silent 4.5 s call, idle deadline 3 s: %v, want timeout", err)
	}

	hard, cancelHard := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelHard()
	_, err = c.Call(hard, "t", "progress", map[string]any{"steps": 45, "interval_ms": 100})
	if !errors.Is(err, capwire.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 4.5 s call with progress under a 2 s deadline of the caller's: %v, want a timeout", err)
	}
	c.Close()
	tb.shutdown()
}
