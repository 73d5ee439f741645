package mcpwire

import (
	"errors"
	"sync"
	"time"
)

// Conn is the transport seam the client is written against: one open
// byte channel to one MCP server plus that server's custody. The
// production implementation is a child process (Start); the package's
// tests use an in-memory one. An embedder may implement Conn to run the
// client over another transport (Connect).
//
// Concurrency contract: Read is never called concurrently with itself
// (the client passes its reading side between goroutines); Write and
// SetWriteDeadline likewise (the client serializes them); Done,
// EndReason, StderrTail and Shutdown may be called by anyone at any
// time. Shutdown unblocks Read and Write.
//
// A Conn may also have SetReadDeadline(time.Time) error, which must make
// a blocked or later Read return an error matching os.ErrDeadlineExceeded
// once the time has passed, without losing or consuming any byte, and
// may be called while a Read is blocked. The client then lets a waiting
// caller read its own reply (no goroutine hand-over per call); without
// it, one goroutine reads for the client's whole life. The child-process
// Conn has it.
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

// ErrExited is matched by every EndReason, and so by the reason of a
// DeadError after the server ended on its own; a Conn an embedder
// implements must make its EndReason match it too.
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
	// ExitDisconnected: a remote server, which has no process of ours;
	// the connection (and any session) was ended. Exit.Status says how.
	ExitDisconnected
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
	case ExitDisconnected:
		return "disconnected"
	}
	return "unknown"
}

// Exit is the evidence Shutdown (and so Client.Close) returns: how and
// with what status the server ended; the bridge logs it. It is only
// returned when the end was observed (the process was reaped, or a test
// transport's peer ended).
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
		n = defaultStderrTailBytes
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
