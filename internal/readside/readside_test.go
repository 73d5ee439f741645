package readside

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const grace = 20 * time.Millisecond

var (
	errDeadline = errors.New("read deadline passed") // as os.ErrDeadlineExceeded
	errExpired  = errors.New("call expired")
)

// fakeConn is a connection whose messages are call ids (one a Read),
// with a read deadline that interrupts a blocked Read. Closing in ends
// the stream.
type fakeConn struct {
	in chan int

	mu      sync.Mutex
	dl      time.Time
	changed chan struct{} // closed when dl changes
}

func newFakeConn() *fakeConn {
	return &fakeConn{in: make(chan int, 16), changed: make(chan struct{})}
}

func (f *fakeConn) SetReadDeadline(t time.Time) error {
	f.mu.Lock()
	f.dl = t
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return nil
}

func (f *fakeConn) read() (int, error) {
	for {
		f.mu.Lock()
		dl, changed := f.dl, f.changed
		f.mu.Unlock()
		var expired <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, errDeadline
			}
			t := time.NewTimer(d)
			defer t.Stop()
			expired = t.C
		}
		select {
		case id, ok := <-f.in:
			if !ok {
				return 0, io.EOF
			}
			return id, nil
		case <-expired:
			return 0, errDeadline
		case <-changed:
		}
	}
}

// client is the smallest client of a Side: a table of calls by id, each
// settled by whoever reads its id.
type client struct {
	conn *fakeConn
	side Side

	mu     sync.Mutex
	calls  map[int]*Waiter
	dead   bool
	readBy []*Waiter // the leader at each message read (nil: the idle reader or the reading goroutine)
}

// newClient starts a client; without deadlines its Side gets no Conn.
// The idle reader is armed at once, as capwire's client arms it.
func newClient(deadlines bool) *client {
	c := &client{conn: newFakeConn(), calls: map[int]*Waiter{}}
	cfg := Config{Mu: &c.mu, ReadChunk: c.readChunk, Waiting: c.waitingLocked, Grace: grace, Expired: errExpired}
	if deadlines {
		cfg.Conn = c.conn
	}
	c.side.Start(cfg)
	c.mu.Lock()
	c.side.ElectLocked()
	c.mu.Unlock()
	return c
}

func (c *client) readChunk() bool {
	id, err := c.conn.read()
	switch {
	case errors.Is(err, errDeadline):
		return true
	case err != nil:
		c.fail()
		return false
	}
	c.mu.Lock()
	c.readBy = append(c.readBy, c.side.leader)
	if w := c.calls[id]; w != nil {
		delete(c.calls, id)
		w.SettleLocked()
	}
	c.mu.Unlock()
	return true
}

func (c *client) waitingLocked() *Waiter {
	for _, w := range c.calls {
		return w
	}
	return nil
}

// fail settles every call and ends the election, once.
func (c *client) fail() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	c.dead = true
	for id, w := range c.calls {
		delete(c.calls, id)
		w.SettleLocked()
	}
	c.side.EndLocked()
}

// add registers call id, as a client does before writing its request.
func (c *client) add(id int) *Waiter {
	w := new(Waiter)
	c.mu.Lock()
	c.calls[id] = w
	c.mu.Unlock()
	return w
}

// await waits for call id in a goroutine of its own; a call given up is
// removed, as a client does.
func (c *client) await(ctx context.Context, id int, w *Waiter) <-chan error {
	ch := make(chan error, 1)
	go func() {
		err := c.side.Await(ctx, w)
		if err != nil {
			c.mu.Lock()
			if c.calls[id] == w {
				delete(c.calls, id)
				c.side.ElectLocked()
			}
			c.mu.Unlock()
		}
		ch <- err
	}()
	return ch
}

func (c *client) leader() *Waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.side.leader
}

func (c *client) reading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.side.reading
}

func (c *client) reads() []*Waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Waiter(nil), c.readBy...)
}

// end ends the stream and waits until nothing reads it.
func (c *client) end(t *testing.T) {
	close(c.conn.in)
	c.fail()
	select {
	case <-c.side.Done():
	case <-time.After(time.Minute):
		t.Fatal("Done never closed")
	}
}

