package capwire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/framewrite"
	"github.com/capbridge/capbridge/internal/readside"
	"github.com/capbridge/capbridge/internal/unixconn"
)

// Environment variables a jailed program finds capbridge by. FromEnv reads
// them; whoever launches the program (a sandbox embedding capbridge) sets
// them.
const (
	EnvSocket = "CAPBRIDGE_SOCKET"
	EnvToken  = "CAPBRIDGE_TOKEN"
)

// defaultMaxInFlight is a Client's default bound on calls in flight.
const defaultMaxInFlight = 1024

// ErrNoEnv is returned by FromEnv and Shared when CAPBRIDGE_SOCKET or
// CAPBRIDGE_TOKEN is not set: the program is not running under capbridge.
var ErrNoEnv = errors.New("capwire: " + EnvSocket + " and " + EnvToken + " must both be set")

// Dialer holds the bounds of the Clients it dials. The zero value is
// ready to use and gives the defaults shown.
type Dialer struct {
	// MaxInFlight bounds this client's calls in flight at once; 1024. A
	// Call beyond it waits for a slot (bounded by its ctx) rather than
	// failing, so a program fanning out wide is throttled, not refused.
	MaxInFlight int
	// MaxFrame is the largest frame payload read or written;
	// 16 MiB. A result larger than this ends the connection.
	MaxFrame int
	// WriteTimeout bounds each write to capbridge; 30 s. A capbridge that
	// does not read for that long (up to half as long again: the deadline
	// is moved lazily) is taken for dead and the connection ends.
	WriteTimeout time.Duration
	// HandshakeTimeout bounds Dial's hello/welcome exchange; 10 s (the
	// ctx may shorten it).
	HandshakeTimeout time.Duration
}

// Client is a connection to capbridge's call socket over which any number
// of goroutines make calls; replies are matched to calls by id and may come
// in any order.
//
// Concurrency: all methods are safe for concurrent use. The client has no
// goroutine of its own while calls are in flight: callers write their own
// frames and a waiting caller reads the socket for everyone (see wire.go);
// with no call in flight for a moment, one goroutine reads so that a
// broken connection is still noticed at once. A broken connection
// (capbridge hung up, sent a fatal frame, or a write failed) fails every
// waiting call at once with an error wrapping ErrClosed, and every later
// Call too; Close releases the socket and waits until nothing reads it.
type Client struct {
	conn    unixconn.Stream // on Linux, outside the poller: room to write wakes nothing
	servers []string
	max     int           // frame limit
	slots   chan struct{} // one token per call in flight

	w *framewrite.Group // the writer (wire.go)

	mu     sync.Mutex
	calls  map[uint64]*waiter // guarded by mu; nil once broken
	nextID uint64             // guarded by mu
	err    error              // guarded by mu; why the client stopped, once it has
	done   chan struct{}      // closed (under mu) when err is set

	side readside.Side // the reading side (wire.go), guarded by mu
	in   *frameIn      // belongs to the holder of the reading side

	closeOnce sync.Once
}

// waiter is one call in flight. Exactly one outcome is delivered per call:
// by whoever holds the reading side, by the call itself (cancellation) or
// by fail, whichever removes the call from calls first. Pooled: reused
// only after its waiter has consumed the outcome.
type waiter struct {
	readside.Waiter
	res *Result
	err error
}

var waiterPool = sync.Pool{New: func() any { return new(waiter) }}

// Dial connects to capbridge's call socket and performs the hello/welcome
// exchange with token, using the default bounds.
func Dial(ctx context.Context, socketPath, token string) (*Client, error) {
	var d Dialer
	return d.Dial(ctx, socketPath, token)
}

// FromEnv dials CAPBRIDGE_SOCKET with CAPBRIDGE_TOKEN.
func FromEnv(ctx context.Context) (*Client, error) {
	sock, tok := os.Getenv(EnvSocket), os.Getenv(EnvToken)
	if sock == "" || tok == "" {
		return nil, ErrNoEnv
	}
	return Dial(ctx, sock, tok)
}

var shared struct {
	mu sync.Mutex
	c  *Client // guarded by mu
}

