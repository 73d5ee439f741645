package capwire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// ServerConfig bounds one server-side connection. Zero fields take the
// defaults shown.
type ServerConfig struct {
	MaxFrame         int           // largest payload read or written; DefaultMaxFrame
	WriteQueue       int           // frames waiting to be written before Send waits; 256
	WriteTimeout     time.Duration // each write (a batch of frames) must finish within it; 10 s
	HandshakeTimeout time.Duration // the hello must arrive within it; 10 s
}

func (c ServerConfig) withDefaults() ServerConfig {
	c.MaxFrame = frameLimit(c.MaxFrame)
	if c.WriteQueue <= 0 {
		c.WriteQueue = 256
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	return c
}

// ServerConn is capbridge's side of one client connection: a frame reader
// and a serialized, bounded writer. The bridge runs one goroutine that
// calls Handshake once and then Read in a loop, and answers calls from any
// goroutines with Send.
//
// Concurrency: Handshake and Read are called by one goroutine only; Send,
// Fatal, Close, Done and Err may be called by any goroutine at any time.
// Close unblocks a Read in progress.
//
// Bounds: a frame is at most MaxFrame bytes each way; at most WriteQueue
// frames wait to be written; a write that does not finish within
// WriteTimeout ends the connection, so a client that stops reading cannot
// stall the goroutines answering it: their Send returns ErrClosed within
// about one WriteTimeout.
type ServerConn struct {
	conn net.Conn
	cfg  ServerConfig
	fr   *FrameReader // owned by the reading goroutine
	w    *writer

	closeOnce sync.Once
	closeErr  error
}

// NewServerConn takes ownership of conn (Close closes it) and starts its
// writer goroutine, which exits when the connection is closed or breaks.
func NewServerConn(conn net.Conn, cfg ServerConfig) *ServerConn {
	cfg = cfg.withDefaults()
	s := &ServerConn{conn: conn, cfg: cfg, fr: NewFrameReader(conn, cfg.MaxFrame)}
	s.w = newWriter(conn, cfg.WriteQueue, cfg.WriteTimeout, nil)
	return s
}

// Handshake reads the connection's first frame, which must be a hello of
// version 1, and asks auth for the servers the token reaches. On success
// it queues the welcome and returns the hello. On failure it sends the
// fatal frame the spec prescribes (bad_frame, frame_too_large, bad_hello,
// unsupported_version, or bad_token unless auth returned a *FatalMsg of
// its own), closes the connection and returns that *FatalMsg as the error;
// an I/O failure closes the connection and returns the I/O error.
//
// The wait for the hello is bounded by ctx and by HandshakeTimeout.
func (s *ServerConn) Handshake(ctx context.Context, auth func(h *HelloMsg) (servers []string, err error)) (*HelloMsg, error) {
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.conn.SetReadDeadline(deadline); err != nil {
		s.Close()
		return nil, fmt.Errorf("capwire: handshake: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { s.conn.SetReadDeadline(time.Unix(1, 0)) })
	buf := getBuf()
	defer putBuf(buf)
	frame, err := s.fr.ReadFrame((*buf)[:0])
	*buf = frame
	if !stop() {
		s.Close()
		return nil, fmt.Errorf("capwire: handshake: %w", ctx.Err())
	}
	if err == nil {
		err = s.conn.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var we *WireError
		if errors.As(err, &we) {
			return nil, s.refuse(we.Code, we.Msg)
		}
		s.Close()
		return nil, fmt.Errorf("capwire: handshake: %w", err)
	}
	m, err := Decode(frame)
	if err != nil {
		we := err.(*WireError)
		code := we.Code
		if !we.Fatal {
			code = CodeBadHello // a map without "t", or with the wrong one
		}
		return nil, s.refuse(code, we.Error())
	}
	h, ok := m.(*HelloMsg)
	if !ok {
		return nil, s.refuse(CodeBadHello, "the first frame must be a hello, not a "+m.Type())
	}
	if h.V != Version {
		return nil, s.refuse(CodeUnsupportedVersion, "this capbridge speaks wire version "+strconv.Itoa(Version)+", not "+strconv.FormatUint(h.V, 10))
	}
	servers, err := auth(h)
	if err != nil {
		var f *FatalMsg
		if errors.As(err, &f) && IsFatalCode(f.Code) {
			return nil, s.refuse(f.Code, f.Message)
		}
		// The cause stays with the caller; the client learns only that the
		// token was not accepted.
		return nil, s.refuse(CodeBadToken, "token not accepted")
	}
	if err := s.Send(ctx, &WelcomeMsg{V: Version, Servers: servers}); err != nil {
		s.Close()
		return nil, fmt.Errorf("capwire: handshake: %w", err)
	}
	return h, nil
}

// refuse sends a fatal frame, closes, and returns the frame as the error.
func (s *ServerConn) refuse(code, msg string) error {
	f := &FatalMsg{Code: code, Message: msg}
	s.Fatal(code, msg)
	return f
}

// Read reads the next frame from the client. It returns a *CallMsg or a
// *CancelMsg; io.EOF when the client closed the connection between frames;
// a *WireError for a fault (Fatal says whether to answer with
// WireError.Denial and read on, or with Fatal and stop); or another error
// when reading failed (the connection is then unusable).
//
// A returned *CallMsg's Args aliases a pooled buffer: call Release when
// done with Args (optional, see CallMsg.Release).
func (s *ServerConn) Read() (Message, error) {
	buf := getBuf()
	frame, err := s.fr.ReadFrame((*buf)[:0])
	*buf = frame
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	m, err := Decode(frame)
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	switch m := m.(type) {
	case *CallMsg:
		m.buf = buf
		return m, nil
	case *CancelMsg:
		putBuf(buf)
		return m, nil
	}
	putBuf(buf)
	we := &WireError{Code: CodeBadRequest, Offset: -1, Path: "/t", Type: m.Type(),
		Msg: "a client may not send " + strconv.Quote(m.Type()) + " here"}
	// Name the id when the envelope has one (§7): the client's reader
	// fails only that call then, not the whole connection.
	switch m := m.(type) {
	case *ResultMsg:
		we.ID, we.HasID = m.ID, true
	case *DeniedMsg:
		we.ID, we.HasID = m.ID, !m.NoID
	}
	return nil, we
}

// Send encodes m and queues it for writing, waiting while the queue is
// full until ctx is done or the connection ends. A message too large for
// MaxFrame is refused (errors.Is(err, ErrFrameTooLarge)) before anything is
// queued, so the caller can send a result_too_large denial instead. A nil
// return means queued: a write that fails later ends the connection (Done,
// Err), and the client then sees every unanswered call fail.
func (s *ServerConn) Send(ctx context.Context, m Message) error {
	buf := getBuf()
	out, err := AppendFrame((*buf)[:0], m, s.cfg.MaxFrame)
	*buf = out
	if err != nil {
		putBuf(buf)
		return err
	}
	if err := s.w.send(ctx, buf); err != nil {
		return s.closedErr(err)
	}
	return nil
}

func (s *ServerConn) closedErr(err error) error {
	if err == ErrClosed {
		select {
		case <-s.w.done:
			if s.w.err != nil {
				return fmt.Errorf("%w: writing: %v", ErrClosed, s.w.err)
			}
		default:
		}
	}
	return err
}

// Fatal sends a fatal frame with code (one of the fatal codes) and closes
// the connection once queued frames are written (within WriteTimeout).
func (s *ServerConn) Fatal(code, message string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
	defer cancel()
	err := s.Send(ctx, &FatalMsg{Code: code, Message: message})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close writes what is queued (within WriteTimeout), then closes the
// connection. It is idempotent; later Sends return ErrClosed.
func (s *ServerConn) Close() error {
	s.closeOnce.Do(func() {
		s.w.close()
		s.closeErr = s.conn.Close()
		if errors.Is(s.closeErr, net.ErrClosed) {
			s.closeErr = nil // the writer closed it after a failed write
		}
	})
	return s.closeErr
}

// Done is closed when the connection can no longer be written: after Close,
// or after a write failed or timed out.
func (s *ServerConn) Done() <-chan struct{} { return s.w.done }

// Err is why writing stopped early (a timeout for a client that stopped
// reading), or nil. Meaningful once Done is closed.
func (s *ServerConn) Err() error {
	select {
	case <-s.w.done:
		return s.w.err
	default:
		return nil
	}
}
