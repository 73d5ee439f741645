package bridge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// shares is one server's admission control, shared fairly among grants:
// at most max calls run at the server and at most perGrant of one grant;
// calls beyond wait in a queue of at most maxQueue, at most queuePerGrant
// of one grant's. When a slot frees, it goes to the grant whose turn is
// next, round-robin over the grants with a call waiting and room under
// their own cap, and within a grant to its oldest waiting call. So a
// program that keeps a server busy with slow calls holds at most its
// share: another grant's call waits behind one call of each grant, not
// behind all of them, and is refused only when its own share or the
// whole queue is full.
//
// Calls with operator authority (the control socket's, grant nil) are
// one more grant.
//
// Concurrency: every method may be called from any goroutine; one mutex
// guards the counts and the queue. inflight and waiting mirror running
// and queued for status and tests, which read them without the lock.
type shares struct {
	max, perGrant, maxQueue, queuePerGrant int

	mu      sync.Mutex
	running int
	queued  int
	grants  map[*Grant]*share // grants with a call running or waiting
	ring    []*share          // grants with a call waiting, in turn order
	turn    int               // index in ring of the grant served next

	inflight, waiting atomic.Int64
}

// share is one grant's part of a server's admission.
type share struct {
	grant   *Grant
	running int
	waiters []*waiter // oldest first
}

// waiter is one queued call. ready is closed when dispatch gives it a
// slot, which it then owns.
type waiter struct {
	ready   chan struct{}
	granted bool
}

func newShares(slots, perGrant, maxQueue, queuePerGrant int) *shares {
	return &shares{
		max: slots, perGrant: max(1, min(perGrant, slots)),
		maxQueue: maxQueue, queuePerGrant: max(0, min(queuePerGrant, maxQueue)),
		grants: map[*Grant]*share{},
	}
}

// overloadError is a call refused because a queue was full: the grant's
// own share of it, or the server's whole queue.
type overloadError struct {
	server  string
	ofGrant bool // the grant's share was full, not the server's queue
	running int  // the grant's or the server's, as ofGrant says
	queued  int
	limRun  int // the limits that applied
	limQ    int
}

func (e *overloadError) Error() string { return "bridge: " + e.message() }

// message is the denial's text: whose budget was exceeded, and by what.
func (e *overloadError) message() string {
	if e.ofGrant {
		return fmt.Sprintf("this grant has %d calls running and %d waiting at server %q, its share (max_inflight_per_grant %d, max_queue_per_grant %d); other grants are unaffected; try again later",
			e.running, e.queued, e.server, e.limRun, e.limQ)
	}
	return fmt.Sprintf("server %q has %d calls running and %d waiting (max_inflight %d, max_queue %d); try again later",
		e.server, e.running, e.queued, e.limRun, e.limQ)
}

// admit takes a slot for a call of grant g, queueing for at most d. It
// returns a release function and how long the call waited, or an
// *overloadError when the grant's share of the queue or the server's
// queue is full, errCallTimeout when d passed in the queue, or the
// context's cause. Only a call that queues has a timer.
func (a *shares) admit(ctx context.Context, server string, g *Grant, d time.Duration) (func(), time.Duration, error) {
	// A call whose context already ended (its grant revoked or expired,
	// shutdown) takes no slot: mcpwire may still write a call whose ctx
	// is done, which would run the tool for a grant that has ended.
	if ctx.Err() != nil {
		return nil, 0, context.Cause(ctx)
	}
	a.mu.Lock()
	sh := a.grants[g]
	if sh == nil {
		sh = &share{grant: g}
		a.grants[g] = sh
	}
	release := func() { a.release(sh) }
	// A grant's calls wait in order: a grant with calls waiting never has
	// room under its cap while the server has a free slot (dispatch would
	// have used it), so a new call never passes an older one.
	if a.running < a.max && sh.running < a.perGrant {
		a.take(sh)
		a.mu.Unlock()
		return release, 0, nil
	}
	switch {
	case len(sh.waiters) >= a.queuePerGrant:
		err := &overloadError{server: server, ofGrant: true, running: sh.running, queued: len(sh.waiters), limRun: a.perGrant, limQ: a.queuePerGrant}
		a.forget(sh)
		a.mu.Unlock()
		return nil, 0, err
	case a.queued >= a.maxQueue:
		err := &overloadError{server: server, running: a.running, queued: a.queued, limRun: a.max, limQ: a.maxQueue}
		a.forget(sh)
		a.mu.Unlock()
		return nil, 0, err
	}
	w := &waiter{ready: make(chan struct{})}
	if len(sh.waiters) == 0 {
		a.ring = append(a.ring, sh)
	}
	sh.waiters = append(sh.waiters, w)
	a.queued++
	a.waiting.Store(int64(a.queued))
	a.mu.Unlock()

	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return release, time.Since(start), nil
	case <-t.C:
		err = errCallTimeout
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	a.mu.Lock()
	if w.granted {
		// Dispatch gave it a slot as the wait ended: hand the slot on.
		a.mu.Unlock()
		release()
		return nil, 0, err
	}
	a.unqueue(sh, w)
	a.forget(sh)
	a.mu.Unlock()
	return nil, 0, err
}

// take counts a call of sh as running. The caller holds mu.
func (a *shares) take(sh *share) {
	a.running++
	sh.running++
	a.inflight.Store(int64(a.running))
}

// release frees a slot of sh and gives it (and any other free slot) to
// the calls whose turn it is.
func (a *shares) release(sh *share) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	sh.running--
	a.inflight.Store(int64(a.running))
	a.dispatch()
	a.forget(sh)
}

// dispatch gives free slots to waiting calls, round-robin over grants,
// skipping a grant already at its cap. The caller holds mu.
func (a *shares) dispatch() {
	for a.running < a.max && len(a.ring) > 0 {
		found := -1
		for i := range a.ring {
			j := (a.turn + i) % len(a.ring)
			if a.ring[j].running < a.perGrant {
				found = j
				break
			}
		}
		if found < 0 {
			return // every grant waiting is at its cap
		}
		sh := a.ring[found]
		w := sh.waiters[0]
		sh.waiters = sh.waiters[1:]
		a.queued--
		a.waiting.Store(int64(a.queued))
		w.granted = true
		a.take(sh)
		close(w.ready)
		if len(sh.waiters) == 0 {
			a.dropFromRing(found)
			a.turn = found // the grant after it has moved into its place
		} else {
			a.turn = found + 1
		}
		if len(a.ring) > 0 {
			a.turn %= len(a.ring)
		} else {
			a.turn = 0
		}
	}
}

// unqueue removes a waiter that gave up. The caller holds mu.
func (a *shares) unqueue(sh *share, w *waiter) {
	for i, x := range sh.waiters {
		if x == w {
			sh.waiters = append(sh.waiters[:i], sh.waiters[i+1:]...)
			break
		}
	}
	a.queued--
	a.waiting.Store(int64(a.queued))
	if len(sh.waiters) == 0 {
		for i, x := range a.ring {
			if x == sh {
				a.dropFromRing(i)
				if a.turn > i {
					a.turn--
				}
				break
			}
		}
		if len(a.ring) > 0 {
			a.turn %= len(a.ring)
		} else {
			a.turn = 0
		}
	}
}

func (a *shares) dropFromRing(i int) {
	a.ring = append(a.ring[:i], a.ring[i+1:]...)
}

// forget drops sh from the table once it has nothing running or waiting,
// so the table holds only grants in use. The caller holds mu.
func (a *shares) forget(sh *share) {
	if sh.running == 0 && len(sh.waiters) == 0 {
		delete(a.grants, sh.grant)
	}
}
