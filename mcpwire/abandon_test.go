package mcpwire

import (
	"context"
	"errors"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// abandonCall starts a tools/call, cancels it once the server has read
// it, and returns the answered channel the client handed back.
func abandonCall(t *testing.T, c *Client, s *script) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan (<-chan struct{}), 1)
	errc := make(chan error, 1)
	opt := CallOptions{Abandoned: func(a <-chan struct{}) { got <- a }}
	go func() { _, err := c.CallTool(ctx, "t", JSONArgs(nil), opt); errc <- err }()
	_ = s.recv() // the request
	cancel()
	_ = s.recv() // notifications/cancelled
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	select {
	case a := <-got: // sent before CallTool returned
		return a
	default:
		t.Fatal("Abandoned not called before CallTool returned")
		return nil
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestAbandonedAnsweredByLateReply: a cancelled call's answered channel
// stays open while the server keeps quiet and closes when its late reply
// arrives; the reply is not mistaken for another call's.
func TestAbandonedAnsweredByLateReply(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{})
		defer func() { s.m.End(""); c.Close() }()
		a := abandonCall(t, c, s)
		if closed(a) {
			t.Fatal("answered closed before any reply")
		}
		s.send(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
		go func() {
			_ = s.recv()
			s.send(`{"jsonrpc":"2.0","id":3,"result":{}}`)
		}()
		// The ping's reply is read after the late one, so by then the
		// late one has been dispatched.
		if err := c.Ping(context.Background()); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if !closed(a) {
			t.Error("answered still open after the late reply")
		}
	})
}

// TestAbandonedAnsweredByDeath: a server that never answers still
// releases the abandoned call when it dies.
func TestAbandonedAnsweredByDeath(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{})
		a := abandonCall(t, c, s)
		if closed(a) {
			t.Fatal("answered closed before any reply")
		}
		s.m.End("gone")
		<-c.Done()
		if !closed(a) {
			t.Error("answered still open after death")
		}
		c.Close()
	})
}

// TestAbandonedBounded: past MaxInFlight abandoned calls the oldest is
// forgotten, its channel closed, so the set never grows unbounded.
func TestAbandonedBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{MaxInFlight: 2})
		defer func() { s.m.End(""); c.Close() }()
		a1 := abandonCall(t, c, s)
		a2 := abandonCall(t, c, s)
		if closed(a1) || closed(a2) {
			t.Fatal("closed early")
		}
		a3 := abandonCall(t, c, s)
		if !closed(a1) || closed(a2) || closed(a3) {
			t.Errorf("after a third: a1 %v a2 %v a3 %v, want true false false", closed(a1), closed(a2), closed(a3))
		}
		c.mu.Lock()
		n := len(c.abandoned)
		c.mu.Unlock()
		if n != 2 {
			t.Errorf("abandoned set holds %d, want 2", n)
		}
	})
}
