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

// Progress renews call_timeout but never stretches a call past
// max_call_timeout: a 6 s call reporting progress every 100 ms, under an
// idle deadline of 2 s and a ceiling of 3 s, is denied timeout, and not
// before 3 s after the caller sent it. Only that lower bound is checked:
// a busy machine makes the denial later, never earlier.
func TestProgressStopsAtMaxCallTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) {
		c.Servers[0].CallTimeout, c.Servers[0].MaxCallTimeout = 2*time.Second, 3*time.Second
	}, mcptestServer("t", mcptest.Scenario{}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	// No deadline on ctx, so no timeout_ms: the server's own bounds
	// apply. The backstop only cancels a call that never ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(backstop, cancel)
	defer stop.Stop()

	start := time.Now()
	r, err := c.Call(ctx, "t", "progress", map[string]any{"steps": 60, "interval_ms": 100})
	took := time.Since(start)
	t.Logf("denied after %v", took)
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeTimeout {
		t.Fatalf("a 6 s call with progress every 100 ms, ceiling 3 s: %+v, %v; want timeout", r, err)
	}
	if took < 3*time.Second {
		t.Errorf("denied timeout after %v, before max_call_timeout 3 s", took)
	}
	c.Close()
	tb.shutdown()
}
