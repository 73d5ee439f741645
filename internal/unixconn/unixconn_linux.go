package unixconn

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// conn is a connected Unix socket read and written outside the runtime's
// network poller, waiting instead on an epoll instance of its own that
// the poller watches.
//
// Why: the poller watches every socket for readability and writability
// at once, edge-triggered, and the kernel reports a Unix socket writable
// each time its peer consumes data. So every message the peer read woke
// a thread of this process just to find nothing to do: with one request
// in flight, one wake-up per round trip on top of the reply's. The
// private instance watches the socket for input alone; the poller
// watches the instance, so a goroutine still parks and is woken, and
// deadlines and Close work, exactly as with any pollable file, but only
// by input. Room to write is watched the same way, by a second instance
// that holds the socket only while a Write waits for room.
//
// The socket is wrapped in an *os.File, for reference-counted access to
// its descriptor, while in blocking mode, so that the file stays out of
// the poller; it is non-blocking from then on, so no read or write can
// block, and they skip the runtime's syscall entry (RawSyscall): the
// goroutine keeps its P for the microsecond each takes. A write to a
// peer that has gone away fails with EPIPE: the runtime ignores the
// SIGPIPE of a descriptor other than stdout and stderr.
//
// Concurrency: one Read and one Write at a time; SetReadDeadline,
// SetWriteDeadline, CloseRead, CloseWrite and Close from any goroutine. Close wakes
// a Read or Write in progress, which returns net.ErrClosed; each
// descriptor is closed once nothing uses it.
type conn struct {
	sock *os.File
	sc   syscall.RawConn
	in   *os.File // epoll: sock, for input
	inc  syscall.RawConn
	r, w sockOp // owned by the Read, and the Write, in progress

	mu     sync.Mutex
	out    *os.File // epoll: sock, for room, while a Write waits; made on first need
	outc   syscall.RawConn
	wdl    time.Time
	closed bool
}

// Take returns c's socket, read and written outside the poller, and
// closes c, when c is a Unix socket and the descriptors needed can be
// had; otherwise it returns c itself, which works the same at the
// poller's cost.
func Take(c net.Conn) Stream {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return c
	}
	// A duplicate shares the open file description; closing c then
	// takes the original out of the poller.
	fd := -1
	if cerr := rc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e == 0 {
			fd = int(r)
		}
	}); cerr != nil || fd < 0 {
		return c
	}
	ep, err := watcher(fd, syscall.EPOLLIN|syscall.EPOLLRDHUP)
	if err != nil {
		syscall.Close(fd)
		return c
	}
	c.Close()
	// Non-blocking mode is a property of the description, shared with
	// the descriptor c just closed: it is off while os.NewFile looks,
	// so the file stays out of the poller, and on again for good, so that
	// no read or write can block.
	if err := syscall.SetNonblock(fd, false); err != nil {
		ep.Close()
		syscall.Close(fd)
		return c // closed: its first use fails
	}
	f := os.NewFile(uintptr(fd), "unixconn")
	if err := syscall.SetNonblock(fd, true); err != nil {
		ep.Close()
		f.Close()
		return c
	}
	s := &conn{sock: f, in: ep}
	s.sc, _ = s.sock.SyscallConn()
	s.inc, _ = s.in.SyscallConn()
	s.r.init(s, syscall.SYS_READ)
	s.w.init(s, syscall.SYS_WRITE)
	return s
}

// watcher returns a non-blocking epoll instance, as a pollable file,
// watching fd for events (level-triggered).
func watcher(fd int, events uint32) (*os.File, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	ev := syscall.EpollEvent{Events: events, Fd: int32(fd)}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(ep)
		return nil, err
	}
	if err := syscall.SetNonblock(ep, true); err != nil {
		syscall.Close(ep)
		return nil, err
	}
	return os.NewFile(uintptr(ep), "unixconn-epoll"), nil
}

// sockOp is one direction's system calls on the socket. Its arguments and
// results live here, and the functions handed to RawConn.Control and
// RawConn.Read are made once, so that no Read or Write allocates.
type sockOp struct {
	s      *conn
	nr     uintptr // SYS_READ or SYS_WRITE
	buf    []byte  // what is left to read into or write from
	n      int     // bytes moved: by the last call (reads), in all (writes)
	errno  syscall.Errno
	closed bool
	ctl    func(fd uintptr)
	more   func(uintptr) bool
}

func (o *sockOp) init(s *conn, nr uintptr) {
	o.s, o.nr = s, nr
	o.ctl, o.more = o.call, o.step
}

func (o *sockOp) start(p []byte) {
	o.buf, o.n, o.errno, o.closed = p, 0, 0, false
}

// call is one read or write on fd, which cannot block.
func (o *sockOp) call(fd uintptr) {
	r, _, e := syscall.RawSyscall(o.nr, fd, uintptr(unsafe.Pointer(unsafe.SliceData(o.buf))), uintptr(len(o.buf)))
	o.errno = e
	if e != 0 {
		return
	}
	if o.nr == syscall.SYS_READ {
		o.n = int(r)
		return
	}
	o.n += int(r)
	o.buf = o.buf[r:]
}

