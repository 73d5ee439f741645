package control

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/truncate"
)

// Handler carries out the control plane's requests; the bridge implements
// it. Its methods are called from one goroutine per connection, so
// concurrently across connections. An error return is answered as an
// "error" reply: an *Error chooses its code, any other error is answered
// internal. Call's refusals are capwire's instead: it returns either a
// result or a *capwire.Denied.
type Handler interface {
	Grant(ctx context.Context, r *GrantRequest) (*Granted, error)
	Revoke(ctx context.Context, r *RevokeRequest) (*Revoked, error)
	Status(ctx context.Context) (*Status, error)
	Facade(ctx context.Context, r *FacadeRequest) (*Facade, error)
	Describe(ctx context.Context, r *DescribeRequest) (*Described, error)
	Search(ctx context.Context, r *SearchRequest) (*Found, error)
	Listing(ctx context.Context, r *ListingRequest) (*Listed, error)
	Resources(ctx context.Context, r *ResourcesRequest) (*ResourceList, error)
	// Call runs a tool call with operator authority. ctx ends when the
	// client hangs up while the call runs.
	Call(ctx context.Context, r *CallRequest) (*capwire.Result, error)
	Metrics(ctx context.Context, r *MetricsRequest) (*Metrics, error)
	Surface(ctx context.Context, r *SurfaceRequest) (*Surface, error)
	// Reload reads the configuration again and applies it; a
	// configuration that does not validate is refused whole (an *Error
	// coded bad_config) and the running one stays.
	Reload(ctx context.Context, r *ReloadRequest) (*Reloaded, error)
}

// errHangup is the cause a call's context ends with when the control
// client hangs up (closes both directions) while the call runs.
var errHangup = errors.New("control: the client hung up")

// idleTimeout ends a control connection that sends nothing this long
// (docs/control.md, "Transport and authority").
const idleTimeout = 5 * time.Minute

// maxRetained is the largest frame buffer a connection keeps between
// requests; a rare larger frame's buffer is left to the collector rather
// than pinned for the connection's life.
const maxRetained = 1 << 20

// Server answers control requests for a Handler. Its fields must not
// change once ServeConn is first called; ServeConn may run concurrently
// for any number of connections. Who may connect (the socket's mode and
// the peer check) and how many connections are open are the caller's
// concern.
type Server struct {
	Handler Handler
	// WriteTimeout bounds writing one reply: a client that stops reading
	// loses its connection. 0 means no bound.
	WriteTimeout time.Duration
}

// ServeConn answers requests on conn, in order and one at a time, until
// the client hangs up or breaks the framing, sends nothing for five
// minutes, does not take a reply within WriteTimeout, or ctx ends. It
// closes conn before it returns. When conn is a syscall.Conn (a Unix
// socket), a call's context ends as soon as the client hangs up.
func (s *Server) ServeConn(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	fr := capwire.NewFrameReader(conn, MaxFrame)
	var in, out []byte
	for {
		_ = conn.SetReadDeadline(time.Now().Add(idleTimeout))
		frame, err := fr.ReadFrame(in[:0])
		var we *capwire.WireError
		if errors.As(err, &we) {
			// A framing fault ends the connection (the stream cannot be
			// resynchronised), but the client is told why first.
			s.write(conn, appendError(out[:0], 0, errorf(CodeBadRequest, "malformed control frame: %s", we.Msg)))
			return
		}
		if err != nil {
			return
		}
		out = s.answer(ctx, conn, frame, out[:0])
		if !s.write(conn, out) {
			return
		}
		in, out = retain(frame), retain(out)
	}
}

func retain(b []byte) []byte {
	if cap(b) > maxRetained {
		return nil
	}
	return b
}

// Refuse answers a connection that will not be served with e, as the
// reply to whatever it asks (id 0), within wait, and closes it: its
// client learns why rather than finding the connection reset.
func Refuse(conn net.Conn, e *Error, wait time.Duration) {
	_ = conn.SetWriteDeadline(time.Now().Add(wait))
	_, _ = conn.Write(appendError(nil, 0, e))
	_ = conn.Close()
}

func (s *Server) write(conn net.Conn, frame []byte) bool {
	if s.WriteTimeout > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(s.WriteTimeout))
	}
	_, err := conn.Write(frame)
	return err == nil
}

// answer handles one request frame and appends its reply frame to dst.
func (s *Server) answer(ctx context.Context, conn net.Conn, frame, dst []byte) []byte {
	var h head
	if err := decode(frame, &h); err != nil {
		// The request could not be read far enough to name it: id 0.
		return appendError(dst, 0, errorf(CodeBadRequest, "malformed control request: %v", err))
	}
	switch h.T {
	case opGrant:
		return handle(dst, h, replyGranted, frame, func(r *GrantRequest) (*Granted, error) { return s.Handler.Grant(ctx, r) })
	case opRevoke:
		return handle(dst, h, replyRevoked, frame, func(r *RevokeRequest) (*Revoked, error) { return s.Handler.Revoke(ctx, r) })
	case opStatus:
		return handle(dst, h, replyStatus, frame, func(*struct{}) (*Status, error) { return s.Handler.Status(ctx) })
	case opFacade:
		return handle(dst, h, replyFacade, frame, func(r *FacadeRequest) (*Facade, error) { return s.Handler.Facade(ctx, r) })
	case opDescribe:
		return handle(dst, h, replyDescribed, frame, func(r *DescribeRequest) (*Described, error) { return s.Handler.Describe(ctx, r) })
	case opSearch:
		return handle(dst, h, replyFound, frame, func(r *SearchRequest) (*Found, error) { return s.Handler.Search(ctx, r) })
	case opListing:
		return handle(dst, h, replyListed, frame, func(r *ListingRequest) (*Listed, error) { return s.Handler.Listing(ctx, r) })
	case opResources:
		return handle(dst, h, replyResourced, frame, func(r *ResourcesRequest) (*ResourceList, error) { return s.Handler.Resources(ctx, r) })
	case opCall:
		return s.call(ctx, conn, h.ID, frame, dst)
	case opMetrics:
		return handle(dst, h, replyMetrics, frame, func(r *MetricsRequest) (*Metrics, error) { return s.Handler.Metrics(ctx, r) })
	case opSurface:
		return handle(dst, h, replySurface, frame, func(r *SurfaceRequest) (*Surface, error) { return s.Handler.Surface(ctx, r) })
	case opReload:
		return handle(dst, h, replyReloaded, frame, func(r *ReloadRequest) (*Reloaded, error) { return s.Handler.Reload(ctx, r) })
	}
	return appendError(dst, h.ID, errorf(CodeUnknownRequest, "unknown control request %q (known: grant, revoke, status, facade, describe, search, listing, resources, call, metrics, surface, reload)", truncate.Ellipsis(h.T, 64)))
}

