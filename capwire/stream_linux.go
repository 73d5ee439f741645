package capwire

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// fdStream is a connected Unix socket that the Client reads and writes
// with its callers' own system calls, outside the runtime's network
// poller.
//
// Why: the poller watches every socket for readability and writability
// at once, edge-triggered, and the kernel reports a Unix socket writable
// each time its peer consumes data. So every request capbridge read woke
// a thread of the calling program just to find nothing to do, and with
// one call in flight that is one wake-up per call on top of the reply's.
// A leader blocked in ppoll(2) asking for readability alone is woken by
// its reply, a kick, or Close, and by nothing else. Reads and writes on
// the non-blocking descriptor cannot block, so they skip the runtime's
// syscall entry as framewrite's raw path does; only ppoll, which does
// block, goes through it.
//
// Concurrency: one Read and one Write at a time (the Client's reading
// side and writer token see to that); SetReadDeadline, SetWriteDeadline
// and Close from any goroutine. A deadline set earlier than the one in
// force, or Close, wakes a blocked Read through an eventfd; Close wakes a
// blocked Write too. The descriptors are closed when Close has been
// called and the last Read or Write in progress has returned, so a
// descriptor number is never reused under a blocked call.
type fdStream struct {
	fd   int // the socket, non-blocking, not in the poller
	kick int // eventfd: the read deadline moved earlier; drained by Read
	stop int // eventfd: written once by Close, never drained

	mu       sync.Mutex
	rdl, wdl time.Time
	users    int // Reads and Writes in progress
	closed   bool
}

// newStream returns conn's socket as an fdStream, closing conn, when conn
// is a Unix socket and the descriptors it needs can be had; otherwise it
// returns conn itself, which works the same, at the poller's cost.
func newStream(conn net.Conn) stream {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return conn
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return conn
	}
	// A duplicate shares the open file description, O_NONBLOCK included;
	// closing conn then takes the original out of the poller.
	fd := -1
	cerr := rc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e == 0 {
			fd = int(r)
		}
	})
	if cerr != nil || fd < 0 {
		return conn
	}
	kick, err1 := eventfd()
	stop, err2 := eventfd()
	if err1 != nil || err2 != nil {
		for _, d := range []int{fd, kick, stop} {
			if d >= 0 {
				syscall.Close(d)
			}
		}
		return conn
	}
	conn.Close()
	return &fdStream{fd: fd, kick: kick, stop: stop}
}

func eventfd() (int, error) {
	const efdCloexec, efdNonblock = syscall.O_CLOEXEC, syscall.O_NONBLOCK
	r, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, efdCloexec|efdNonblock, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// signal adds one to eventfd d, waking whoever polls it.
func signal(d int) {
	one := uint64(1)
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(d), uintptr(unsafe.Pointer(&one)), 8)
}

func (s *fdStream) acquire() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	s.users++
	return nil
}

func (s *fdStream) release() {
	s.mu.Lock()
	s.users--
	last := s.closed && s.users == 0
	s.mu.Unlock()
	if last {
		s.closeFDs()
	}
}

func (s *fdStream) closeFDs() {
	syscall.Close(s.fd)
	syscall.Close(s.kick)
	syscall.Close(s.stop)
}

// Read reads what the socket holds, waiting for something if it holds
// nothing. It returns io.EOF at the end of the stream,
// os.ErrDeadlineExceeded once the read deadline has passed and
// net.ErrClosed after Close.
func (s *fdStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(s.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch {
		case e == 0 && r == 0:
			return 0, io.EOF
		case e == 0:
			return int(r), nil
		case e == syscall.EINTR:
			continue
		case e != syscall.EAGAIN:
			return 0, os.NewSyscallError("read", e)
		}
		if err := s.wait(pollIn, true); err != nil {
			return 0, err
		}
	}
}

// Write writes all of p, waiting for room as long as the write deadline
// allows.
func (s *fdStream) Write(p []byte) (int, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	n := 0
	for n < len(p) {
		// MSG_NOSIGNAL: a peer that has gone away is EPIPE, not SIGPIPE.
		r, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n), syscall.MSG_NOSIGNAL, 0, 0)
		switch {
		case e == 0:
			n += int(r)
			continue
		case e == syscall.EINTR:
			continue
		case e != syscall.EAGAIN:
			return n, os.NewSyscallError("write", e)
		}
		if err := s.wait(pollOut, false); err != nil {
			return n, err
		}
	}
	return n, nil
}

const (
	pollIn  = 0x1
	pollOut = 0x4
)

// pollFd is struct pollfd.
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// wait blocks until the socket may be read (pollIn) or written (pollOut),
// or the stream's state says to stop: Close (net.ErrClosed) or the
// deadline for that direction (os.ErrDeadlineExceeded). The state is
// read before each poll and again after any wake-up that was not the
// socket's own, so a change made while the poll was being set up is not
// missed: its eventfd is already readable.
func (s *fdStream) wait(events int16, read bool) error {
	for {
		s.mu.Lock()
		closed, dl := s.closed, s.wdl
		if read {
			dl = s.rdl
		}
		s.mu.Unlock()
		if closed {
			return net.ErrClosed
		}
		var ts *syscall.Timespec
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t := syscall.NsecToTimespec(d.Nanoseconds())
			ts = &t
		}
		fds := [3]pollFd{{fd: int32(s.fd), events: events}, {fd: int32(s.stop), events: pollIn}, {fd: int32(s.kick), events: pollIn}}
		n := 2
		if read {
			n = 3
		}
		_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(n), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		if e != 0 && e != syscall.EINTR {
			return os.NewSyscallError("ppoll", e)
		}
		if read && fds[2].revents != 0 {
			var b [8]byte
			syscall.RawSyscall(syscall.SYS_READ, uintptr(s.kick), uintptr(unsafe.Pointer(&b[0])), 8)
		}
		if fds[0].revents != 0 {
			// Ready, hung up or in error: the read or write says which.
			return nil
		}
	}
}

// SetReadDeadline sets the deadline for Reads; a deadline earlier than
// the one in force (or the first) wakes a Read blocked now, which then
// waits by the new one or returns os.ErrDeadlineExceeded.
func (s *fdStream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	earlier := !t.IsZero() && (s.rdl.IsZero() || t.Before(s.rdl))
	s.rdl = t
	if earlier {
		signal(s.kick)
	}
	return nil
}

// SetWriteDeadline sets the deadline for Writes, which read it each time
// they wait for room.
func (s *fdStream) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	s.wdl = t
	return nil
}

// Close ends the stream: Reads and Writes in progress return
// net.ErrClosed, and the descriptors are closed once the last has.
func (s *fdStream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	// Shut the socket down now, whoever is still blocked on it: capbridge
	// sees the end at once, whatever the descriptors' fate.
	syscall.Shutdown(s.fd, syscall.SHUT_RDWR)
	signal(s.stop)
	last := s.users == 0
	s.mu.Unlock()
	if last {
		s.closeFDs()
	}
	return nil
}
