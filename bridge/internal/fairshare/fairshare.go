// Package fairshare admits calls to one resource fairly among the keys
// (grants) that make them, and accounts for every call in flight so a
// shutdown can wait for the last one. It is a leaf: it knows nothing of
// what a key or a call is.
package fairshare

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout is a call that waited in the queue past its deadline.
var ErrTimeout = errors.New("fairshare: queued past the call's deadline")

// Limits bound one resource's admission.
type Limits struct {
	Max         int // calls running at once
	PerKey      int // calls of one key running at once (at most Max, at least 1)
	MaxQueue    int // calls waiting
	QueuePerKey int // calls of one key waiting (at most MaxQueue)
}

// Shares is one resource's admission control, shared fairly among keys:
// at most Max calls run and at most PerKey of one key; calls beyond wait
// in a queue of at most MaxQueue, at most QueuePerKey of one key's. When
// a slot frees, it goes to the key whose turn is next, round-robin over
// the keys with a call waiting and room under their own cap, and within
// a key to its oldest waiting call. So a key that keeps the resource busy
// with slow calls holds at most its share: another key's call waits
// behind one call of each key, not behind all of them, and is refused
// only when its own share or the whole queue is full.
//
// Concurrency: every method may be called from any goroutine; one mutex
// guards the counts and the queue. Running and Queued read gauges kept
// beside them, without the lock.
//
// Bounds: the table holds only keys with a call running or waiting, and
// one share kept for the next key. Only a call that queues waits on a
// timer, and the waiters that hold them are pooled: admission allocates
// nothing once its pools are warm, as one program with more calls in
// flight than its share queues on every call.
type Shares[K comparable] struct {
	lim Limits

	mu      sync.Mutex
	running int
	queued  int
	keys    map[K]*share[K] // keys with a call running or waiting
	ring    []*share[K]     // keys with a call waiting, in turn order
	turn    int             // index in ring of the key served next
	spare   *share[K]       // a share forgotten, for the next key to use

	// waiters is this resource's own pool of waiters: the channel and
	// timer a waiter holds may not cross from one synctest bubble into
	// another, so they are not shared with other resources.
	waiters sync.Pool

	inflight, waiting atomic.Int64
}

// share is one key's part of the resource's admission.
type share[K comparable] struct {
	key     K
	running int
	waiters []*waiter // oldest first
	release func()    // releases a slot of this share; made with it, not per call
}

// waiter is one queued call. dispatch marks it granted and puts a token
// in ready when it gives it a slot, which it then owns. A waiter goes
// back to the pool once its wait is over: its timer stopped (which, since
// Go 1.23, leaves nothing to receive on timer.C), and any token taken.
type waiter struct {
	ready   chan struct{} // capacity 1: dispatch never blocks
	timer   *time.Timer   // stopped while pooled
	granted bool
}

func newWaiter() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ready: make(chan struct{}, 1), timer: t}
}

// New returns admission for one resource under lim. PerKey is raised to
// 1 and both per-key limits are lowered to their resource-wide ones.
func New[K comparable](lim Limits) *Shares[K] {
	lim.PerKey = max(1, min(lim.PerKey, lim.Max))
	lim.QueuePerKey = max(0, min(lim.QueuePerKey, lim.MaxQueue))
	return &Shares[K]{lim: lim, keys: map[K]*share[K]{}, waiters: sync.Pool{New: newWaiter}}
}

// Running is the number of calls running.
func (a *Shares[K]) Running() int64 { return a.inflight.Load() }

// Queued is the number of calls waiting.
func (a *Shares[K]) Queued() int64 { return a.waiting.Load() }

// Overload is a call refused because a queue was full: its key's share of
// it (OfKey), or the whole queue.
type Overload struct {
	OfKey   bool
	Running int // the key's calls running, or the resource's, as OfKey says
	Queued  int // likewise, waiting
	LimRun  int // the limits that applied
	LimQ    int
}

func (e *Overload) Error() string {
	whose := "the resource"
	if e.OfKey {
		whose = "this key's share"
	}
	return fmt.Sprintf("fairshare: %s is full: %d running, %d waiting (limits %d, %d)", whose, e.Running, e.Queued, e.LimRun, e.LimQ)
}