func noError(t *testing.T, ch <-chan error) {
	t.Helper()
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

// A lone caller reads its own reply and lets go of the reading side.
func TestLoneCallerReadsItsOwnReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		w := c.add(1)
		done := c.await(t.Context(), 1, w)
		synctest.Wait()
		if c.leader() != w {
			t.Fatal("the lone caller does not hold the reading side")
		}
		c.conn.in <- 1
		noError(t, done)
		synctest.Wait()
		if got := c.reads(); len(got) != 1 || got[0] != w {
			t.Errorf("read by %v, want the caller", got)
		}
		if c.reading() {
			t.Error("the reading side is still held")
		}
	})
}

// A leader whose reply is in hands the reading side to a follower,
// which then reads its own.
func TestHandOffOnceLeadersReplyIsIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		a := c.add(1)
		doneA := c.await(t.Context(), 1, a)
		synctest.Wait()
		b := c.add(2)
		doneB := c.await(t.Context(), 2, b)
		synctest.Wait()
		if c.leader() != a {
			t.Fatal("the follower took the reading side from the leader")
		}
		c.conn.in <- 1
		noError(t, doneA)
		synctest.Wait()
		if c.leader() != b {
			t.Fatal("the follower was left without a reader")
		}
		c.conn.in <- 2
		noError(t, doneB)
		if got := c.reads(); len(got) != 2 || got[0] != a || got[1] != b {
			t.Errorf("read by %v, want the leader then the follower", got)
		}
	})
}

// A follower's reply read by the leader wakes the follower, and the
// leader keeps reading for its own.
func TestLeaderSettlesFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		a := c.add(1)
		doneA := c.await(t.Context(), 1, a)
		synctest.Wait()
		b := c.add(2)
		doneB := c.await(t.Context(), 2, b)
		synctest.Wait()
		c.conn.in <- 2
		noError(t, doneB)
		synctest.Wait()
		if c.leader() != a {
			t.Fatal("the leader let go before its own reply")
		}
		c.conn.in <- 1
		noError(t, doneA)
	})
}

// A leader whose ctx ends gives up at once, its blocked read kicked, and
// the follower takes over; a follower whose ctx ends leaves the leader
// alone.
func TestGiveUpOnCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		ctxA, cancelA := context.WithCancel(t.Context())
		a := c.add(1)
		doneA := c.await(ctxA, 1, a)
		synctest.Wait()
		ctxB, cancelB := context.WithCancel(t.Context())
		b := c.add(2)
		doneB := c.await(ctxB, 2, b)
		d := c.add(3)
		doneD := c.await(t.Context(), 3, d)
		synctest.Wait()

		cancelB()
		if err := <-doneB; !errors.Is(err, context.Canceled) {
			t.Fatalf("follower: %v", err)
		}
		synctest.Wait()
		if c.leader() != a {
			t.Fatal("a follower giving up moved the reading side")
		}

		start := time.Now()
		cancelA()
		if err := <-doneA; !errors.Is(err, context.Canceled) {
			t.Fatalf("leader: %v", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the leader gave up after %v, not at once", waited)
		}
		synctest.Wait()
		if c.leader() != d {
			t.Fatal("the remaining follower was left without a reader")
		}
		c.conn.in <- 3
		noError(t, doneD)
	})
}

// A waiter gives up at its expiry, leading (its read's deadline) or
// following (its timer), and an expiry moved later is honoured.
func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		start := time.Now()
		expireAt := func(w *Waiter, d time.Duration) {
			c.mu.Lock()
			w.ExpireLocked(start.Add(d), d/4)
			c.mu.Unlock()
		}
		a := c.add(1)
		expireAt(a, 3*time.Second)
		doneA := c.await(t.Context(), 1, a)
		synctest.Wait()
		b := c.add(2)
		expireAt(b, time.Second)
		doneB := c.await(t.Context(), 2, b)
		d := c.add(3)
		expireAt(d, time.Second)
		doneD := c.await(t.Context(), 3, d)
		synctest.Wait()

		time.Sleep(time.Second / 2)
		expireAt(d, 2*time.Second) // progress
		if err := <-doneB; !errors.Is(err, errExpired) || time.Since(start) != time.Second {
			t.Errorf("follower: %v after %v", err, time.Since(start))
		}
		if err := <-doneD; !errors.Is(err, errExpired) || time.Since(start) != 2*time.Second {
			t.Errorf("extended follower: %v after %v", err, time.Since(start))
		}
		if err := <-doneA; !errors.Is(err, errExpired) || time.Since(start) != 3*time.Second {
			t.Errorf("leader: %v after %v", err, time.Since(start))
		}
		synctest.Wait()
		if c.reading() {
			t.Error("the expired leader kept the reading side")
		}
	})
}

