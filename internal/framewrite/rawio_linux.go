package framewrite

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Raw I/O: reads and writes on a non-blocking descriptor issued with
// syscall.RawSyscall rather than through the runtime's syscall entry,
// with the runtime's poller still doing every wait (and so honouring
// every deadline) through syscall.RawConn.
//
// Why: a program that keeps going idle — the bridge with one call in
// flight waits on its client, then on a server, then on its client —
// lets the runtime's monitor thread fall into a deep sleep each time, and
// the next system call made through the runtime's syscall entry wakes it:
// a futex wake, then the monitor's own sleeps, which on a virtual machine
// cost context switches and tens of microseconds of CPU per idle period.
// A read or write on a descriptor in non-blocking mode never blocks,
// which is the condition RawSyscall asks for, so it may skip that entry:
// the goroutine keeps its P for the microsecond the call takes.
//
// Only descriptors the runtime's poller manages are non-blocking, so the
// raw path is taken only for a connection whose SyscallConn says so
// (every net.Conn; an *os.File pipe opened non-blocking) and the
// connection's own methods are used otherwise.

// rawConner is a connection whose descriptor can be reached.
type rawConner interface {
	SyscallConn() (syscall.RawConn, error)
}

// rawConnOf returns the RawConn of a pollable, non-blocking connection,
// or nil.
func rawConnOf(c any) syscall.RawConn {
	rcr, ok := c.(rawConner)
	if !ok {
		return nil
	}
	rc, err := rcr.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) { nonblocking = isNonblock(fd) }); err != nil || !nonblocking {
		return nil
	}
	return rc
}

// Pollable returns the RawConn of c when c is a pollable, non-blocking
// descriptor, on which a callback may read or write with RawSyscall as
// RawReader and RawWriter do; nil otherwise.
func Pollable(c any) syscall.RawConn { return rawConnOf(c) }

// RawReader returns a reader for r whose reads take the raw path when r
// is a pollable descriptor, and r itself otherwise. A read that fails
// because r was closed or its deadline passed returns errors matching the
// same sentinels as r's own Read (net.ErrClosed or os.ErrClosed,
// os.ErrDeadlineExceeded); the end of the stream is io.EOF.
//
// Concurrency: one Read at a time.
func RawReader(r io.Reader) io.Reader {
	if rc := rawConnOf(r); rc != nil {
		rr := &rawReader{rc: rc, own: r}
		rr.readFn = rr.read
		return rr
	}
	return r
}

type rawReader struct {
	rc  syscall.RawConn
	own io.Reader // for the error of a closed connection, as its callers know it
	// The callback's arguments and results: fields, not captured
	// variables, so a read allocates no closure; and the callback is
	// bound once, since a method value passed on escapes, one
	// allocation per read.
	p      []byte
	n      int
	e      syscall.Errno
	readFn func(fd uintptr) bool
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p = p
	err := r.rc.Read(r.readFn)
	r.p = nil
	switch {
	case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
		// Closed: RawConn's error for that is not the one the
		// connection's own Read returns (an *os.File's is not
		// os.ErrClosed), and that one is what callers match.
		return r.own.Read(p)
	case err != nil:
		return 0, err
	case r.e != 0:
		return 0, r.e
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// read is the RawConn callback; false means wait for readiness.
func (r *rawReader) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.n, r.e = int(n), e
		return true
	}
}

// RawWriter returns a writer for w whose writes take the raw path when
// w is a pollable descriptor, and w itself otherwise. A Write writes all
// of p or fails; errors match the same sentinels as w's own Write.
//
// Concurrency: one Write at a time.
func RawWriter(w io.Writer) io.Writer {
	if rc := rawConnOf(w); rc != nil {
		return newRawWriter(rc)
	}
	return w
}

// newVecWriter returns the raw writer for conn when it is a pollable
// descriptor, and nil otherwise.
func newVecWriter(conn net.Conn) vecWriter {
	if rc := rawConnOf(conn); rc != nil {
		return newRawWriter(rc)
	}
	return nil
}

func newRawWriter(rc syscall.RawConn) *rawWriter {
	w := &rawWriter{rc: rc}
	w.writeFn = w.writeSome
	return w
}

// rawWriter writes whole buffers through a RawConn.
type rawWriter struct {
	rc   syscall.RawConn
	bufs [][]byte // what is left to write; the callback's argument
	err  error    // the callback's result
	one  [1][]byte
	iov  [maxBatch]syscall.Iovec
	// writeFn is writeSome, bound once: a method value passed on
	// escapes, one allocation per write.
	writeFn func(fd uintptr) bool
}

func (w *rawWriter) Write(p []byte) (int, error) {
	w.one[0] = p
	err := w.writeVec(w.one[:])
	w.one[0] = nil
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeVec writes every byte of bufs, waiting for room as often as
// needed. It consumes bufs (and may reslice its elements).
func (w *rawWriter) writeVec(bufs [][]byte) error {
	w.bufs, w.err = bufs, nil
	err := w.rc.Write(w.writeFn)
	w.bufs = nil
	clear(w.iov[:])
	if err != nil {
		return err
	}
	return w.err
}

// writeSome is the RawConn callback: it writes until everything is
// written or a write fails (true), or the descriptor is full (false:
// wait for room).
func (w *rawWriter) writeSome(fd uintptr) bool {
	for {
		for len(w.bufs) > 0 && len(w.bufs[0]) == 0 {
			w.bufs = w.bufs[1:]
		}
		if len(w.bufs) == 0 {
			return true
		}
		n, e := w.writeOnce(fd)
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			w.err = e
			return true
		}
		if n == 0 {
			w.err = io.ErrShortWrite
			return true
		}
		for n > 0 {
			if n < len(w.bufs[0]) {
				w.bufs[0] = w.bufs[0][n:]
				break
			}
			n -= len(w.bufs[0])
			w.bufs = w.bufs[1:]
		}
	}
}

// writeOnce issues one write (one buffer) or writev (up to maxBatch
// non-empty buffers; w.bufs[0] is non-empty).
func (w *rawWriter) writeOnce(fd uintptr) (int, syscall.Errno) {
	if len(w.bufs) == 1 {
		p := w.bufs[0]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		return int(n), e
	}
	k := 0
	for _, b := range w.bufs {
		if k == len(w.iov) {
			break
		}
		if len(b) > 0 {
			w.iov[k].Base = &b[0]
			w.iov[k].SetLen(len(b))
			k++
		}
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(k))
	return int(n), e
}

func isNonblock(fd uintptr) bool {
	fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return e == 0 && fl&syscall.O_NONBLOCK != 0
}