// Admit takes a slot for a call of key, queueing for at most d. It
// returns a release function, to be called once when the call ends, and
// how long the call waited; or an *Overload when the key's share of the
// queue or the whole queue is full, ErrTimeout when d passed in the
// queue, or the context's cause.
func (a *Shares[K]) Admit(ctx context.Context, key K, d time.Duration) (func(), time.Duration, error) {
	// A call whose context already ended takes no slot: the caller may
	// still act on a call whose ctx is done, which would run it for a
	// key whose authority has ended.
	if ctx.Err() != nil {
		return nil, 0, context.Cause(ctx)
	}
	a.mu.Lock()
	sh := a.keys[key]
	if sh == nil {
		sh = a.newShare(key)
	}
	release := sh.release
	// A key's calls wait in order: a key with calls waiting never has
	// room under its cap while the resource has a free slot (dispatch
	// would have used it), so a new call never passes an older one.
	if a.running < a.lim.Max && sh.running < a.lim.PerKey {
		a.take(sh)
		a.mu.Unlock()
		return release, 0, nil
	}
	switch {
	case len(sh.waiters) >= a.lim.QueuePerKey:
		err := &Overload{OfKey: true, Running: sh.running, Queued: len(sh.waiters), LimRun: a.lim.PerKey, LimQ: a.lim.QueuePerKey}
		a.forget(sh)
		a.mu.Unlock()
		return nil, 0, err
	case a.queued >= a.lim.MaxQueue:
		err := &Overload{Running: a.running, Queued: a.queued, LimRun: a.lim.Max, LimQ: a.lim.MaxQueue}
		a.forget(sh)
		a.mu.Unlock()
		return nil, 0, err
	}
	w := a.waiters.Get().(*waiter)
	w.granted = false
	if len(sh.waiters) == 0 {
		a.ring = append(a.ring, sh)
	}
	sh.waiters = append(sh.waiters, w)
	a.queued++
	a.waiting.Store(int64(a.queued))
	a.mu.Unlock()

	start := time.Now()
	w.timer.Reset(d)
	var err error
	select {
	case <-w.ready:
		w.timer.Stop()
		a.waiters.Put(w)
		return release, time.Since(start), nil
	case <-w.timer.C:
		err = ErrTimeout
	case <-ctx.Done():
		w.timer.Stop()
		err = context.Cause(ctx)
	}
	a.mu.Lock()
	if w.granted {
		// Dispatch gave it a slot as the wait ended: hand the slot on.
		a.mu.Unlock()
		<-w.ready // put there, under mu, with granted
		a.waiters.Put(w)
		release()
		return nil, 0, err
	}
	a.unqueue(sh, w)
	a.forget(sh)
	a.mu.Unlock()
	a.waiters.Put(w)
	return nil, 0, err
}

// newShare enters key in the table, in the spare share if there is one.
// The caller holds mu.
func (a *Shares[K]) newShare(key K) *share[K] {
	sh := a.spare
	if sh != nil {
		a.spare = nil
	} else {
		sh = &share[K]{}
		sh.release = func() { a.release(sh) }
	}
	sh.key = key
	a.keys[key] = sh
	return sh
}

// take counts a call of sh as running. The caller holds mu.
func (a *Shares[K]) take(sh *share[K]) {
	a.running++
	sh.running++
	a.inflight.Store(int64(a.running))
}

// release frees a slot of sh and gives it (and any other free slot) to
// the calls whose turn it is.
func (a *Shares[K]) release(sh *share[K]) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	sh.running--
	a.inflight.Store(int64(a.running))
	a.dispatch()
	a.forget(sh)
}

// dispatch gives free slots to waiting calls, round-robin over keys,
// skipping a key already at its cap. The caller holds mu.
func (a *Shares[K]) dispatch() {
	for a.running < a.lim.Max && len(a.ring) > 0 {
		found := -1
		for i := range a.ring {
			j := (a.turn + i) % len(a.ring)
			if a.ring[j].running < a.lim.PerKey {
				found = j
				break
			}
		}
		if found < 0 {
			return // every key waiting is at its cap
		}
		sh := a.ring[found]
		w := sh.waiters[0]
		sh.waiters = sh.waiters[1:]
		a.queued--
		a.waiting.Store(int64(a.queued))
		w.granted = true
		a.take(sh)
		w.ready <- struct{}{}
		if len(sh.waiters) == 0 {
			a.dropFromRing(found)
			a.turn = found // the key after it has moved into its place
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
func (a *Shares[K]) unqueue(sh *share[K], w *waiter) {
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

func (a *Shares[K]) dropFromRing(i int) {
	a.ring = append(a.ring[:i], a.ring[i+1:]...)
}

// forget drops sh from the table once it has nothing running or waiting,
// so the table holds only keys in use, and keeps it as the spare: a key
// whose calls run one at a time comes and goes with every call. The
// caller holds mu.
func (a *Shares[K]) forget(sh *share[K]) {
	if sh.running == 0 && len(sh.waiters) == 0 {
		delete(a.keys, sh.key)
		var zero K
		sh.key, sh.waiters = zero, nil // hold neither the key nor old waiters
		a.spare = sh
	}
}
