// Package readside implements the election by which the callers of a
// client read its connection for one another, so that a call with
// nothing else in flight reads its own reply and no goroutine hands it
// over.
package readside

import (
	"context"
	"sync"
	"time"
)

// kickTime is a read deadline in the past: a blocked Read returns at once.
var kickTime = time.Unix(1, 0)

// Config is what a client provides to its Side.
type Config struct {
	// Mu is the client's own mutex (required). It guards the Side as
	// well as the client's table of calls: see Side for why.
	Mu *sync.Mutex
	// Conn is the connection's read-deadline side (optional): a
	// deadline must make a blocked Read return, with an error that
	// ReadChunk takes for "no data yet" (os.ErrDeadlineExceeded). nil
	// means a blocked Read cannot be interrupted, so nobody may give up
	// while holding the reading side: one goroutine then holds it for
	// the Side's whole life and every caller is handed its reply.
	Conn interface{ SetReadDeadline(t time.Time) error }
	// ReadChunk performs one Read and handles everything it completes,
	// settling the calls whose replies it finds (required). It reports
	// false once the stream has ended for good, by which time the
	// client has settled every call and called EndLocked. Only the
	// holder of the reading side calls it, without Mu.
	ReadChunk func() bool
	// Waiting returns the Waiter of any one call in flight, or nil when
	// there is none (required). Called under Mu: the Waiter it returns
	// is woken to take the reading side.
	Waiting func() *Waiter
	// Grace is how long the reading side may rest with no call in flight
	// before a goroutine takes it (required).
	Grace time.Duration
	// Expired is what Await returns once a Waiter's expiry passes
	// (required if any Waiter is given one: see Waiter.ExpireLocked).
	Expired error
}

// Side is the reading side of one client's connection: a token passed
// between the goroutines that need it, not a goroutine of its own.
// Whoever holds it reads the connection (ReadChunk) and settles every
// call whose reply it finds, waking its waiter. A caller waiting in Await
// takes it when nobody holds it (the leader); once its own reply is in,
// or it gives up, it lets go and wakes one other waiter to take over, so
// no follower is ever left without a reader. Giving up is possible
// because the leader's Read is interruptible: it runs under a read
// deadline no later than the waiter's expiry, and the leader's ctx
// ending sets the deadline in the past (a kick); ReadChunk loses nothing
// to that. With no call in flight for Config.Grace, a goroutine takes the
// reading side (the idle reader) so that whatever the peer sends
// unasked, or its hang-up, is still seen at once; it lets go after the
// first chunk it handles, since traffic may be resuming and the next
// call should read its own reply rather than be handed it.
//
// The idle reader's timer is armed lazily: the reading side going quiet
// only records when, and a timer that fires early is armed again for the
// rest, so back-to-back calls touch no timer at all. Arming and stopping
// it per call would cost each call a timer that becomes the earliest in
// the runtime's heap, which wakes a thread (the netpoller or an idle one)
// to re-plan its sleep: measured in capwire as a sixth of the client's
// CPU per call. With a grace long against the gap between back-to-back
// calls, steady traffic sees one firing only every few hundred calls.
//
// Concurrency: any number of goroutines may Await at once, each with its
// own Waiter. ElectLocked, EndLocked and the Waiter's Locked methods are
// called with Config.Mu held, from any goroutine (ReadChunk included: it
// runs without Mu and takes it to settle). Done may be called anywhere.
//
// The Side takes its client's mutex rather than having one of its own
// because its state must change in the same critical sections as the
// client's table of calls: a reply settled and the next reader woken,
// a call registered and the idle reader's look for calls in flight, the
// client failing and the election ending are each one step. With a mutex
// of its own, each of those would take two locks, in an order two
// packages would have to keep, on the path of every call.
//
// The zero Side is not usable: call Start first.
type Side struct {
	mu        *sync.Mutex
	conn      interface{ SetReadDeadline(t time.Time) error }
	readChunk func() bool
	waiting   func() *Waiter
	grace     time.Duration
	expired   error

	// Under mu. reading says someone holds the reading side: a waiting
	// caller (leader), or the idle reader when leader is nil. rdl is
	// the read deadline in force. ended latches once the client has
	// failed; gone once done is closed.
	reading bool
	leader  *Waiter
	rdl     time.Time
	ended   bool
	gone    bool
	// The idle reader's timer (see Side): idleArmed says it is pending,
	// quietSince is when the reading side was last let go with no call
	// in flight.
	idle       *time.Timer
	idleArmed  bool
	quietSince time.Time

	done chan struct{} // closed once nothing reads the connection again
}