// With no call in flight for the grace, the idle reader takes the
// reading side, handles one chunk and lets go; a timer that fires early
// (the side was let go since it was armed) waits out the rest.
func TestIdleReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		time.Sleep(grace / 2)
		w := c.add(1)
		done := c.await(t.Context(), 1, w)
		synctest.Wait()
		c.conn.in <- 1
		noError(t, done)
		quiet := time.Now()

		c.conn.in <- 0 // sent unasked
		time.Sleep(grace / 2)
		synctest.Wait()
		if c.reading() || len(c.reads()) != 1 {
			t.Fatal("the idle reader did not wait out the grace since the side was let go")
		}
		time.Sleep(time.Until(quiet.Add(grace)))
		synctest.Wait()
		if got := c.reads(); len(got) != 2 || got[1] != nil {
			t.Fatalf("read by %v, want the idle reader second", got)
		}
		if c.reading() {
			t.Error("the idle reader kept the reading side")
		}

		// It goes on serving the peer with no call in flight.
		c.conn.in <- 0
		time.Sleep(grace)
		synctest.Wait()
		if got := c.reads(); len(got) != 3 {
			t.Fatalf("%d reads, want 3", len(got))
		}
	})
}

// With a call in flight, even one whose caller is not waiting yet, the
// idle reader leaves the reading side to it.
func TestIdleReaderLeavesSideToCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		w := c.add(1) // its request still being written
		time.Sleep(2 * grace)
		synctest.Wait()
		if c.reading() {
			t.Fatal("the idle reader took the reading side with a call in flight")
		}
		done := c.await(t.Context(), 1, w)
		synctest.Wait()
		if c.leader() != w {
			t.Fatal("the call does not read its own reply")
		}
		c.conn.in <- 1
		noError(t, done)
	})
}

// Without read deadlines one goroutine reads for the Side's whole life
// and every caller is handed its reply; the stream's end ends it.
func TestNoDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(false)
		w := c.add(1)
		done := c.await(t.Context(), 1, w)
		synctest.Wait()
		if c.leader() != nil {
			t.Fatal("a caller took a reading side that cannot be interrupted")
		}
		c.conn.in <- 1
		noError(t, done)
		if got := c.reads(); len(got) != 1 || got[0] != nil {
			t.Errorf("read by %v, want the reading goroutine", got)
		}
		close(c.conn.in)
		<-c.side.Done()
	})
}

// The stream ending settles every call once, the leader lets go, and
// Done closes.
func TestEndSettlesEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		a := c.add(1)
		doneA := c.await(t.Context(), 1, a)
		synctest.Wait()
		b := c.add(2)
		doneB := c.await(t.Context(), 2, b)
		synctest.Wait()
		close(c.conn.in)
		noError(t, doneA)
		noError(t, doneB)
		<-c.side.Done()
	})
}

// A Waiter reused after Reset starts afresh: it waits for its next reply.
func TestResetWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(true)
		defer c.end(t)
		w := c.add(1)
		done := c.await(t.Context(), 1, w)
		c.conn.in <- 1
		noError(t, done)
		w.Reset()
		c.mu.Lock()
		c.calls[2] = w
		c.mu.Unlock()
		done = c.await(t.Context(), 2, w)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a reused waiter returned before its reply: %v", err)
		default:
		}
		c.conn.in <- 2
		noError(t, done)
	})
}

func TestSettleTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second settlement did not panic")
		}
	}()
	var w Waiter
	w.SettleLocked()
	w.SettleLocked()
}
