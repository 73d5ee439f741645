// Package capserver is capbridge's side of a capwire connection (wire v1,
// docs/capwire.md): the handshake, a read loop and a serialized, bounded
// writer. Only the bridge imports it, so the server side is not part of
// what every compiled façade links through capwire.
package capserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/framewrite"
	"github.com/capbridge/capbridge/internal/truncate"
)

// Config bounds one server-side connection. Zero fields take the defaults
// shown.
type Config struct {
	MaxFrame         int           // largest payload read or written; bound.MaxMessage
	WriteQueue       int           // frames waiting to be written before Send waits; 256
	WriteTimeout     time.Duration // a write (a batch of frames) must finish within it; 10 s
	HandshakeTimeout time.Duration // the hello must arrive within it; 10 s
	FrameTimeout     time.Duration // a frame whose first byte arrived must end within it; 10 s
	// Budget bounds the bytes held for partial frames across the
	// connections sharing it; nil: each frame is bounded only by MaxFrame.
	Budget *Budget
	// Traffic, when set, is told the size of every whole frame read
	// (length prefix included) and of every frame queued for writing, from
	// the goroutine that read or queued it; it must not block.
	Traffic func(read, written int)
}

func (c Config) withDefaults() Config {
	if c.MaxFrame <= 0 {
		c.MaxFrame = bound.MaxMessage
	}
	if c.WriteQueue <= 0 {
		c.WriteQueue = 256
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = 10 * time.Second
	}
	return c
}

// Conn is capbridge's side of one client connection: a frame reader and a
// serialized, bounded writer. The bridge calls Handshake once and then Read
// in a loop, and answers calls from any goroutines with Send.
//
// Send writes in the sending goroutine (framewrite.Inline): a reply sent
// while the connection is idle is written at once, with no hand-over to a
// writer goroutine; replies sent during a write are queued and written,
// together, by the goroutine already writing.
//
// Concurrency: Handshake and Read are called by one goroutine at a time
// (the role may pass between goroutines, with a happens-before edge such
// as a channel operation); Send, Fatal, Close, Done and Err may be called
// by any goroutine at any time. Close unblocks a Read in progress.
//
// Bounds: the hello is at most MaxHello bytes, every later frame at most
// MaxFrame bytes each way; a frame whose first byte has arrived must be
// complete within FrameTimeout; a frame that does not arrive in one read
// is charged to Budget as its bytes arrive; at most WriteQueue
// frames wait to be written; a write that does not finish within
// WriteTimeout ends the connection, so a client that stops reading cannot
// stall the goroutines answering it: their Send returns capwire.ErrClosed
// within about one WriteTimeout per batch ahead of it.
type Conn struct {
	conn net.Conn
	cfg  Config
	fr   *frameReader // owned by the reading goroutine
	w    *framewrite.Inline

	closeOnce sync.Once
	closeErr  error
}

// New takes ownership of conn (Close closes it). It starts no goroutine.
func New(conn net.Conn, cfg Config) *Conn {
	cfg = cfg.withDefaults()
	return &Conn{
		conn: conn,
		cfg:  cfg,
		fr:   newFrameReader(conn, cfg.Budget, cfg.FrameTimeout),
		w:    framewrite.NewInline(conn, cfg.WriteQueue, cfg.WriteTimeout),
	}
}

// Call is a call read by Read. Its Args alias a pooled frame buffer that
// Release returns.
type Call struct {
	capwire.CallMsg
	buf *[]byte
}

// Release returns the frame buffer that Args aliases to the pool. It is
// optional (an unreleased buffer is garbage collected) and must be the last
// use of Args.
func (c *Call) Release() {
	if c.buf != nil {
		framewrite.PutBuf(c.buf)
		c.buf, c.Args = nil, nil
	}
}

