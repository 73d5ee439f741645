package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A freed slot goes round-robin over the grants waiting, so a grant with
// many calls queued first does not make another grant wait behind all
// of them; a grant at its cap waits while the server has room.
func TestSharesRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newShares(1, 1, 8, 4)
		ga, gb := &Grant{ID: "a"}, &Grant{ID: "b"}
		ctx := context.Background()
		rel, _, err := a.admit(ctx, "s", ga, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// a queues three calls, then b three: a came first, but each
		// slot freed goes to the other grant's turn.
		type served struct {
			id  string
			rel func()
		}
		got := make(chan served, 6)
		for _, g := range []*Grant{ga, ga, ga, gb, gb, gb} {
			go func() {
				rel, _, err := a.admit(ctx, "s", g, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				got <- served{g.ID, rel}
			}()
			synctest.Wait() // queued, in this order
		}
		if a.queued != 6 || a.waiting.Load() != 6 || a.inflight.Load() != 1 {
			t.Fatalf("queued %d (gauge %d), running %d, want 6 and 1", a.queued, a.waiting.Load(), a.inflight.Load())
		}
		var order []string
		for range 6 {
			rel()
			s := <-got
			order = append(order, s.id)
			rel = s.rel
		}
		rel()
		if want := "a b a b a b"; strings.Join(order, " ") != want {
			t.Fatalf("served %v, want %s", order, want)
		}
		if len(a.grants) != 0 || len(a.ring) != 0 || a.running != 0 || a.queued != 0 {
			t.Fatalf("left behind: grants %d ring %d running %d queued %d", len(a.grants), len(a.ring), a.running, a.queued)
		}
	})
}

// With per-grant cap k, a grant's (k+1)th call queues while the server
// still has room for another grant's; a full share is refused naming
// the grant, a full queue naming the server.
func TestSharesCapsAndRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newShares(3, 1, 2, 1)
		ga, gb, gc := &Grant{ID: "a"}, &Grant{ID: "b"}, &Grant{ID: "c"}
		ctx := context.Background()
		relA, _, err := a.admit(ctx, "s", ga, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		queued := make(chan error, 1)
		go func() {
			rel, _, err := a.admit(ctx, "s", ga, time.Hour)
			if err == nil {
				rel()
			}
			queued <- err
		}()
		synctest.Wait()
		if a.running != 1 || a.queued != 1 {
			t.Fatalf("running %d queued %d: a's second call must queue though the server has room", a.running, a.queued)
		}
		// a's share of the queue (1) is full.
		_, _, err = a.admit(ctx, "s", ga, time.Hour)
		var oe *overloadError
		if !errors.As(err, &oe) || !oe.ofGrant {
			t.Fatalf("a's third call: %v, want the grant's share refused", err)
		}
		// b runs at once.
		relB, _, err := a.admit(ctx, "s", gb, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		relC, _, err := a.admit(ctx, "s", gc, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The server is full; b's second call takes the last queue
		// place, so c's, within its own share, is refused for the
		// server's queue.
		go func() {
			if rel, _, err := a.admit(ctx, "s", gb, time.Hour); err == nil {
				rel()
			}
		}()
		synctest.Wait()
		_, _, err = a.admit(ctx, "s", gc, time.Hour)
		if !errors.As(err, &oe) || oe.ofGrant {
			t.Fatalf("c's second call: %v, want the server's queue refused", err)
		}
		relA()
		if err := <-queued; err != nil {
			t.Fatalf("a's queued call: %v", err)
		}
		relB()
		relC()
		synctest.Wait()
		if len(a.grants) != 0 || a.running != 0 || a.queued != 0 {
			t.Fatalf("left behind: grants %d running %d queued %d", len(a.grants), a.running, a.queued)
		}
	})
}

// A queued call that times out or is cancelled leaves the queue, and a
// slot granted as its wait ended is handed on, not lost.
func TestSharesGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newShares(1, 1, 4, 4)
		g := &Grant{ID: "a"}
		rel, _, err := a.admit(context.Background(), "s", g, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.admit(context.Background(), "s", g, time.Second); !errors.Is(err, errCallTimeout) {
			t.Fatalf("timed out in the queue: %v", err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() { _, _, err := a.admit(ctx, "s", g, time.Hour); done <- err }()
		synctest.Wait()
		cancel(errCancelled)
		if err := <-done; !errors.Is(err, errCancelled) {
			t.Fatalf("cancelled in the queue: %v", err)
		}
		if a.queued != 0 || len(a.ring) != 0 {
			t.Fatalf("queued %d ring %d after giving up", a.queued, len(a.ring))
		}
		rel()
		if len(a.grants) != 0 || a.running != 0 {
			t.Fatalf("left behind: grants %d running %d", len(a.grants), a.running)
		}
	})
}
