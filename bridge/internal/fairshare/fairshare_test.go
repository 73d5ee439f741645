package fairshare

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A freed slot goes round-robin over the keys waiting, so a key with
// many calls queued first does not make another key wait behind all
// of them; a key at its cap waits while the server has room.
func TestSharesRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New[string](Limits{Max: 1, PerKey: 1, MaxQueue: 8, QueuePerKey: 4})
		ga, gb := "a", "b"
		ctx := context.Background()
		rel, _, err := a.Admit(ctx, ga, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// a queues three calls, then b three: a came first, but each
		// slot freed goes to the other key's turn.
		type served struct {
			id  string
			rel func()
		}
		got := make(chan served, 6)
		for _, g := range []string{ga, ga, ga, gb, gb, gb} {
			go func() {
				rel, _, err := a.Admit(ctx, g, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				got <- served{g, rel}
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
		if len(a.keys) != 0 || len(a.ring) != 0 || a.running != 0 || a.queued != 0 {
			t.Fatalf("left behind: keys %d ring %d running %d queued %d", len(a.keys), len(a.ring), a.running, a.queued)
		}
	})
}

// With per-key cap k, a key's (k+1)th call queues while the server
// still has room for another key's; a full share is refused naming
// the key, a full queue naming the server.
func TestSharesCapsAndRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New[string](Limits{Max: 3, PerKey: 1, MaxQueue: 2, QueuePerKey: 1})
		ga, gb, gc := "a", "b", "c"
		ctx := context.Background()
		relA, _, err := a.Admit(ctx, ga, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		queued := make(chan error, 1)
		go func() {
			rel, _, err := a.Admit(ctx, ga, time.Hour)
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
		_, _, err = a.Admit(ctx, ga, time.Hour)
		var oe *Overload
		if !errors.As(err, &oe) || !oe.OfKey {
			t.Fatalf("a's third call: %v, want the key's share refused", err)
		}
		// b runs at once.
		relB, _, err := a.Admit(ctx, gb, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		relC, _, err := a.Admit(ctx, gc, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The server is full; b's second call takes the last queue
		// place, so c's, within its own share, is refused for the
		// server's queue.
		go func() {
			if rel, _, err := a.Admit(ctx, gb, time.Hour); err == nil {
				rel()
			}
		}()
		synctest.Wait()
		_, _, err = a.Admit(ctx, gc, time.Hour)
		if !errors.As(err, &oe) || oe.OfKey {
			t.Fatalf("c's second call: %v, want the server's queue refused", err)
		}
		relA()
		if err := <-queued; err != nil {
			t.Fatalf("a's queued call: %v", err)
		}
		relB()
		relC()
		synctest.Wait()
		if len(a.keys) != 0 || a.running != 0 || a.queued != 0 {
			t.Fatalf("left behind: keys %d running %d queued %d", len(a.keys), a.running, a.queued)
		}
	})
}

// A queued call that times out or is cancelled leaves the queue, and a
// slot keyed as its wait ended is handed on, not lost.
func TestSharesGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New[string](Limits{Max: 1, PerKey: 1, MaxQueue: 4, QueuePerKey: 4})
		g := "a"
		rel, _, err := a.Admit(context.Background(), g, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Admit(context.Background(), g, time.Second); !errors.Is(err, ErrTimeout) {
			t.Fatalf("timed out in the queue: %v", err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() { _, _, err := a.Admit(ctx, g, time.Hour); done <- err }()
		synctest.Wait()
		cancel(errCancelled)
		if err := <-done; !errors.Is(err, errCancelled) {
			t.Fatalf("cancelled in the queue: %v", err)
		}
		if a.queued != 0 || len(a.ring) != 0 {
			t.Fatalf("queued %d ring %d after giving up", a.queued, len(a.ring))
		}
		rel()
		if len(a.keys) != 0 || a.running != 0 {
			t.Fatalf("left behind: keys %d running %d", len(a.keys), a.running)
		}
	})
}

var errCancelled = errors.New("cancelled")

// A queued call's waiter is reused by the calls that queue after it, so
// however its wait ended (granted, timed out, granted as it timed out)
// it must leave nothing behind: no slot held, no grant or timer tick for
// the next call to find.
func TestSharesWaitersReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New[string](Limits{Max: 1, PerKey: 1, MaxQueue: 4, QueuePerKey: 4})
		ctx := context.Background()
		var granted, timedOut int
		for i := range 60 {
			rel, _, err := a.Admit(ctx, "a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			// The holder lets go before the waiter's deadline, after it,
			// or at the same instant.
			released := make(chan struct{})
			time.AfterFunc(time.Second+time.Duration(i%3-1)*time.Millisecond, func() { rel(); close(released) })
			switch rel, _, err := a.Admit(ctx, "a", time.Second); {
			case err == nil:
				granted++
				rel()
			case errors.Is(err, ErrTimeout):
				timedOut++
			default:
				t.Fatal(err)
			}
			<-released
			if a.running != 0 || a.queued != 0 || len(a.keys) != 0 || len(a.ring) != 0 {
				t.Fatalf("round %d left running %d queued %d keys %d ring %d", i, a.running, a.queued, len(a.keys), len(a.ring))
			}
			if a.spare == nil || a.spare.key != "" || a.spare.waiters != nil {
				t.Fatalf("round %d: the spare share holds %+v", i, a.spare)
			}

			// The next call to queue waits until it is given the slot.
			hold, _, err := a.Admit(ctx, "a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				rel, _, err := a.Admit(ctx, "a", time.Hour)
				if err == nil {
					rel()
				}
				done <- err
			}()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("round %d: a queued call returned before any slot was free: %v", i, err)
			default:
			}
			hold()
			if err := <-done; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if granted == 0 || timedOut == 0 {
			t.Fatalf("granted %d, timed out %d: both ends should have been seen", granted, timedOut)
		}
	})
}

// A drain waits for the calls admitted before it, refuses those after,
// and ends with the last to retire.
func TestFlight(t *testing.T) {
	f := NewFlight()
	for range 2 {
		if !f.Admit() {
			t.Fatal("admission refused before a drain")
		}
	}
	if f.InFlight() != 2 {
		t.Fatalf("%d in flight, want 2", f.InFlight())
	}
	idle := f.Drain()
	if f.Admit() || !f.Draining() {
		t.Fatal("a call was admitted after the drain began")
	}
	f.Retire()
	select {
	case <-idle:
		t.Fatal("the drain ended with a call in flight")
	default:
	}
	f.Retire()
	<-idle
	if f.Drain() != idle || f.InFlight() != 0 {
		t.Fatal("a second drain is not the first")
	}
	defer func() {
		if recover() == nil {
			t.Error("retiring a call never admitted did not panic")
		}
	}()
	f.Retire()
}

// BenchmarkAdmit measures a call's admission and release with one key,
// running (every call finds a slot) and queued (twice the slots are
// wanted, so nearly every call waits for another's release, as one
// program with 32 calls in flight does under the default share of 16).
func BenchmarkAdmit(b *testing.B) {
	for _, bc := range []struct {
		name string
		max  int
	}{{"running", 64}, {"queued", 16}} {
		b.Run(bc.name, func(b *testing.B) {
			a := New[string](Limits{Max: bc.max, PerKey: bc.max, MaxQueue: 64, QueuePerKey: 64})
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(16) // 32 callers on 2 Ps
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rel, _, err := a.Admit(ctx, "k", time.Hour)
					if err != nil {
						b.Error(err)
						return
					}
					rel()
				}
			})
		})
	}
}
