package capwire

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/capbridge/capbridge/internal/readside"
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
// Reading is a readside.Side: a waiting caller reads the socket for
// everyone while nobody else does (readChunk), and hands the reading side
// on once its own reply is in or its ctx ends, which interrupts its
// blocked read; frameIn loses nothing to that. With no call in flight for
// idleGrace, a goroutine takes the reading side so that a hang-up or a
// fatal frame is still seen at once (Shared relies on that to redial).

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

// startReading readies the reading side and arms the idle reader, so
// that a hang-up right after the handshake is seen too.
func (c *Client) startReading() {
	c.side.Start(readside.Config{
		Mu:        &c.mu,
		Conn:      c.conn,
		ReadChunk: c.readChunk,
		Waiting:   c.waitingLocked,
		Grace:     idleGrace,
	})
	c.mu.Lock()
	c.side.ElectLocked()
	c.mu.Unlock()
}

// waitingLocked returns any call in flight, or nil: the one woken to take
// the reading side.
func (c *Client) waitingLocked() *readside.Waiter {
	for _, w := range c.calls {
		return &w.Waiter
	}
	return nil
}

// readChunk handles the frames already read, if there are any, and
// otherwise performs one read and handles every complete frame it
// finishes. On a broken connection it fails the client, which settles
// every call, and reports false. Only the holder of the reading side
// calls it.
func (c *Client) readChunk() bool {
	if n, ok := c.handleBuffered(); n > 0 || !ok {
		return ok
	}
	if err := c.in.fill(c.conn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		var we *WireError
		if errors.As(err, &we) {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, we))
		} else {
			c.fail(fmt.Errorf("%w: reading: %v", ErrClosed, err))
		}
		return false
	}
	_, ok := c.handleBuffered()
	return ok
}

// handleBuffered handles every complete frame read so far, reporting how
// many and false if the connection failed.
func (c *Client) handleBuffered() (int, bool) {
	n := 0
	for {
		frame, inPlace, err := c.in.next()
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return n, false
		}
		if frame == nil {
			return n, true
		}
		n++
		if !c.handleFrame(frame, inPlace) {
			return n, false
		}
	}
}
