package mcpwire

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// inBubble runs f in a synctest bubble: every timer the client and the
// in-memory transport create inside it runs on the bubble's fake clock,
// which advances only when every goroutine in it is blocked, so idle,
// maximum and write deadlines fire at exact instants however loaded the
// machine is.
//
// The client pools its per-call state (a channel and a timer) in a
// package-level sync.Pool. A bubbled channel or timer used outside its
// bubble is a fatal error, and an unbubbled timer used inside one runs
// on the real clock; so the pools are emptied on the way in and out. Two
// GC cycles drop every pooled item (the first moves the primary caches to
// the victim caches, the second drops those). No test in this package
// runs in parallel, so nothing refills a pool meanwhile.
func inBubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	emptyPools()
	defer emptyPools()
	synctest.Test(t, f)
}

func emptyPools() {
	runtime.GC()
	runtime.GC()
}

// memPeer is the server side of an in-memory transport, for tests that
// script a server by hand. Stdin reads what the client wrote; Stdout
// writes what the client reads; Stderr feeds the stderr tail.
type memPeer struct {
	Stdin  net.Conn
	Stdout net.Conn
	Stderr io.Writer
	conn   *memConn
}

// End declares the in-memory server ended with the given reason (nil
// means a clean exit): its stdout closes and Done fires. Idempotent.
func (m *memPeer) End(reason string) { m.conn.end(reason) }

// newMemory returns a connected in-memory transport: the client side
// and the scripted server side. Pipes are synchronous (net.Pipe), so a
// server that stops reading really blocks the client's writes, and
// write deadlines behave as on a real pipe. grace bounds how long
// Shutdown waits for the peer to End after closing its stdin before
// cutting the pipes (the in-memory SIGKILL).
func newMemory(grace time.Duration, tailBytes int) (Conn, *memPeer) {
	cin, sin := net.Pipe()   // client writes cin, server reads sin
	sout, cout := net.Pipe() // server writes sout, client reads cout
	c := &memConn{
		in: cin, out: cout, srvIn: sin, srvOut: sout,
		grace: grace, tail: newRing(tailBytes), done: make(chan struct{}),
	}
	return c, &memPeer{Stdin: sin, Stdout: sout, Stderr: c.tail, conn: c}
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
