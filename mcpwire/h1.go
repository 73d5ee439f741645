package mcpwire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/framewrite"
)

// h1Transport is an HTTP/1.1 client transport whose caller does the
// exchange itself: RoundTrip writes the request on a pooled keep-alive
// connection and reads the response's head on the calling goroutine, and
// the caller reads the body from the connection directly. net/http's
// Transport hands each request to its connection's write loop and each
// response back from its read loop, two wake-ups of other goroutines per
// exchange that cost a call over loopback about as much as the rest of
// its path; the stdio carrier avoids the same hand-offs by having the
// caller write and read its own lines.
//
// It serves plain http:// requests that no proxy carries (fastTransport
// routes the rest, https with its HTTP/2, and proxied requests, to
// net/http). Requests and response heads of the shapes MCP's exchanges
// take are written and read by a fast path that does exactly what
// net/http's serializer and parser would (writeHead, readHead); every
// other is written by Request.Write and read by http.ReadResponse
// (chunked and close-delimited bodies, folded lines, 1xx answers, and
// the heads net/http refuses), so the behaviour is net/http's throughout
// and only the connection handling is this one's, with its Transport's
// rules: informational answers skipped, a connection reused only after a
// final answer whose body ended by its framing with neither side asking
// to close, a request with a field it refuses refused, and a request sent
// again only when no server can have acted on it.
//
// Bounds: a response head of at most maxResponseHead bytes; at most
// maxIdle idle connections, each retired after idleTimeout unused or when
// found closed by the server before reuse. The connections in use are as
// many as the callers in flight (the bridge's max_inflight and a few
// long-lived streams). A request's context ends its exchange at any time
// (the connection's deadline is moved to the past, so a read or write in
// progress returns, and the connection is not reused).
//
// Concurrency: RoundTrip and CloseIdleConnections may be called from any
// goroutine.
type h1Transport struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle int

	mu   sync.Mutex
	idle map[string][]*h1Conn // by host:port, most recently used last
}

// Bounds of the HTTP/1.1 transport.
const (
	maxResponseHead = 1 << 20
	// idleTimeout matches HTTPClient's: below the 5 s keep-alive of
	// Node's HTTP server, so a connection is retired here before the
	// server closes it under a request.
	idleTimeout = 4 * time.Second
	h1Buffer    = 32 << 10
)

// h1Conn is one connection: its reader and writer, and when it was
// last put back.
type h1Conn struct {
	net.Conn
	raw   io.Reader // the connection's reads, issued raw (framewrite.RawReader)
	key   string
	br    *bufio.Reader
	bw    *bufio.Writer
	limit int64 // bytes Read may still return; reset after the head
	since time.Time

	// The check before reuse (alive): the descriptor's RawConn (nil when
	// the connection has none), and the peek's callback and result,
	// bound once so that a check allocates nothing.
	rc     syscall.RawConn
	peekFn func(fd uintptr) bool
	live   bool
}

// Read is the connection's, bounded by limit (the response head's bound
// while it is read).
func (c *h1Conn) Read(p []byte) (int, error) {
	if c.limit <= 0 {
		return 0, errors.New("mcpwire: a response head longer than 1 MiB")
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.raw.Read(p)
	c.limit -= int64(n)
	return n, err
}

func newH1Transport(dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int) *h1Transport {
	return &h1Transport{dial: dial, maxIdle: maxIdle, idle: map[string][]*h1Conn{}}
}

// RoundTrip writes req on a connection to its host and reads the
// response's head; the body is read from the connection by the caller,
// and closing it puts the connection back when the body was read to its
// end and both sides keep the connection alive.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	key := canonicalAddr(req)
	c, reused, err := t.conn(ctx, key)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	stop := expire(ctx, c)
	resp, sent, answered, err := t.exchange(c, req)
	if err != nil && reused && !answered && !stopped(ctx) && hungUp(err) && resendable(req, sent) {
		// The server closed the idle connection as it was taken (the
		// check before reuse can race its FIN): the request goes once
		// more, on a new connection, as a copy with its body made again
		// (a RoundTripper does not modify its request).
		_ = c.Close()
		stop()
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			again := *req
			again.Body = body
			req = &again
		}
		if c, err = t.dialConn(ctx, key); err != nil {
			closeBody(req)
			return nil, err
		}
		stop = expire(ctx, c)
		resp, _, _, err = t.exchange(c, req)
	}
	if errors.Is(err, errInvalidField) {
		// Refused before a byte was written: the connection is as it was.
		if stop() {
			t.put(c)
		} else {
			_ = c.Close()
		}
		closeBody(req)
		return nil, err
	}
	if err != nil {
		stop()
		_ = c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// The connection is kept for another exchange only after a final
	// answer (a 101 hands it to another protocol) whose body ends by its
	// framing, when neither side asked to close it.
	keep := !resp.Close && !req.Close && resp.StatusCode >= 200 && (resp.ContentLength != -1 || isChunked(resp))
	resp.Body = &h1Body{t: t, c: c, body: resp.Body, stop: stop, keep: keep}
	return resp, nil
}

