package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/internal/framewrite"
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

// streamCarrier is the carrier over a Conn's byte stream (carrier.go).
type streamCarrier struct {
	c    *Client
	conn Conn
	// interruptible says conn has read deadlines: callers then read
	// their own replies. Without, one goroutine reads for the client's
	// whole life, as the only safe choice when a blocked Read cannot be
	// interrupted.
	interruptible bool

	// The writer is a token rather than a goroutine (framewrite.Group):
	// a caller that finds it free writes its own line; one that finds it
	// held queues its line and returns, and the holder writes everything
	// queued before letting go (group commit).
	w *framewrite.Group

	// The reading side is a token too, guarded by Client.mu; rs belongs
	// to its holder.
	side readside.Side
	rs   readState

	// post is conn when each message goes as a request of its own (the
	// legacy HTTP+SSE transport's POSTs), else nil. Every message is then
	// posted (roundTrip and send), none written through w: a call's by
	// its caller, concurrently with the others and bounded by the call's
	// deadline, a refusal failing that call alone; the messages no
	// caller waits for aside.
	post  poster
	aside asides
}

// poster is a Conn whose every message is a request of its own.
type poster interface {
	// postLine sends line, bounded by ctx and the connection's life.
	postLine(ctx context.Context, line []byte) error
}

// newStream readies the carrier over conn: over a Conn with read
// deadlines callers read their own replies; over one without, a
// goroutine reads for the client's whole life.
func newStream(c *Client, conn Conn) *streamCarrier {
	s := &streamCarrier{c: c, conn: conn}
	s.post, _ = conn.(poster)
	s.w = framewrite.NewGroup(conn, framewrite.GroupConfig{
		Timeout: c.cfg.WriteTimeout, MaxQueued: maxQueued, Done: c.deadc, Stopped: c.Err,
		Fail: s.writeFailed,
	})
	cfg := readside.Config{
		Mu:        &c.mu,
		ReadChunk: s.readChunk,
		Waiting:   c.waitingLocked,
		Grace:     idleGrace,
		Expired:   ErrTimeout,
	}
	if rc, ok := conn.(readDeadliner); ok {
		s.interruptible, cfg.Conn = true, rc
	}
	s.rs.init(c.cfg.MaxLineBytes)
	s.side.Start(cfg)
	return s
}

func (s *streamCarrier) roundTrip(ctx context.Context, cl *call, _ outbound, line []byte, gather bool) (bool, error) {
	if s.post != nil {
		if sent, done, err := s.postCall(ctx, cl, line); done {
			return sent, err
		}
	} else if err := s.w.Write(ctx, line, true, gather); err != nil {
		return false, err
	}
	return true, s.side.Await(ctx, &cl.Waiter)
}

// postCall posts cl's request, bounded by its caller's context and the
// call's deadline. done reports that the call needs no waiting for its
// reply: it is given up on (sent, and the reason), refused (not sent,
// and the refusal), or settled by the client's death (the server cannot
// be reached: as a process that exited, the restart policy applies).
func (s *streamCarrier) postCall(ctx context.Context, cl *call, line []byte) (sent, done bool, err error) {
	dl := time.Now().Add(cl.idle)
	if cl.hard.Before(dl) {
		dl = cl.hard
	}
	if ctx.Err() != nil {
		return false, true, context.Cause(ctx) // given up on before its POST: never sent
	}
	pctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	err = s.post.postLine(pctx, line)
	var he *HTTPError
	switch {
	case err == nil:
		return true, false, nil
	case ctx.Err() != nil:
		return true, true, context.Cause(ctx)
	case pctx.Err() != nil:
		return true, true, ErrTimeout
	case errors.As(err, &he):
		return false, true, err
	case unreachable(err):
		s.c.die(fmt.Errorf("mcpwire: POST (HTTP+SSE): %w", err))
		return true, true, nil
	}
	return true, true, err
}

func (s *streamCarrier) send(ctx context.Context, _ outbound, line []byte) error {
	if s.post != nil {
		pctx, cancel := context.WithTimeout(ctx, s.c.cfg.WriteTimeout)
		defer cancel()
		return s.post.postLine(pctx, line)
	}
	return s.w.Write(ctx, line, true, false)
}