// step makes progress: one read, or writes until all is written. It
// reports false when the socket must be waited for (EAGAIN), and true
// when the operation is over: done, failed, or the socket closed.
func (o *sockOp) step(uintptr) bool {
	for {
		if err := o.s.sc.Control(o.ctl); err != nil {
			o.closed = true
			return true
		}
		switch o.errno {
		case 0:
			if o.nr == syscall.SYS_READ || len(o.buf) == 0 {
				return true
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			return true
		}
	}
}

// result is the operation's outcome once step reported it over.
func (o *sockOp) result(name string) (int, error) {
	n := o.n
	o.buf = nil
	switch {
	case o.closed:
		return n, net.ErrClosed
	case o.errno != 0:
		return n, os.NewSyscallError(name, o.errno)
	case n == 0 && o.nr == syscall.SYS_READ:
		return 0, io.EOF
	}
	return n, nil
}

// Read reads what the socket holds, waiting for something if it holds
// nothing. It returns io.EOF at the end of the stream,
// os.ErrDeadlineExceeded once the read deadline has passed and
// net.ErrClosed after Close.
func (s *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.r.start(p)
	if err := s.inc.Read(s.r.more); err != nil {
		s.r.buf = nil
		return 0, s.pollErr(err)
	}
	return s.r.result("read")
}

// pollErr maps a wait's error to the net.Conn sentinel the Client
// expects once the stream is closed (a closed file's own error is
// internal/poll's).
func (s *conn) pollErr(err error) error {
	if err == nil {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return net.ErrClosed
	}
	return err
}

// Write writes all of p, waiting for room as long as the write deadline
// allows.
func (s *conn) Write(p []byte) (int, error) {
	s.w.start(p)
	if !s.w.step(0) {
		if err := s.writeWaiting(); err != nil {
			n := s.w.n
			s.w.buf = nil
			return n, err
		}
	}
	return s.w.result("write")
}

// writeWaiting finishes the Write in progress with the socket in the
// room watcher's set, taken out again before it returns, so that room
// made while no Write waits wakes nothing.
func (s *conn) writeWaiting() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	if s.out == nil {
		out, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err == nil {
			if err = syscall.SetNonblock(out, true); err != nil {
				syscall.Close(out)
			}
		}
		if err != nil {
			s.mu.Unlock()
			return os.NewSyscallError("epoll", err)
		}
		s.out = os.NewFile(uintptr(out), "unixconn-epoll")
		s.outc, _ = s.out.SyscallConn()
	}
	out, outc, dl := s.out, s.outc, s.wdl
	s.mu.Unlock()
	if err := s.watchRoom(outc, syscall.EPOLL_CTL_ADD); err != nil {
		return err
	}
	defer s.watchRoom(outc, syscall.EPOLL_CTL_DEL)
	if err := out.SetReadDeadline(dl); err != nil {
		return s.pollErr(err)
	}
	return s.pollErr(outc.Read(s.w.more))
}

// watchRoom adds the socket to the room watcher's set or takes it out,
// holding both descriptors while it does.
func (s *conn) watchRoom(outc syscall.RawConn, op int) error {
	var err error
	cerr := s.sc.Control(func(fd uintptr) {
		cerr := outc.Control(func(ep uintptr) {
			ev := syscall.EpollEvent{Events: syscall.EPOLLOUT, Fd: int32(fd)}
			err = os.NewSyscallError("epoll_ctl", syscall.EpollCtl(int(ep), op, int(fd), &ev))
		})
		if cerr != nil {
			err = net.ErrClosed
		}
	})
	if cerr != nil {
		return net.ErrClosed
	}
	return err
}

// SetReadDeadline sets the deadline for Reads, waking a Read that waits
// now if it has passed.
func (s *conn) SetReadDeadline(t time.Time) error {
	return s.pollErr(s.in.SetReadDeadline(t))
}

// SetWriteDeadline sets the deadline for Writes that wait for room.
func (s *conn) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	s.wdl = t
	if s.out != nil {
		return s.out.SetReadDeadline(t)
	}
	return nil
}

// CloseRead shuts the reading side down: a Read in progress, and every
// later one, returns io.EOF; writing goes on.
func (s *conn) CloseRead() error { return s.shutdown(syscall.SHUT_RD) }

// CloseWrite shuts the writing side down: the peer reads the end of the
// stream; reading goes on.
func (s *conn) CloseWrite() error { return s.shutdown(syscall.SHUT_WR) }

func (s *conn) shutdown(how int) error {
	var err error
	if cerr := s.sc.Control(func(fd uintptr) { err = syscall.Shutdown(int(fd), how) }); cerr != nil {
		return net.ErrClosed
	}
	return os.NewSyscallError("shutdown", err)
}

// Close ends the stream: a Read or Write in progress returns
// net.ErrClosed, and the peer sees the end of the stream at once.
func (s *conn) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	out := s.out
	s.mu.Unlock()
	_ = s.sc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	s.in.Close()
	if out != nil {
		out.Close()
	}
	return s.sock.Close()
}