// Shared returns the process-wide client dialed from the environment on
// first use; if that client's connection has broken, the next Shared call
// dials again. Safe for concurrent use: concurrent callers wait for one
// dial (bounded by the dialing caller's ctx and HandshakeTimeout).
// Generated façades call this; programs never need to.
func Shared(ctx context.Context) (*Client, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if c := shared.c; c != nil {
		select {
		case <-c.done:
			c.Close()
			shared.c = nil
		default:
			return c, nil
		}
	}
	c, err := FromEnv(ctx)
	if err != nil {
		return nil, err
	}
	shared.c = c
	return c, nil
}

// Dial connects to socketPath and performs the hello/welcome exchange. A
// refusal by capbridge is returned as an error wrapping the *FatalMsg
// (errors.Is(err, ErrBadToken), ...).
func (d *Dialer) Dial(ctx context.Context, socketPath, token string) (*Client, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("capwire: dial: %w", err)
	}
	c, err := d.handshake(ctx, conn, token)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("capwire: dial %s: %w", socketPath, err)
	}
	return c, nil
}

func (d *Dialer) handshake(ctx context.Context, conn net.Conn, token string) (*Client, error) {
	maxFrame := frameLimit(d.MaxFrame)
	timeout := d.HandshakeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// The conn deadline carries HandshakeTimeout only; ctx (cancel or
	// deadline) interrupts through AfterFunc, so its error is what the
	// caller sees when it is the cause.
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	fr := NewFrameReader(conn, maxFrame)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	m, err := exchangeHello(conn, fr, token, maxFrame)
	if !stop() {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	if m.V != Version {
		return nil, fmt.Errorf("capwire: capbridge answered with wire version %d, want %d", m.V, Version)
	}
	inFlight := d.MaxInFlight
	if inFlight <= 0 {
		inFlight = defaultMaxInFlight
	}
	wt := d.WriteTimeout
	if wt <= 0 {
		wt = 30 * time.Second
	}
	c := &Client{
		conn:    unixconn.Take(conn),
		servers: m.Servers,
		max:     maxFrame,
		slots:   make(chan struct{}, inFlight),
		calls:   make(map[uint64]*waiter),
		nextID:  1,
		done:    make(chan struct{}),
		in:      newFrameIn(maxFrame),
	}
	c.w = framewrite.NewGroup(c.conn, framewrite.GroupConfig{
		Timeout: wt, MaxQueued: maxQueued, Done: c.done, Stopped: c.stopped,
		Fail: func(err error) { c.fail(fmt.Errorf("%w: writing: %v", ErrClosed, err)) },
	})
	// Bytes the handshake's reader took past the welcome are the
	// stream's next bytes.
	if b, _ := fr.r.Peek(fr.r.Buffered()); len(b) > 0 {
		c.in.preload(b)
	}
	c.startReading()
	return c, nil
}

// exchangeHello writes the hello and reads the answer, under the deadline
// the caller set on conn.
func exchangeHello(conn net.Conn, fr *FrameReader, token string, maxFrame int) (*WelcomeMsg, error) {
	frame, err := AppendFrame(nil, &HelloMsg{V: Version, Token: token}, maxFrame)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	in, err := fr.ReadFrame(nil)
	if err != nil {
		return nil, err
	}
	m, err := Decode(in)
	if err != nil {
		return nil, err
	}
	switch m := m.(type) {
	case *WelcomeMsg:
		return m, nil
	case *FatalMsg:
		return nil, m
	}
	return nil, fmt.Errorf("capwire: capbridge answered hello with %q", m.Type())
}

// Servers returns the MCP servers the grant reaches, as the welcome named
// them.
func (c *Client) Servers() []string { return append([]string(nil), c.servers...) }

// Call invokes tool on MCP server (the capability "mcp."+server). args
// must encode as a MessagePack map (nil, or a nil map, means {});
// map[string]any is what generated code passes, and a msgpack.RawMessage
// holding a map is sent as is.
//
// A denial is returned as *Denied (errors.As); errors.Is(err,
// capwire.ErrTimeout) etc. work per code. A tool that ran and failed is a
// *Result with IsError, not an error. When ctx is done first, Call sends
// cancel for the call and returns an error wrapping ctx.Err(); a ctx
// deadline is also sent to capbridge as the call's timeout_ms, and a
// traceparent set with WithTraceparent as the call's traceparent. A broken
// connection gives an error wrapping ErrClosed.
func (c *Client) Call(ctx context.Context, server, tool string, args any) (*Result, error) {
	return c.call(ctx, CapPrefix+server, server, tool, args)
}

// call is Call of op on capability cap; server names it in errors.
func (c *Client) call(ctx context.Context, cap, server, tool string, args any) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, callCtxErr(server, tool, err)
	}
	// A free slot is taken without a select over ctx and the client's
	// end: register refuses a stopped client anyway.
	select {
	case c.slots <- struct{}{}:
	default:
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, callCtxErr(server, tool, ctx.Err())
		case <-c.done:
			return nil, c.stopped()
		}
	}
	defer func() { <-c.slots }()

	id, w, others, err := c.register()
	if err != nil {
		return nil, err
	}
	buf := framewrite.GetBuf()
	out, err := c.appendCall(ctx, (*buf)[:0], id, cap, tool, args)
	*buf = out
	if err == nil {
		err = c.w.Write(ctx, out, true, others)
	}
	framewrite.PutBuf(buf)
	if err != nil {
		if !c.retire(id) {
			return c.outcome(w) // settled meanwhile (the connection broke)
		}
		putWaiter(w)
		if ctx.Err() != nil {
			return nil, callCtxErr(server, tool, ctx.Err())
		}
		return nil, err
	}
	if why := c.side.Await(ctx, &w.Waiter); why != nil {
		if !c.retire(id) {
			// The reply won the race; it is the call's real outcome.
			return c.outcome(w)
		}
		putWaiter(w)
		c.sendCancel(id)
		return nil, callCtxErr(server, tool, why)
	}
	return c.outcome(w)
}