func (s *streamCarrier) listen(ctx context.Context, _ int64, line []byte) error {
	return s.send(ctx, outbound{}, line)
}

// unlisten ends the stream as a stdio client must: notifications/cancelled
// naming the listen request (2026-07-28 subscriptions).
func (s *streamCarrier) unlisten(id int64) {
	p := strconv.AppendInt([]byte(`{"requestId":`), id, 10)
	p = append(p, `,"reason":"client closing"}`...)
	_ = s.send(context.Background(), outbound{}, appendNotification(nil, "notifications/cancelled", p))
}

func (s *streamCarrier) cancels() bool { return true }

func (s *streamCarrier) sendAside(o outbound, line []byte) {
	if s.post == nil {
		_ = s.send(context.Background(), o, line)
		return
	}
	s.aside.run(s.c, o, func() { _ = s.send(context.Background(), o, line) })
}

func (s *streamCarrier) negotiated(string)           {}
func (s *streamCarrier) established(context.Context) {}
func (s *streamCarrier) electLocked()                { s.side.ElectLocked() }
func (s *streamCarrier) endLocked()                  { s.side.EndLocked() }
func (s *streamCarrier) tail() []byte                { return s.conn.StderrTail() }

// shutdown ends the connection, which ends the posts made aside, then
// waits for them.
func (s *streamCarrier) shutdown() (Exit, error) {
	s.aside.close()
	e, err := s.conn.Shutdown()
	s.aside.wait()
	return e, err
}

func (s *streamCarrier) readersDone() <-chan struct{} { return s.side.Done() }

func (s *streamCarrier) kind() string {
	if k, ok := s.conn.(interface{ transportName() string }); ok {
		return k.transportName()
	}
	return "stream"
}

func (s *streamCarrier) pid() int {
	if p, ok := s.conn.(interface{ Pid() int }); ok {
		return p.Pid()
	}
	return 0
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
func (s *streamCarrier) readChunk() bool {
	c := s.c
	n, err := s.conn.Read(s.rs.buf)
	if n > 0 {
		s.rs.fr.Push(s.rs.buf[:n])
		for {
			line, ferr := s.rs.fr.Next()
			if ferr != nil {
				c.badLine(line, ferr)
				continue
			}
			if line == nil {
				break
			}
			c.handleLine(line, &s.rs.m, 0)
		}
	}
	if err != nil {
		if s.interruptible && errors.Is(err, os.ErrDeadlineExceeded) {
			return true
		}
		s.onEOF()
		return false
	}
	return true
}

// writeFailed ends the client after a write to the server's stdin
// failed. A broken pipe means the server closed its stdin or exited, most
// often because it could not start at all: then, as at the end of its
// stdout, the death waits (bounded) for the server's end, so that it is
// reported with the exit status and the stderr that says why.
func (s *streamCarrier) writeFailed(err error) {
	reason := fmt.Errorf("mcpwire: write to server stdin: %w", err)
	if errors.Is(err, syscall.EPIPE) {
		if end, ok := s.awaitEnd(); ok && end != nil {
			reason = fmt.Errorf("%w, after %w", end, reason)
		}
	}
	s.c.die(reason)
}

// onEOF ends the client when the server's stdout ends, with the reason
// the server's end gives (its exit status), if it comes in time.
func (s *streamCarrier) onEOF() {
	end, ok := s.awaitEnd()
	switch {
	case !ok:
		// If the client is dead already, die keeps the first reason.
		s.c.die(errors.New("mcpwire: server closed its stdout"))
	case end != nil:
		s.c.die(end)
	}
}

// awaitEnd waits, at most eofExitWait, for the server's end (exited and
// its stderr drained, so the tail is whole) and returns its reason; ok is
// false if the client died first or the wait ran out.
func (s *streamCarrier) awaitEnd() (end error, ok bool) {
	t := time.NewTimer(eofExitWait)
	defer t.Stop()
	select {
	case <-s.conn.Done():
		return s.conn.EndReason(), true
	case <-s.c.deadc:
	case <-t.C:
	}
	return nil, false
}