// Start readies s with cfg. Without a Conn it also starts the goroutine
// that holds the reading side for s's whole life. The idle reader is
// armed once the reading side is first let go, or by ElectLocked.
func (s *Side) Start(cfg Config) {
	s.mu, s.conn, s.readChunk, s.waiting = cfg.Mu, cfg.Conn, cfg.ReadChunk, cfg.Waiting
	s.grace, s.expired = cfg.Grace, cfg.Expired
	s.done = make(chan struct{})
	s.idle = time.AfterFunc(time.Hour, s.idleRead)
	s.idle.Stop()
	if s.conn == nil {
		s.reading = true
		go s.readIdle()
	}
}

// Done is closed once s has ended and the last holder of the reading
// side has let go: nothing reads the connection again.
func (s *Side) Done() <-chan struct{} { return s.done }

// Await waits until w is settled (nil), ctx ends (its error) or w's
// expiry passes (Config.Expired), taking the reading side whenever nobody
// holds it, and letting go of it before it returns. w must be in the
// client's table of calls (where Waiting finds it) from before Await
// until it is settled or Await returns. Await does not remove a waiter
// that gives up: the caller does, under Mu, and calls ElectLocked, since
// it may have been the one woken to read next.
func (s *Side) Await(ctx context.Context, w *Waiter) error {
	for {
		s.mu.Lock()
		if w.settled {
			s.ElectLocked() // woken to read but settled first: pass it on
			s.mu.Unlock()
			return nil
		}
		if !s.reading && !s.ended {
			s.reading, s.leader = true, w
			s.mu.Unlock()
			if why := s.lead(ctx, w); why != nil {
				return why
			}
			continue
		}
		var expired <-chan time.Time
		if !w.expiry.IsZero() {
			if !w.armed {
				w.armed = true
				if d := time.Until(w.expiry); w.timer == nil {
					w.timer = time.NewTimer(d)
				} else {
					w.timer.Reset(d)
				}
			}
			expired = w.timer.C
		}
		wakeup := w.wakeup()
		s.mu.Unlock()
		if expired == nil && ctx.Done() == nil {
			// Nothing else can end the wait: a plain receive, not a
			// select over channels that are nil.
			<-wakeup
			continue
		}
		select {
		case <-wakeup:
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			return s.expired
		}
	}
}

// lead reads for the client, as the holder of the reading side, until w
// is settled (nil) or its waiter gives up (the reason); either way it
// lets go of the reading side first.
func (s *Side) lead(ctx context.Context, w *Waiter) error {
	if ctx.Done() != nil {
		if w.kickSide != s {
			// Bound once for the life of w on s, not once a call:
			// waiters are pooled.
			w.kick, w.kickSide = func() {
				s.mu.Lock()
				if s.leader == w {
					s.setReadDeadlineLocked(kickTime)
				}
				s.mu.Unlock()
			}, s
		}
		stop := context.AfterFunc(ctx, w.kick)
		defer stop()
	}
	for {
		s.mu.Lock()
		var why error
		switch {
		case w.settled:
		case ctx.Err() != nil:
			why = ctx.Err()
		default:
			if why = s.leadDeadlineLocked(w); why != nil {
				break
			}
			s.mu.Unlock()
			// A stream that ended has settled every call, w included,
			// which the next turn finds.
			s.readChunk()
			continue
		}
		s.releaseLocked()
		s.mu.Unlock()
		return why
	}
}

// leadDeadlineLocked gives the leader's Read its deadline, or returns
// Config.Expired once w's expiry has passed. Without an expiry the Read
// has none: only a kick interrupts it. With one, the deadline is no later
// than the expiry, so that the leader wakes to give up; the deadline in
// force is kept when it is still ahead, not after the expiry, and at
// most w's slack before it: moving a deadline re-arms a runtime timer,
// and with one call after another each would otherwise move it. Waking
// early costs one more turn of the leader's loop.
func (s *Side) leadDeadlineLocked(w *Waiter) error {
	if w.expiry.IsZero() {
		s.setReadDeadlineLocked(time.Time{})
		return nil
	}
	now := time.Now()
	if !now.Before(w.expiry) {
		return s.expired
	}
	if s.rdl.After(now) && !s.rdl.After(w.expiry) && w.expiry.Sub(s.rdl) <= w.slack {
		return nil
	}
	s.setReadDeadlineLocked(w.expiry)
	return nil
}

// idleRead runs when the idle timer fires: once the reading side has
// been quiet for the grace, with no call in flight, it takes it. Fired
// early, it arms the timer for the rest of the grace; fired while the
// side is held or a call is in flight (whose waiter has been woken to
// take it), it leaves the next arming to whoever lets go.
func (s *Side) idleRead() {
	s.mu.Lock()
	s.idleArmed = false
	if s.reading || s.ended || s.waiting() != nil {
		s.mu.Unlock()
		return
	}
	if rest := s.grace - time.Since(s.quietSince); rest > 0 {
		s.idleArmed = true
		s.idle.Reset(rest)
		s.mu.Unlock()
		return
	}
	s.reading, s.leader = true, nil
	s.setReadDeadlineLocked(time.Time{})
	s.mu.Unlock()
	s.readIdle()
}

