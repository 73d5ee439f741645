package mcpwire

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/capbridge/capbridge/internal/mcpproto"
)

// The client's two sides are tokens passed between the goroutines that
// need them, not goroutines of their own, so a round trip with one call
// in flight involves no hand-over at all: the caller writes its request
// and then reads its reply itself.
//
// Writing: a caller that finds the writer free writes its own line; one
// that finds it held queues its line and returns, and the holder writes
// everything queued, in order, before letting go, so N concurrent
// callers cost far fewer than N write system calls.
//
// Reading: whoever holds the reading side reads stdout and handles every
// line in it: responses settle their calls (waking their waiters), and
// notifications and server requests are handled as they come. A waiting
// caller takes the reading side when nobody holds it (the leader); once
// its own reply is in, or it gives up, it lets go and wakes one other
// waiter to take over, so no follower is ever left without a reader.
// Giving up is possible because the leader's Read is interruptible: it
// runs under a read deadline at the call's own expiry, and a cancelled
// context sets the deadline in the past. With no call in flight for
// idleGrace, a goroutine takes the reading side so that notifications,
// server requests and the end of the stream are still seen; it lets go
// after the first chunk it handles.
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

// kickTime is a read deadline in the past: a blocked Read returns at once.
var kickTime = time.Unix(1, 0)

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

// Outcomes of readChunk.
const (
	readMore  = iota // keep reading
	readEnded        // the stream ended and the client is dead: let go
)

// readChunk performs one Read and handles every complete line it
// finishes. Only the holder of the reading side calls it.
func (c *Client) readChunk() int {
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
		if c.rconn != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			return readMore
		}
		c.onEOF()
		return readEnded
	}
	return readMore
}

// lead reads for the client, as the holder of the reading side, until
// cl is settled (nil) or its waiter gives up (the reason); either way it
// lets go of the reading side first.
func (c *Client) lead(ctx context.Context, cl *call) error {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			c.mu.Lock()
			if c.leader == cl {
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
		case cl.retired:
		case ctx.Err() != nil:
			why = ctx.Err()
		default:
			now := time.Now()
			if !now.Before(cl.expiry) {
				why = ErrTimeout
				break
			}
			c.leadDeadlineLocked(now, cl)
			c.mu.Unlock()
			if c.readChunk() == readMore {
				continue
			}
			c.mu.Lock()
		}
		c.releaseLocked()
		c.mu.Unlock()
		return why
	}
}

// idleRead runs when the idle timer fires: it takes the reading side if
// nobody holds it and nobody has for idleGrace; if the side was let go
// more recently, it waits out the rest.
func (c *Client) idleRead() {
	c.mu.Lock()
	c.idleArmed = false
	if c.reading || c.dead != nil {
		c.mu.Unlock()
		return
	}
	if rest := idleGrace - time.Since(c.idleSince); rest > 0 {
		c.idleArmed = true
		c.idle.Reset(rest)
		c.mu.Unlock()
		return
	}
	c.reading, c.leader = true, nil
	c.setReadDeadlineLocked(time.Time{})
	c.mu.Unlock()
	c.readIdle()
}

// readIdle reads without a deadline, as the holder of the reading side,
// until a chunk has arrived and been handled (then it lets go, so that
// callers read their own replies again) or, for a Conn without read
// deadlines, until the stream ends.
func (c *Client) readIdle() {
	for {
		if c.readChunk() == readEnded {
			c.mu.Lock()
			c.releaseLocked()
			c.mu.Unlock()
			return
		}
		if c.rconn == nil {
			continue
		}
		// Something arrived: traffic may be resuming, and the next
		// call should read its own reply rather than be handed it.
		// With nothing in flight, the idle timer is armed again.
		c.mu.Lock()
		c.releaseLocked()
		c.mu.Unlock()
		return
	}
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

// releaseLocked lets go of the reading side.
func (c *Client) releaseLocked() {
	c.reading, c.leader = false, nil
	c.electLocked()
}

// electLocked makes sure the reading side has a holder or will get one:
// after death it records that reading has ended for good; otherwise it
// wakes one waiting caller to take it or, with no call in flight, arms
// the idle reader. Every change that can leave the reading side free
// with calls waiting ends here.
func (c *Client) electLocked() {
	if c.reading {
		return
	}
	if c.dead != nil {
		if !c.readerGone {
			c.readerGone = true
			close(c.readerDone)
		}
		return
	}
	for _, cl := range c.calls {
		wake(cl)
		return
	}
	c.idleSince = time.Now()
	if !c.idleArmed {
		c.idleArmed = true
		c.idle.Reset(idleGrace)
	}
}

// leadDeadlineLocked gives the leader's Read a deadline no later than
// cl's expiry, so that it wakes to time cl out. The deadline in force is
// kept when it is still ahead, not after the expiry, and at most a
// quarter of cl's idle timeout before it: moving a deadline re-arms a
// runtime timer, and with one call after another each would otherwise
// move it. Waking early costs one more turn of the leader's loop.
func (c *Client) leadDeadlineLocked(now time.Time, cl *call) {
	if c.rdl.After(now) && !c.rdl.After(cl.expiry) && cl.expiry.Sub(c.rdl) <= cl.idle/4 {
		return
	}
	c.setReadDeadlineLocked(cl.expiry)
}

// setReadDeadlineLocked sets the read deadline if it changes: under mu,
// so that a cancelled leader's kick is never overwritten.
func (c *Client) setReadDeadlineLocked(t time.Time) {
	if !t.Equal(c.rdl) {
		c.rdl = t
		_ = c.rconn.SetReadDeadline(t)
	}
}
