package mcpwire

import (
	"errors"
	"os"
	"time"

	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/readside"
)

// The client's two sides are tokens passed between the goroutines that
// need them, not goroutines of their own, so a round trip with one call
// in flight involves no hand-over at all: the caller writes its request
// and then reads its reply itself.
//
// Writing is a framewrite.Group: a caller that finds the writer free
// writes its own line; one that finds it held queues its line and
// returns, and the holder writes everything queued, in order, before
// letting go, so N concurrent callers cost far fewer than N write system
// calls.
//
// Reading is a readside.Side: whoever holds the reading side reads stdout
// and handles every line in it (readChunk): responses settle their calls
// (waking their waiters), and notifications and server requests are
// handled as they come. A waiting caller reads for everyone while nobody
// else does, and hands the side on once its own reply is in or it gives
// up: when its context ends, or at the call's own expiry, since the
// leader's Read runs under a read deadline no later than that. With no
// call in flight for idleGrace, a goroutine takes the reading side so
// that notifications, server requests and the end of the stream are
// still seen.
//
// A Conn without SetReadDeadline cannot have a blocked Read interrupted,
// so for it one goroutine holds the reading side for the client's life
// and hands every reply over.

// readDeadliner is the optional side of a Conn whose blocked Read a
// deadline interrupts with an error matching os.ErrDeadlineExceeded
// (an *os.File pipe, a net.Conn).
type readDeadliner interface {
	SetReadDeadline(t time.Time) error
}

const (
	// idleGrace is how long the reading side may rest with no call in
	// flight before a goroutine takes it: long against the gap between
	// back-to-back calls, short against anything a person or a
	// supervisor would notice (a notification or the server's exit is
	// seen at most this late). While calls keep coming the idle timer
	// fires about once per idleGrace only to find the side was in use,
	// and each firing wakes a thread, so it is not shorter than it must
	// be.
	idleGrace = 10 * time.Millisecond
	// maxQueued bounds the bytes queued behind the writer
	// (framewrite.GroupConfig.MaxQueued).
	maxQueued = 1 << 20
)

// readState belongs to whoever holds the reading side.
type readState struct {
	buf []byte
	fr  *mcpproto.Framer
	m   mcpproto.Message
}

func (r *readState) init(maxLine int) {
	r.buf = make([]byte, readBufSize)
	r.fr = mcpproto.NewFramer(maxLine)
}

// startReading readies the reading side: over a Conn with read
// deadlines callers read their own replies; over one without, a
// goroutine reads for the client's whole life.
func (c *Client) startReading(conn Conn) {
	cfg := readside.Config{
		Mu:        &c.mu,
		ReadChunk: c.readChunk,
		Waiting:   c.waitingLocked,
		Grace:     idleGrace,
		Expired:   ErrTimeout,
	}
	if rc, ok := conn.(readDeadliner); ok {
		c.interruptible, cfg.Conn = true, rc
	}
	c.rs.init(c.cfg.MaxLineBytes)
	c.side.Start(cfg)
}

// waitingLocked returns any call in flight, or nil: the one woken to take
// the reading side.
func (c *Client) waitingLocked() *readside.Waiter {
	for _, cl := range c.calls {
		return &cl.Waiter
	}
	return nil
}

// readChunk performs one Read and handles every complete line it
// finishes, reporting false once the stream has ended and the client is
// dead. Only the holder of the reading side calls it.
func (c *Client) readChunk() bool {
	n, err := c.conn.Read(c.rs.buf)
	if n > 0 {
		c.rs.fr.Push(c.rs.buf[:n])
		for {
			line, ferr := c.rs.fr.Next()
			if ferr != nil {
				c.badLine(line, ferr)
				continue
			}
			if line == nil {
				break
			}
			c.handleLine(line, &c.rs.m)
		}
	}
	if err != nil {
		if c.interruptible && errors.Is(err, os.ErrDeadlineExceeded) {
			return true
		}
		c.onEOF()
		return false
	}
	return true
}

func (c *Client) onEOF() {
	reason := error(nil)
	t := time.NewTimer(eofExitWait)
	select {
	case <-c.conn.Done():
		reason = c.conn.EndReason()
	case <-c.deadc:
	case <-t.C:
		reason = errors.New("mcpwire: server closed its stdout")
	}
	t.Stop()
	if reason != nil {
		c.die(reason)
	}
}