// expire ends c's exchange, wherever it is (head or body), when ctx
// ends: the connection's deadline moves to the past, so a read or write
// in progress returns. c is a parameter, so the callback holds the
// connection it was made for whatever its caller's variable holds next.
func expire(ctx context.Context, c *h1Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
}

// exchange writes req and reads the response head: by the fast path
// (writeHead, readHead) when the request and the head take its shapes,
// else by net/http's Request.Write and http.ReadResponse. sent reports
// whether the request was written whole (a failure after it is the
// response's), answered whether any byte of an answer arrived. A request
// with a header field net/http's Transport would refuse is refused here
// too, before anything is written.
func (t *h1Transport) exchange(c *h1Conn, req *http.Request) (resp *http.Response, sent, answered bool, err error) {
	ok, err := writeHead(c.bw, req)
	if !ok && err == nil {
		if err = validHeader(req.Header); err == nil {
			err = req.Write(c.bw)
		}
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return nil, false, false, err
	}
	// Informational answers (1xx but 101) may come before the final one
	// (103 Early Hints); they are skipped, as net/http's Transport skips
	// them, and their heads count against the final head's bound.
	c.limit = maxResponseHead
	for {
		if resp = readHead(c.br, req); resp == nil {
			resp, err = http.ReadResponse(c.br, req)
		}
		if err != nil || resp.StatusCode/100 != 1 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	// The buffer was empty when the request went (a reused connection
	// holds no stray bytes), so every byte since passed through Read.
	answered = c.limit < maxResponseHead
	c.limit = math.MaxInt64
	return resp, true, answered, err
}

// errInvalidField is a request refused before any byte of it was
// written, for a header field net/http's Transport refuses.
var errInvalidField = errors.New("mcpwire: invalid header field")

// validHeader refuses what net/http's Transport refuses before it
// writes a request: a field name that is not a token, or a value with a
// control character other than tab (Request.Write would send it with its
// line breaks turned into spaces).
func validHeader(h http.Header) error {
	for k, vv := range h {
		if !isToken(k) {
			return fmt.Errorf("%w name %q", errInvalidField, k)
		}
		for _, v := range vv {
			if !validValue(v) {
				return fmt.Errorf("%w value for %q", errInvalidField, k)
			}
		}
	}
	return nil
}

// resendable reports whether req may go once more after its exchange
// failed before any byte of an answer (sent: after it was written whole). Its body
// must be one that can be made again, and no server may have acted on
// it: its write failed, so none read it whole, or it may be sent twice
// by net/http's rule (a method without effects, or a request that says
// it is idempotent). A request that was written, a tools/call among
// them, is never sent again, since the server may have read it and then
// gone: a call runs at most once.
func resendable(req *http.Request, sent bool) bool {
	if req.Body != nil && req.GetBody == nil {
		return false
	}
	if !sent {
		return true
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// hungUp reports whether err is the connection's end or reset, as
// a server that closed it meets a request.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}

func stopped(ctx context.Context) bool { return ctx.Err() != nil }

func isChunked(resp *http.Response) bool {
	return !resp.Close && len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// canonicalAddr is req's host with its port: the URL's own host when it
// names one (as every configured url with a port does), so that a
// request builds no string.
func canonicalAddr(req *http.Request) string {
	if req.URL.Port() != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// conn takes an idle connection to key that the server has not closed,
// or dials one.
func (t *h1Transport) conn(ctx context.Context, key string) (*h1Conn, bool, error) {
	for {
		t.mu.Lock()
		list := t.idle[key]
		if len(list) == 0 {
			t.mu.Unlock()
			c, err := t.dialConn(ctx, key)
			return c, false, err
		}
		c := list[len(list)-1]
		t.idle[key] = list[:len(list)-1]
		t.mu.Unlock()
		if time.Since(c.since) < idleTimeout && c.alive() {
			return c, true, nil
		}
		_ = c.Close()
	}
}

func (t *h1Transport) dialConn(ctx context.Context, key string) (*h1Conn, error) {
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	// Reads and writes skip the runtime's syscall entry, whose wake-ups of
	// its monitor thread cost a call over loopback as much as its own
	// work (framewrite's raw I/O says why); the poller still does every
	// wait, so deadlines hold.
	c := &h1Conn{Conn: nc, raw: framewrite.RawReader(nc), key: key, limit: math.MaxInt64}
	if sc, ok := nc.(syscall.Conn); ok {
		if c.rc, err = sc.SyscallConn(); err != nil {
			_ = nc.Close()
			return nil, err
		}
		c.peekFn = c.peek
	}
	c.br = bufio.NewReaderSize(c, h1Buffer)
	c.bw = bufio.NewWriterSize(framewrite.RawWriter(nc), h1Buffer)
	return c, nil
}

// put makes c idle again, or closes it when the pool is full or closed.
func (t *h1Transport) put(c *h1Conn) {
	c.since = time.Now()
	t.mu.Lock()
	if len(t.idle[c.key]) < t.maxIdle {
		t.idle[c.key] = append(t.idle[c.key], c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	_ = c.Close()
}

// CloseIdleConnections closes every idle connection.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	all := t.idle
	t.idle = map[string][]*h1Conn{}
	t.mu.Unlock()
	for _, list := range all {
		for _, c := range list {
			_ = c.Close()
		}
	}
}

// alive reports whether an idle connection is still open and holds no
// stray bytes: a peek that does not wait (the server may have closed it,
// or sent something unasked, since it was put back).
func (c *h1Conn) alive() bool {
	if c.rc == nil {
		return true
	}
	c.live = false
	if err := c.rc.Read(c.peekFn); err != nil {
		return false
	}
	return c.live
}

// peek is alive's callback: raw, since it cannot block (MSG_DONTWAIT)
// and the runtime's syscall entry would wake its monitor thread on every
// call.
func (c *h1Conn) peek(fd uintptr) bool {
	var one [1]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&one[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	c.live = e == syscall.EAGAIN
	return true
}

// h1Body is a response's body read from its connection. Closing it puts
// the connection back when the body ended cleanly and the exchange keeps
// the connection alive, else closes it.
type h1Body struct {
	t    *h1Transport
	c    *h1Conn
	body io.ReadCloser
	stop func() bool
	keep bool

	mu   sync.Mutex
	eof  bool
	done bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

// Close ends the body. A body not read to its end leaves the
// connection unusable (its rest would be read as the next response), so
// it is closed rather than drained.
func (b *h1Body) Close() error {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	b.done = true
	eof := b.eof
	b.mu.Unlock()
	live := b.stop()
	if eof && live && b.keep && b.c.br.Buffered() == 0 {
		_ = b.body.Close()
		b.t.put(b.c)
		return nil
	}
	// Not the body's Close: net/http's reads what is left (to reuse the
	// connection), which an endless stream never ends.
	return b.c.Close()
}

// fastTransport routes a remote server's requests: plain http that no
// proxy carries to h1 (the caller does the exchange), the rest (https,
// where HTTP/2 multiplexes; proxies) to net/http's Transport.
type fastTransport struct {
	h1   *h1Transport
	base *http.Transport

	// direct remembers, per host, whether no proxy applies (the
	// environment's proxy rules are fixed for the process).
	direct sync.Map // host -> bool
}

func (f *fastTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && f.isDirect(req) {
		return f.h1.RoundTrip(req)
	}
	return f.base.RoundTrip(req)
}

func (f *fastTransport) isDirect(req *http.Request) bool {
	if v, ok := f.direct.Load(req.URL.Host); ok {
		return v.(bool)
	}
	direct := true
	if f.base.Proxy != nil {
		p, err := f.base.Proxy(req)
		direct = err == nil && p == nil
	}
	f.direct.Store(req.URL.Host, direct)
	return direct
}

// CloseIdleConnections closes both transports' idle connections.
func (f *fastTransport) CloseIdleConnections() {
	f.h1.CloseIdleConnections()
	f.base.CloseIdleConnections()
}