// Handshake reads the connection's first frame, which must be a hello of
// version 1, and asks auth for the servers the token reaches. On success
// it queues the welcome and returns the hello. On failure it sends the
// fatal frame the spec prescribes (bad_frame, frame_too_large, bad_hello,
// unsupported_version, or bad_token unless auth returned a
// *capwire.FatalMsg of its own), closes the connection and returns that
// *capwire.FatalMsg as the error; an I/O failure closes the connection and
// returns the I/O error.
//
// The wait for the hello is bounded by ctx and by HandshakeTimeout.
func (s *Conn) Handshake(ctx context.Context, auth func(h *capwire.HelloMsg) (servers []string, err error)) (*capwire.HelloMsg, error) {
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.fr.setBase(deadline); err != nil {
		s.Close()
		return nil, fmt.Errorf("capserver: handshake: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { s.conn.SetReadDeadline(time.Unix(1, 0)) })
	buf := framewrite.GetBuf()
	defer framewrite.PutBuf(buf)
	frame, err := s.fr.readFrame((*buf)[:0], min(MaxHello, s.cfg.MaxFrame))
	*buf = frame
	if !stop() {
		s.Close()
		return nil, fmt.Errorf("capserver: handshake: %w", ctx.Err())
	}
	if err == nil {
		s.count(frameHeader+len(frame), 0)
		err = s.fr.setBase(time.Time{})
	}
	if err != nil {
		var we *capwire.WireError
		if errors.As(err, &we) {
			return nil, s.refuse(we.Code, we.Msg)
		}
		s.Close()
		return nil, fmt.Errorf("capserver: handshake: %w", err)
	}
	m, err := capwire.Decode(frame)
	if err != nil {
		we := err.(*capwire.WireError)
		code := we.Code
		if !we.Fatal {
			code = capwire.CodeBadHello // a map without "t", or with the wrong one
		}
		return nil, s.refuse(code, we.Error())
	}
	h, ok := m.(*capwire.HelloMsg)
	if !ok {
		return nil, s.refuse(capwire.CodeBadHello, "the first frame must be a hello, not a "+m.Type())
	}
	if h.V != capwire.Version {
		return nil, s.refuse(capwire.CodeUnsupportedVersion, "this capbridge speaks wire version "+strconv.Itoa(capwire.Version)+", not "+strconv.FormatUint(h.V, 10))
	}
	servers, err := auth(h)
	if err != nil {
		var f *capwire.FatalMsg
		if errors.As(err, &f) && capwire.IsFatalCode(f.Code) {
			return nil, s.refuse(f.Code, f.Message)
		}
		// The cause stays with the caller; the client learns only that the
		// token was not accepted.
		return nil, s.refuse(capwire.CodeBadToken, "token not accepted")
	}
	if err := s.Send(ctx, &capwire.WelcomeMsg{V: capwire.Version, Servers: servers}); err != nil {
		s.Close()
		return nil, fmt.Errorf("capserver: handshake: %w", err)
	}
	return h, nil
}

// refuse sends a fatal frame, closes, and returns the frame as the error.
func (s *Conn) refuse(code, msg string) error {
	f := &capwire.FatalMsg{Code: code, Message: msg}
	s.Fatal(code, msg)
	return f
}

// Read reads the next frame from the client. It returns a *Call or a
// *capwire.CancelMsg; io.EOF when the client closed the connection between
// frames; a *capwire.WireError for a fault (Fatal says whether to answer
// with WireError.Denial and read on, or with Fatal and stop); or another
// error when reading failed (the connection is then unusable).
func (s *Conn) Read() (capwire.Message, error) {
	buf := framewrite.GetBuf()
	frame, err := s.fr.readFrame((*buf)[:0], s.cfg.MaxFrame)
	*buf = frame
	if err != nil {
		framewrite.PutBuf(buf)
		return nil, err
	}
	s.count(frameHeader+len(frame), 0)
	// Nearly every frame is a call: decoding it into its Call makes the
	// two one allocation.
	c := &Call{buf: buf}
	m, err := capwire.DecodeInto(frame, &c.CallMsg)
	if err != nil {
		framewrite.PutBuf(buf)
		return nil, err
	}
	switch m := m.(type) {
	case *capwire.CallMsg:
		return c, nil
	case *capwire.CancelMsg:
		framewrite.PutBuf(buf)
		return m, nil
	}
	framewrite.PutBuf(buf)
	we := &capwire.WireError{Code: capwire.CodeBadRequest, Offset: -1, Path: "/t", Type: m.Type(),
		Msg: "a client may not send " + strconv.Quote(m.Type()) + " here"}
	// Name the id when the envelope has one (§7): the client's reader
	// fails only that call then, not the whole connection.
	switch m := m.(type) {
	case *capwire.ResultMsg:
		we.ID, we.HasID = m.ID, true
	case *capwire.DeniedMsg:
		we.ID, we.HasID = m.ID, !m.NoID
	}
	return nil, we
}

// Send encodes m and writes it, or queues it behind the write in
// progress, waiting while the queue is full until ctx is done or the
// connection ends. A message too large for MaxFrame is refused
// (errors.Is(err, capwire.ErrFrameTooLarge)) before anything is queued,
// so the caller can send a result_too_large denial instead. A nil return
// means written or queued: a write that fails ends the connection (Done,
// Err), and the client then sees every unanswered call fail. Once the
// connection has ended Send returns an error wrapping capwire.ErrClosed.
func (s *Conn) Send(ctx context.Context, m capwire.Message) error {
	return s.send(ctx, m, false)
}

// SendGathering is Send for a sender that knows other replies are about
// to be sent: see framewrite.Inline.SendGathering.
func (s *Conn) SendGathering(ctx context.Context, m capwire.Message) error {
	return s.send(ctx, m, true)
}

func (s *Conn) send(ctx context.Context, m capwire.Message, gather bool) error {
	buf := framewrite.GetBuf()
	out, err := capwire.AppendFrame((*buf)[:0], m, s.cfg.MaxFrame)
	*buf = out
	if err != nil {
		framewrite.PutBuf(buf)
		return err
	}
	n := len(out)
	send := s.w.Send
	if gather {
		send = s.w.SendGathering
	}
	if err := send(ctx, buf); err != nil {
		return s.closedErr(err)
	}
	s.count(0, n)
	return nil
}

// frameHeader is the length prefix of a capwire frame.
const frameHeader = 4

// maxFatalMessage caps a fatal frame's message.
const maxFatalMessage = 1 << 10

// count tells cfg.Traffic the size of a whole frame read or written.
func (s *Conn) count(read, written int) {
	if s.cfg.Traffic != nil {
		s.cfg.Traffic(read, written)
	}
}

// closedErr translates the writer's ErrStopped into capwire.ErrClosed,
// with the write failure that stopped it when there was one.
func (s *Conn) closedErr(err error) error {
	if err != framewrite.ErrStopped {
		return err
	}
	if werr := s.w.Err(); werr != nil {
		return fmt.Errorf("%w: writing: %v", capwire.ErrClosed, werr)
	}
	return capwire.ErrClosed
}

// Fatal sends a fatal frame with code (one of the fatal codes) and closes
// the connection once queued frames are written (within WriteTimeout).
// The message, which may quote what the client sent, is made valid UTF-8
// and cut to maxFatalMessage bytes, so that it always encodes.
func (s *Conn) Fatal(code, message string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
	defer cancel()
	err := s.Send(ctx, &capwire.FatalMsg{Code: code, Message: truncate.Ellipsis(message, maxFatalMessage)})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close writes what is queued (within WriteTimeout), then closes the
// connection. It is idempotent; later Sends return capwire.ErrClosed.
func (s *Conn) Close() error {
	s.closeOnce.Do(func() {
		s.w.Close()
		s.closeErr = s.conn.Close()
		if errors.Is(s.closeErr, net.ErrClosed) {
			s.closeErr = nil // the writer closed it after a failed write
		}
	})
	return s.closeErr
}

// Done is closed when the connection can no longer be written: after Close,
// or after a write failed or timed out.
func (s *Conn) Done() <-chan struct{} { return s.w.Done() }

// Err is why writing stopped early (a timeout for a client that stopped
// reading), or nil. Meaningful once Done is closed.
func (s *Conn) Err() error { return s.w.Err() }
