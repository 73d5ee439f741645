package mcpwire

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Conn is the transport seam the client is written against: one open
// byte channel to one MCP server plus that server's custody. The
// production implementation is a child process (Spawn); NewMemory gives
// an in-process one for unit tests.
//
// Concurrency contract: Read is called by one goroutine at a time (the
// client's reader); Write and SetWriteDeadline by one goroutine at a
// time (the client serializes them); Done, EndReason, StderrTail and
// Shutdown may be called by anyone at any time. Shutdown unblocks Read
// and Write.
type Conn interface {
	// Read reads the server's stdout. It returns io.EOF when the
	// stream has ended (the server closed it, exited, or Shutdown ran).
	Read(p []byte) (int, error)
	// Write writes to the server's stdin.
	Write(p []byte) (int, error)
	// SetWriteDeadline bounds every later Write (zero: no deadline).
	SetWriteDeadline(t time.Time) error
	// Done is closed once the server has ended and its stderr has been
	// drained (or the drain bound passed).
	Done() <-chan struct{}
	// EndReason describes how the server ended (an error matching
	// ErrExited); nil before Done is closed.
	EndReason() error
	// StderrTail returns a copy of the last bytes the server wrote to
	// stderr (bounded; may be empty).
	StderrTail() []byte
	// Shutdown ends the server by the shutdown sequence, releases every
	// resource and returns the evidence. It is idempotent: later calls
	// return the first result. Its duration is bounded by the
	// transport's configured waits.
	Shutdown() (Exit, error)
}

// ErrExited is matched by every EndReason: the server is gone.
var ErrExited = errors.New("mcpwire: server exited")

// ExitHow says how the server ended during Shutdown.
type ExitHow uint8

const (
	// ExitedBefore: the server had already ended when Shutdown began.
	ExitedBefore ExitHow = iota + 1
	// ExitedOnEOF: it exited within the grace after its stdin closed.
	ExitedOnEOF
	// ExitedOnSIGTERM: it exited after SIGTERM to its process group.
	ExitedOnSIGTERM
	// ExitedOnSIGKILL: it was killed by SIGKILL to its process group.
	ExitedOnSIGKILL
)

func (h ExitHow) String() string {
	switch h {
	case ExitedBefore:
		return "had already exited"
	case ExitedOnEOF:
		return "exited after stdin closed"
	case ExitedOnSIGTERM:
		return "exited after SIGTERM"
	case ExitedOnSIGKILL:
		return "killed by SIGKILL"
	}
	return "unknown"
}

// Exit is the evidence Shutdown returns: how and with what status the
// server ended. It is only returned when the end was observed (the
// process was reaped, or the in-memory peer ended).
type Exit struct {
	How ExitHow
	// Status is the wait status in words ("exit status 0", "signal:
	// killed") for a process; the peer's reason for an in-memory server.
	Status string
	// Code is the exit code, or -1 when a signal ended the process.
	Code int
	// Took is how long Shutdown's sequence ran.
	Took time.Duration
}

// Memory is the server side of an in-memory transport, for tests that
// script a server by hand. Stdin reads what the client wrote; Stdout
// writes what the client reads; Stderr feeds the stderr tail.
type Memory struct {
	Stdin  net.Conn
	Stdout net.Conn
	Stderr io.Writer
	conn   *memConn
}

// End declares the in-memory server ended with the given reason (nil
// means a clean exit): its stdout closes and Done fires. Idempotent.
func (m *Memory) End(reason string) { m.conn.end(reason) }

// NewMemory returns a connected in-memory transport: the client side
// and the scripted server side. Pipes are synchronous (net.Pipe), so a
// server that stops reading really blocks the client's writes, and
// write deadlines behave as on a real pipe. grace bounds how long
// Shutdown waits for the peer to End after closing its stdin before
// cutting the pipes (the in-memory SIGKILL).
func NewMemory(grace time.Duration, tailBytes int) (Conn, *Memory) {
	cin, sin := net.Pipe()   // client writes cin, server reads sin
	sout, cout := net.Pipe() // server writes sout, client reads cout
	c := &memConn{
		in: cin, out: cout, srvIn: sin, srvOut: sout,
		grace: grace, tail: newRing(tailBytes), done: make(chan struct{}),
	}
	return c, &Memory{Stdin: sin, Stdout: sout, Stderr: c.tail, conn: c}
}

type memConn struct {
	in, out, srvIn, srvOut net.Conn
	grace                  time.Duration
	tail                   *ring

	mu     sync.Mutex
	ended  bool
	reason string
	done   chan struct{}

	shutOnce sync.Once
	exit     Exit
	exitErr  error
}

func (c *memConn) Read(p []byte) (int, error) {
	n, err := c.out.Read(p)
	if errors.Is(err, io.ErrClosedPipe) { // closed by Shutdown
		err = io.EOF
	}
	return n, err
}

func (c *memConn) Write(p []byte) (int, error)        { return c.in.Write(p) }
func (c *memConn) SetWriteDeadline(t time.Time) error { return c.in.SetWriteDeadline(t) }
func (c *memConn) Done() <-chan struct{}              { return c.done }
func (c *memConn) StderrTail() []byte                 { return c.tail.snapshot() }

func (c *memConn) EndReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		return nil
	}
	return errors.Join(ErrExited, errors.New("mcpwire: in-memory server ended: "+c.reason))
}

func (c *memConn) end(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	if reason == "" {
		reason = "clean exit"
	}
	c.ended, c.reason = true, reason
	c.srvOut.Close()
	c.srvIn.Close()
	close(c.done)
}

func (c *memConn) Shutdown() (Exit, error) {
	c.shutOnce.Do(func() {
		start := time.Now()
		how := ExitHow(0)
		select {
		case <-c.done:
			how = ExitedBefore
		default:
			c.in.Close() // the in-memory stdin EOF
			t := time.NewTimer(c.grace)
			select {
			case <-c.done:
				how = ExitedOnEOF
			case <-t.C:
				c.end("cut by shutdown")
				how = ExitedOnSIGKILL
			}
			t.Stop()
		}
		c.in.Close()
		c.out.Close()
		c.mu.Lock()
		c.exit = Exit{How: how, Status: c.reason, Code: -1, Took: time.Since(start)}
		c.mu.Unlock()
	})
	return c.exit, c.exitErr
}

// ring is a bounded byte ring keeping the last n bytes written. It is
// safe for concurrent use (the drainer writes, callers snapshot).
type ring struct {
	mu   sync.Mutex
	buf  []byte
	next int
	full bool
}

func newRing(n int) *ring {
	if n <= 0 {
		n = DefaultStderrTailBytes
	}
	return &ring{buf: make([]byte, n)}
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.next, r.full = 0, true
		return n, nil
	}
	k := copy(r.buf[r.next:], p)
	if k < len(p) {
		copy(r.buf, p[k:])
		r.full = true
	}
	r.next = (r.next + len(p)) % len(r.buf)
	if r.next == 0 && len(p) > 0 {
		r.full = true
	}
	return n, nil
}

// snapshot returns the retained bytes, oldest first.
func (r *ring) snapshot() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.next]...)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