// outcome consumes a settled call's outcome and returns its waiter to the
// pool.
func (c *Client) outcome(w *waiter) (*Result, error) {
	res, err := w.res, w.err
	putWaiter(w)
	return res, err
}

// putWaiter clears w and pools it.
func putWaiter(w *waiter) {
	w.Reset()
	w.res, w.err = nil, nil
	waiterPool.Put(w)
}

func callCtxErr(server, tool string, err error) error {
	return fmt.Errorf("capwire: call %s/%s: %w", server, tool, err)
}

// appendCall encodes the call frame, with args encoded straight into the
// frame buffer.
func (c *Client) appendCall(ctx context.Context, dst []byte, id uint64, cap, tool string, args any) ([]byte, error) {
	var timeoutMS uint64
	if dl, ok := ctx.Deadline(); ok {
		timeoutMS = uint64(max(time.Until(dl).Milliseconds(), 1))
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := appendCallHead(dst, id, cap, tool, timeoutMS, traceparentOf(ctx))
	if err != nil {
		return dst[:start], err
	}
	if dst, err = appendArgs(dst, args); err != nil {
		return dst[:start], err
	}
	return finishFrame(dst, start, c.max, typeCall)
}

// appendWriter lets a msgpack.Encoder append to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *appendWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

// argsEncoder is a msgpack.Encoder bound to the appendWriter it writes
// to, pooled as a pair: an appendWriter made per call would escape to
// the heap through the Encoder, one allocation per call.
type argsEncoder struct {
	w   appendWriter
	enc *msgpack.Encoder
}

var argsEncoders = sync.Pool{New: func() any {
	e := &argsEncoder{enc: msgpack.NewEncoder(nil)}
	e.enc.Reset(&e.w)
	e.enc.UseCompactInts(true)
	return e
}}

func appendArgs(dst []byte, args any) ([]byte, error) {
	switch a := args.(type) {
	case nil:
		return append(dst, 0x80), nil
	case msgpack.RawMessage:
		if err := checkArgs(a); err != nil {
			return dst, err
		}
		return append(dst, a...), nil
	}
	start := len(dst)
	// A map[string]any of plain values, what generated code passes, is
	// written without reflection; anything else is the Encoder's.
	out, ok := dst, false
	if m, isMap := args.(map[string]any); isMap {
		out, ok = appendAny(dst, m, 0)
	}
	if !ok {
		e := argsEncoders.Get().(*argsEncoder)
		e.w.b = out
		err := e.enc.Encode(args)
		out = e.w.b
		e.w.b = nil // the frame buffer is the caller's
		argsEncoders.Put(e)
		if err != nil {
			return out[:start], fmt.Errorf("capwire: encoding args: %w", err)
		}
	}
	if len(out) == start+1 && out[start] == 0xc0 {
		out[start] = 0x80 // a nil map means {}
	}
	if err := checkArgs(out[start:]); err != nil {
		return out[:start], err
	}
	return out, nil
}

// register allocates an id and a waiter for a new call, reporting whether
// other calls are in flight (whose frames may be about to be written).
func (c *Client) register() (uint64, *waiter, bool, error) {
	w := waiterPool.Get().(*waiter)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		waiterPool.Put(w)
		return 0, nil, false, c.err
	}
	id := c.nextID
	c.nextID++
	c.calls[id] = w
	return id, w, len(c.calls) > 1, nil
}

