package capwire

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// A Client's two sides are tokens passed between the goroutines that need
// them, not goroutines of their own, so a round trip with one call in
// flight involves no hand-over at all: the caller writes its frame and
// then reads its reply itself.
//
// Writing is a framewrite.Group: a caller that finds the writer free
// writes its own frame; one that finds it held queues its frame and
// returns, and the holder writes everything queued, in order, before
// letting go, so N concurrent callers cost far fewer than N write system
// calls.
//
// Reading: whoever holds the reading side reads the socket and settles
// every call whose reply it finds, waking its waiter. A waiting caller
// takes the reading side when nobody holds it (the leader); once its own
// reply is in, or its ctx ends, it lets go and wakes one other waiter to
// take over, so no follower is ever left without a reader. A leader's ctx
// ending interrupts its blocked read by setting the read deadline in the
// past; frameIn loses nothing to that. With no call in flight for
// idleGrace, a goroutine takes the reading side so that a hang-up or a
// fatal frame is still seen at once (Shared relies on that to redial).
// That timer is armed lazily: the reading side going quiet only records
// when, and a timer that fires early is armed again for the rest, so
// back-to-back calls touch no timer at all. Each timer event costs a
// wake-up of a thread of the runtime's, measured as a sixth of the
// client's CPU per call when one was armed per call, and the grace is
// long enough that steady traffic sees one only every few hundred calls.

const (
	// idleGrace is how long the reading side may rest with no call in
	// flight before a goroutine takes it: long against the gap between
	// back-to-back calls, short against anything a program would notice
	// (a hang-up seen this much later is still seen before a program
	// that paused would call again).
	idleGrace = 20 * time.Millisecond
	// maxQueued bounds the bytes queued behind the writer
	// (framewrite.GroupConfig.MaxQueued).
	maxQueued = 1 << 20
)

// kickTime is a read deadline in the past: a blocked read returns at once.
var kickTime = time.Unix(1, 0)

// await waits until w is settled (nil) or ctx ends (its error), taking the
// reading side whenever nobody holds it.
func (c *Client) await(ctx context.Context, w *waiter) error {
	for {
		c.mu.Lock()
		if w.settled {
			c.electLocked() // woken to read but settled first: pass it on
			c.mu.Unlock()
			return nil
		}
		if !c.reading && c.err == nil {
			c.reading, c.leader = true, w
			c.mu.Unlock()
			if why := c.lead(ctx, w); why != nil {
				return why
			}
			continue
		}
		c.mu.Unlock()
		select {
		case <-w.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lead reads for the client, as the holder of the reading side, until w
// is settled (nil) or ctx ends (its error); either way it lets go of the
// reading side first.
func (c *Client) lead(ctx context.Context, w *waiter) error {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			c.mu.Lock()
			if c.leader == w {
				c.setReadDeadlineLocked(kickTime)
			}
			c.mu.Unlock()
		})
		defer stop()
	}
	for {
		c.mu.Lock()
		var why error
		switch {
		case w.settled:
		case ctx.Err() != nil:
			why = ctx.Err()
		default:
			c.setReadDeadlineLocked(time.Time{})
			c.mu.Unlock()
			c.readChunk()
			continue
		}
		c.releaseLocked()
		c.mu.Unlock()
		return why
	}
}

// readChunk handles the frames already read, if there are any, and
// otherwise performs one read and handles every complete frame it
// finishes. On a broken connection it fails the client, which settles
// every call; the caller then finds its own settled. Only the holder of
// the reading side calls it.
func (c *Client) readChunk() {
	if n, ok := c.handleBuffered(); n > 0 || !ok {
		return
	}
	if err := c.in.fill(c.conn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		var we *WireError
		if errors.As(err, &we) {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, we))
		} else {
			c.fail(fmt.Errorf("%w: reading: %v", ErrClosed, err))
		}
		return
	}
	c.handleBuffered()
}

// handleBuffered handles every complete frame read so far, reporting how
// many and false if the connection failed.
func (c *Client) handleBuffered() (int, bool) {
	n := 0
	for {
		frame, err := c.in.next()
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return n, false
		}
		if frame == nil {
			return n, true
		}
		n++
		if !c.handleFrame(frame) {
			return n, false
		}
	}
}

// idleRead runs when the idle timer fires: once the reading side has
// been quiet for idleGrace, it takes it, reads once without a deadline
// and handles what came, then lets go. Fired early, it arms the timer for
// the rest of the grace; fired while the side is held, it leaves the next
// arming to whoever lets go.
func (c *Client) idleRead() {
	c.mu.Lock()
	c.idleArmed = false
	if c.reading || c.err != nil || len(c.calls) > 0 {
		c.mu.Unlock()
		return
	}
	if rest := idleGrace - time.Since(c.quietSince); rest > 0 {
		c.idleArmed = true
		c.idle.Reset(rest)
		c.mu.Unlock()
		return
	}
	c.reading, c.leader = true, nil
	c.setReadDeadlineLocked(time.Time{})
	c.mu.Unlock()
	c.readChunk()
	// Something arrived (or the connection broke): traffic may be
	// resuming, and the next call should read its own reply rather than
	// be handed it. With nothing in flight, the idle timer is armed again.
	c.mu.Lock()
	c.releaseLocked()
	c.mu.Unlock()
}

// releaseLocked lets go of the reading side.
func (c *Client) releaseLocked() {
	c.reading, c.leader = false, nil
	c.electLocked()
}

// electLocked makes sure the reading side has a holder or will get one:
// once the client has failed it records that reading has ended for good;
// otherwise it wakes one waiting caller to take it or, with no call in
// flight, arms the idle reader. Every change that can leave the reading
// side free with calls waiting ends here.
func (c *Client) electLocked() {
	if c.reading {
		return
	}
	if c.err != nil {
		if !c.readerGone {
			c.readerGone = true
			close(c.readDone)
		}
		return
	}
	for _, w := range c.calls {
		wake(w)
		return
	}
	c.quietSince = time.Now()
	if !c.idleArmed {
		c.idleArmed = true
		c.idle.Reset(idleGrace)
	}
}

// setReadDeadlineLocked sets the read deadline if it changes: under mu,
// so that a leader's kick is never overwritten.
func (c *Client) setReadDeadlineLocked(t time.Time) {
	if !t.Equal(c.rdl) {
		c.rdl = t
		_ = c.conn.SetReadDeadline(t)
	}
}
