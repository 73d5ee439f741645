package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
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
	// maxQueued bounds the bytes queued behind the writer: past it a
	// line waits for room (one line is always accepted into an empty
	// queue, whatever its size).
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

// write is the single writer path: every line goes through here, whole,
// in order. It returns once the line is written or queued behind the
// writer's holder; a failed or timed-out write is death (a half-written
// line has desynchronised the stream), and every call in flight, queued
// lines' callers included, then settles with the *DeadError.
//
// gather says other calls are in flight, so other lines may be about to
// be written: the sender that takes the writer's token then yields its
// processor once before writing, so that senders already runnable queue
// behind it and go out in the same write. With one processor, as the
// bridge runs by default, each would otherwise find the writer idle and
// make a write of its own, waking the server once per line.
func (c *Client) write(ctx context.Context, line []byte, gather bool) error {
	c.wmu.Lock()
	for c.wbusy && len(c.wq) > 0 && len(c.wq)+len(line) > maxQueued {
		if c.wroom == nil {
			c.wroom = make(chan struct{})
		}
		room := c.wroom
		c.wmu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.deadc:
			return c.Err()
		}
		c.wmu.Lock()
	}
	select {
	case <-c.deadc:
		c.wmu.Unlock()
		return c.Err()
	default:
	}
	if c.wbusy {
		c.wq = append(c.wq, line...)
		c.wmu.Unlock()
		return nil
	}
	c.wbusy = true
	c.wmu.Unlock()
	var taken []byte
	if gather {
		runtime.Gosched()
		c.wmu.Lock()
		if len(c.wq) > 0 {
			// This line first, then those queued while it yielded, in one
			// buffer: the queue's spare is free, as only the token's
			// holder uses it.
			joined := append(append(c.wspare[:0], line...), c.wq...)
			taken, c.wq, c.wspare = joined, c.wq[:0], nil
			line = taken
			if c.wroom != nil {
				close(c.wroom)
				c.wroom = nil
			}
		}
		c.wmu.Unlock()
	}
	for {
		if err := c.writeOut(line); err != nil {
			// The token is never given back: nothing may follow a
			// half-written line.
			c.die(fmt.Errorf("mcpwire: write to server stdin: %w", err))
			return c.Err()
		}
		c.wmu.Lock()
		if taken != nil && cap(taken) <= maxQueued {
			c.wspare = taken[:0]
		}
		if len(c.wq) == 0 {
			c.wbusy = false
			c.wmu.Unlock()
			return nil
		}
		taken, c.wq, c.wspare = c.wq, c.wspare, nil
		if c.wroom != nil {
			close(c.wroom)
			c.wroom = nil
		}
		c.wmu.Unlock()
		line = taken
	}
}

// writeOut writes b under a write deadline. The deadline is moved only
// when less than WriteTimeout of it is left, to WriteTimeout and a half
// from now, so a write always has at least WriteTimeout and at most half
// as much again, and back-to-back writes do not each pay for a deadline.
// Only the writer token's holder calls it.
func (c *Client) writeOut(b []byte) error {
	now := time.Now()
	if c.wdl.Sub(now) < c.cfg.WriteTimeout {
		c.wdl = now.Add(c.cfg.WriteTimeout + c.cfg.WriteTimeout/2)
		_ = c.conn.SetWriteDeadline(c.wdl)
	}
	_, err := c.conn.Write(b)
	return err
}