// retire removes a call without settling it, reporting whether it was
// still waiting (false: a reply or failure has been delivered to it). The
// call may have been the one woken to read next, so the reader is
// re-elected.
func (c *Client) retire(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.calls[id]
	delete(c.calls, id)
	if ok {
		c.side.ElectLocked()
	}
	return ok
}

// deliver settles call id with its outcome and wakes its waiter, if it is
// still waiting; a reply to a call that was cancelled or never made is
// dropped.
func (c *Client) deliver(id uint64, res *Result, err error) {
	c.mu.Lock()
	if w, ok := c.calls[id]; ok {
		delete(c.calls, id)
		w.res, w.err = res, err
		w.SettleLocked()
	}
	c.mu.Unlock()
}

// sendCancel tells capbridge to abandon call id. It is best effort: if the
// write queue is full capbridge is not reading, and the call's own timeout
// or the write deadline settles things.
func (c *Client) sendCancel(id uint64) {
	buf := framewrite.GetBuf()
	out, err := AppendFrame((*buf)[:0], &CancelMsg{ID: id}, c.max)
	if err == nil { // cannot fail for a cancel
		_ = c.w.Write(context.Background(), out, false, false)
	}
	*buf = out
	framewrite.PutBuf(buf)
}

// fail stops the client with err (wrapping ErrClosed): every waiting call
// gets err at once, later calls too; the socket is closed so whoever
// reads or writes it returns. Only the first failure counts.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	for _, w := range c.calls {
		w.err = err
		w.SettleLocked()
	}
	c.calls = nil
	c.side.EndLocked()
	c.mu.Unlock()
	c.conn.Close()
}

func (c *Client) stopped() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection: calls still waiting fail with ErrClosed.
// It waits until nothing reads the socket any more and is idempotent.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.closeOnce.Do(func() { <-c.side.Done() })
	return nil
}

// handleFrame acts on one frame from capbridge, reporting false when the
// connection has failed. inPlace says frame is the read-ahead's, to be
// copied from before the next read: a result's strings are copies
// already, and the bytes it keeps are copied here.
func (c *Client) handleFrame(frame []byte, inPlace bool) bool {
	m, err := Decode(frame)
	if err != nil {
		we := err.(*WireError)
		switch {
		case !we.Fatal && we.Type != "" && !knownType(we.Type):
			return true // a type from a newer capbridge: ignored (docs/capwire.md, "Versioning")
		case !we.Fatal && we.HasID:
			c.deliver(we.ID, nil, fmt.Errorf("capwire: malformed reply: %w", we))
			return true
		}
		c.fail(fmt.Errorf("%w: %w", ErrClosed, we))
		return false
	}
	switch m := m.(type) {
	case *ResultMsg:
		if inPlace {
			m.Result.ownBytes()
		}
		c.deliver(m.ID, &m.Result, nil)
	case *DeniedMsg:
		if m.NoID {
			// capbridge could not tell which call it refused, so one of
			// ours will never be answered; only ending the connection
			// settles it.
			c.fail(fmt.Errorf("%w: capbridge refused a frame: %w", ErrClosed, &m.Denial))
			return false
		}
		c.deliver(m.ID, nil, &m.Denial)
	case *FatalMsg:
		c.fail(fmt.Errorf("%w: %w", ErrClosed, m))
		return false
	default:
		c.fail(fmt.Errorf("%w: capbridge sent a %q frame", ErrClosed, m.Type()))
		return false
	}
	return true
}