// readIdle reads without a deadline, as the holder of the reading side
// with no call to lead for, until a chunk has been handled or, without a
// Conn, until the stream ends; then it lets go. Something arrived (or the
// stream ended): traffic may be resuming, and the next call should read
// its own reply rather than be handed it. With nothing in flight, the
// idle timer is armed again.
func (s *Side) readIdle() {
	for {
		if alive := s.readChunk(); !alive || s.conn != nil {
			break
		}
	}
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
}

// releaseLocked lets go of the reading side.
func (s *Side) releaseLocked() {
	s.reading, s.leader = false, nil
	s.ElectLocked()
}

// ElectLocked makes sure the reading side has a holder or will get one:
// once s has ended it records that reading has ended for good; otherwise
// it wakes one waiting caller to take it or, with no call in flight, arms
// the idle reader. Every change that can leave the reading side free with
// calls waiting ends here: a client that removes a call it did not
// settle (its caller gave up) calls it, under Mu.
func (s *Side) ElectLocked() {
	if s.reading {
		return
	}
	if s.ended {
		if !s.gone {
			s.gone = true
			close(s.done)
		}
		return
	}
	if w := s.waiting(); w != nil {
		w.wake()
		return
	}
	s.quietSince = time.Now()
	if !s.idleArmed {
		s.idleArmed = true
		s.idle.Reset(s.grace)
	}
}

// EndLocked ends s for good, once the client has failed and settled
// every call: nobody takes the reading side again, the idle reader is
// disarmed, and Done closes as soon as the holder, if any, lets go.
// Under Mu.
func (s *Side) EndLocked() {
	s.ended = true
	s.idle.Stop()
	s.idleArmed = false
	s.ElectLocked()
}

// setReadDeadlineLocked sets the read deadline if it changes: under mu,
// so that a leader's kick is never overwritten.
func (s *Side) setReadDeadlineLocked(t time.Time) {
	if !t.Equal(s.rdl) {
		s.rdl = t
		_ = s.conn.SetReadDeadline(t)
	}
}

// Waiter is one call's place in the election; a client embeds one in
// each of its calls. The zero value is ready to use, and Reset readies a
// used one for the next call. Its state is under Config.Mu.
type Waiter struct {
	done    chan struct{} // 1-buffered wake-up, made on first use; the state under Mu says why
	settled bool
	// timer bounds a waiter that is not reading: it is armed (at
	// expiry) only once the caller waits as a follower, since a
	// leader's read deadline is its timer.
	timer  *time.Timer
	armed  bool
	expiry time.Time // zero: none
	slack  time.Duration
	// kick interrupts the leader's Read once its ctx ends, if w still
	// leads kickSide; made by lead, kept across Reset.
	kick     func()
	kickSide *Side
}

// SettleLocked records that w's call has its outcome and wakes its
// caller. A call is settled exactly once, by whoever removes it from the
// client's table; a second settlement is a bug, and panics.
func (w *Waiter) SettleLocked() {
	if w.settled {
		panic("readside: waiter settled twice")
	}
	w.settled = true
	w.wake()
}

// ExpireLocked makes Await give up on w with Config.Expired at t; called
// again, it moves t (a call's progress extends it). A leader may keep a
// read deadline in force up to slack before t rather than move it.
func (w *Waiter) ExpireLocked(t time.Time, slack time.Duration) {
	w.expiry, w.slack = t, slack
	if w.armed {
		w.timer.Reset(time.Until(t))
	}
}

// Reset readies w for another call. Its call must be settled or removed
// from the client's table, so that nothing else touches w: Reset needs
// no lock.
func (w *Waiter) Reset() {
	if w.armed {
		w.timer.Stop()
	}
	select {
	case <-w.done: // a wake-up nobody consumed
	default:
	}
	w.settled, w.armed, w.expiry, w.slack = false, false, time.Time{}, 0
}

// wakeup returns w's wake-up channel, making it on first use. Under Mu.
func (w *Waiter) wakeup() chan struct{} {
	if w.done == nil {
		w.done = make(chan struct{}, 1)
	}
	return w.done
}

// wake signals w's caller without blocking: the 1-buffered channel holds
// at most one pending wake-up, and the caller re-reads the state under
// Mu after each. Under Mu.
func (w *Waiter) wake() {
	select {
	case w.wakeup() <- struct{}{}:
	default:
	}
}