// handle decodes a request of type Req from frame, runs it and appends
// the reply of kind t, or an error reply. frame has passed decode's
// pre-check, so the reflective decoder may read it.
func handle[Req, Rep any](dst []byte, h head, t string, frame []byte, run func(*Req) (*Rep, error)) []byte {
	var req Req
	if err := msgpack.Unmarshal(frame, &req); err != nil {
		return appendError(dst, h.ID, errorf(CodeBadRequest, "malformed %s request: %v", h.T, err))
	}
	rep, err := run(&req)
	if err != nil {
		return appendError(dst, h.ID, asError(err))
	}
	out, err := appendFrame(dst, t, h.ID, rep)
	switch {
	case errors.Is(err, capwire.ErrFrameTooLarge):
		return appendError(dst, h.ID, errorf(CodeTooLarge, "the %s reply does not fit in a control frame (%d bytes)", t, MaxFrame))
	case err != nil:
		return appendError(dst, h.ID, errorf(CodeInternal, "%v", err))
	}
	return out
}

// asError gives err its control code: its own when it is an *Error,
// internal otherwise.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// call runs a call request and appends capwire's result or denied frame.
// While the call runs nothing reads the connection (requests are answered
// one at a time), so a watcher stands in: a client that gives up on a call
// (capbridge call interrupted) cancels it, as a program's hang-up cancels
// its calls, instead of leaving it running until its timeout.
func (s *Server) call(ctx context.Context, conn net.Conn, id uint64, frame, dst []byte) []byte {
	var req CallRequest
	if err := msgpack.Unmarshal(frame, &req); err != nil {
		return appendError(dst, id, errorf(CodeBadRequest, "malformed call request: %v", err))
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	stopWatch := watchHangup(conn, func() { cancel(errHangup) })
	res, err := s.Handler.Call(callCtx, &req)
	stopWatch()
	cancel(nil)

	var d *capwire.Denied
	switch {
	case err == nil:
		out, err := capwire.AppendFrame(dst, &capwire.ResultMsg{ID: id, Result: *res}, MaxFrame)
		if err == nil {
			return out
		}
		d = &capwire.Denied{Code: capwire.CodeResultMalformed, Message: "the result cannot be sent: " + err.Error()}
		if errors.Is(err, capwire.ErrFrameTooLarge) {
			d.Code = capwire.CodeResultTooLarge
		}
	case !errors.As(err, &d):
		return appendError(dst, id, asError(err))
	}
	out, err := capwire.AppendFrame(dst, &capwire.DeniedMsg{ID: id, Denial: *d}, MaxFrame)
	if err != nil {
		return appendError(dst, id, errorf(CodeInternal, "the denial cannot be encoded: %v", err))
	}
	return out
}

// watchHangup calls onHangup if the client hangs up before the returned
// stop is called, and does nothing for a conn that is not a syscall.Conn.
// Stop returns once the watcher has ended, and leaves conn's read
// deadline in the past: the caller sets its own before reading again.
//
// The watcher waits in the netpoller, not in a loop: RawConn.Read calls
// its function, and while that returns false, parks until the socket
// signals again (new input, a half-close, a hang-up) or the read deadline
// passes, which is how stop wakes it. The function reads nothing, so a
// request the client sent ahead stays for the next ReadFrame.
func watchHangup(conn net.Conn, onHangup func()) (stop func()) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	// The idle deadline set before the request was read must not end
	// the watch: a call may run longer than that.
	_ = conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hup := false
		// An error (the deadline stop sets, the connection closed when
		// the bridge stops) just ends the watch.
		_ = raw.Read(func(fd uintptr) bool {
			hup = hungUp(fd)
			return hup
		})
		if hup {
			onHangup()
		}
	}()
	return func() {
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-done
	}
}

// hungUp reports whether the socket fd has hung up, without waiting. No
// event is asked for: POLLHUP and POLLERR are reported anyway, and pending
// input is not a hang-up. Nor is POLLRDHUP: a client that half-closes
// after sending its request (shutdown(SHUT_WR), nc -N) still reads the
// reply. On a Unix stream socket POLLHUP means both directions are shut,
// which a closed or dead client causes.
func hungUp(fd uintptr) bool {
	p := []unix.PollFd{{Fd: int32(fd)}}
	for {
		n, err := unix.Poll(p, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && p[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
	}
}
