package mcpwire

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/sse"
)

// httpCarrier is the Streamable HTTP carrier (carrier.go): every
// message is its own POST to the MCP endpoint; a request's POST is
// answered with its reply, as one JSON body or as an SSE stream of the
// messages that relate to it ending with the reply, and the caller reads
// that answer itself. The server's other messages come on long-lived
// streams, each read by a goroutine: in the legacy eras the GET stream
// (when the server offers one), in the 2026-07-28 era the response to
// subscriptions/listen.
//
// Concurrency: any number of roundTrip and send run at once, each its own
// POST over the client's pooled connections. session and version are
// atomics written by the handshake and read by every request; mu guards
// the long-lived streams.
type httpCarrier struct {
	c   *Client
	u   *url.URL
	ep  string
	r   Remote
	hc  *http.Client
	lim sse.Limits

	// base is the parent of every request's context; cancelled when
	// the client dies, so every exchange in flight and every stream
	// ends.
	base  context.Context
	stop  context.CancelCauseFunc
	bg    sync.WaitGroup // the long-lived streams
	aside asides         // the posts no caller waits for

	session  atomic.Pointer[string]   // Mcp-Session-Id, once assigned
	version  atomic.Pointer[[]string] // MCP-Protocol-Version to send, as the field's value
	fallback atomic.Bool              // initialize was refused 400/404/405

	mu      sync.Mutex
	getOpen bool
	listens map[int64]context.CancelFunc
	closed  bool

	readers chan struct{} // closed when shutdown has waited for bg
}

var msgPool = sync.Pool{New: func() any { return new(mcpproto.Message) }}

func newHTTPCarrier(c *Client, u *url.URL, r Remote) *httpCarrier {
	base, stop := context.WithCancelCause(context.Background())
	return &httpCarrier{
		c: c, u: u, ep: u.String(), r: r, hc: r.Client,
		// A line bigger than the message cap is refused by the line
		// bound; data beyond it by the event bound.
		lim:  sse.Limits{MaxLine: c.cfg.MaxLineBytes + 64, MaxEvent: c.cfg.MaxLineBytes},
		base: base, stop: stop,
		listens: map[int64]context.CancelFunc{},
		readers: make(chan struct{}),
	}
}

var (
	hAccept    = []string{"application/json, text/event-stream"}
	hAcceptSSE = []string{"text/event-stream"}
	hJSON      = []string{"application/json"}
)

// header fills a request's headers: the operator's and the protocol's
// (MCP-Protocol-Version, Mcp-Session-Id, the 2026-07-28 request
// metadata); the authorizer's are added by authorizedDo.
func (h *httpCarrier) header(hd http.Header, o outbound, accept []string) error {
	for k, v := range h.r.Header {
		hd[k] = v
	}
	hd["Accept"] = accept
	if v := h.versionFor(o.method); v != nil {
		hd["Mcp-Protocol-Version"] = v
	}
	modern := h.c.Era() == EraModern || o.method == "server/discover"
	if s := h.session.Load(); s != nil && !modern {
		hd["Mcp-Session-Id"] = []string{*s}
	}
	if o.method != "" {
		// The 2026-07-28 standard headers, which intermediaries route on;
		// earlier servers ignore them.
		hd["Mcp-Method"] = methodField(o.method)
		if o.name != "" {
			hd["Mcp-Name"] = []string{headerValue(o.name)}
		}
	}
	if tp := o.traceparentHeader(); tp != "" {
		hd["Traceparent"] = []string{tp}
	}
	if params := h.c.headerParamsOf(o.name); o.method == "tools/call" && len(params) > 0 && h.c.Era() == EraModern {
		return paramHeaders(params, o.args.JSON(), hd.Set)
	}
	return nil
}

// versionFor is the MCP-Protocol-Version a request carries: the modern
// revision for the probe and in the modern era, the negotiated one after
// initialize, none (nil) on initialize itself. The value is shared by
// every request: a field's values are only read, and a slice whose
// capacity is its length cannot be appended to in place.
func (h *httpCarrier) versionFor(method string) []string {
	if method == "server/discover" || h.c.Era() == EraModern {
		return modernVersionField
	}
	if v := h.version.Load(); v != nil {
		return *v
	}
	return nil
}

var modernVersionField = []string{mcpproto.ModernVersion}

// methodFields are the Mcp-Method values of the requests every call or
// boot sends, shared as versionFor's are.
var methodFields = func() map[string][]string {
	m := map[string][]string{}
	for _, method := range []string{"tools/call", "tools/list", "server/discover", "initialize", "ping", "resources/read", "prompts/get", "subscriptions/listen"} {
		m[method] = []string{method}
	}
	return m
}()

// methodField is method as an Mcp-Method field's value.
func methodField(method string) []string {
	if v, ok := methodFields[method]; ok {
		return v
	}
	return []string{method}
}

// headerValue renders a value for an Mcp-Name or Mcp-Param header: as
// it is when it is plain visible ASCII, else in the revision's Base64
// sentinel form (also when it looks like one).
func headerValue(s string) string {
	safe := s != "" && s[0] != ' ' && s[len(s)-1] != ' ' && !(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
	for i := 0; safe && i < len(s); i++ {
		safe = s[i] >= 0x20 && s[i] < 0x7f
	}
	if safe {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// do posts line (or GETs when line is nil) with the request's headers,
// retrying once when the authorizer answers a 401 or 403 with a new
// token.
func (h *httpCarrier) do(ctx context.Context, method string, o outbound, line []byte, accept []string, extra func(http.Header)) (*http.Response, error) {
	what := o.method
	if what == "" {
		what = method
	}
	return authorizedDo(ctx, h.hc, h.r.Auth, what, func() (*http.Request, error) {
		var body io.Reader
		if line != nil {
			body = bytes.NewReader(line)
		}
		req, err := http.NewRequestWithContext(ctx, method, h.ep, body)
		if err != nil {
			return nil, err
		}
		if line != nil {
			req.Header["Content-Type"] = hJSON
		}
		if err := h.header(req.Header, o, accept); err != nil {
			return nil, err
		}
		if extra != nil {
			extra(req.Header)
		}
		return req, nil
	})
}

// drainBody discards a little of an unused body and closes it, so the
// connection can be reused when the rest is short.
func drainBody(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

// errGaveUp is the cause of a request context the client's death ended.
var errGaveUp = errors.New("mcpwire: client died")

func (h *httpCarrier) roundTrip(ctx context.Context, cl *call, o outbound, line []byte, _ bool) (bool, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.base, func() { cancel(errGaveUp) })
	defer stop()
	// The call's idle deadline, which progress moves (Client.progress),
	// never past its hard one.
	h.c.mu.Lock()
	if h.c.calls[cl.id] != cl { // settled already (death)
		h.c.mu.Unlock()
		return true, nil
	}
	cl.timer = time.AfterFunc(min(cl.idle, time.Until(cl.hard)), func() { cancel(ErrTimeout) })
	h.c.mu.Unlock()
	defer func() {
		h.c.mu.Lock()
		cl.timer.Stop()
		cl.timer = nil
		h.c.mu.Unlock()
	}()

	m := msgPool.Get().(*mcpproto.Message)
	defer msgPool.Put(m)
	if why := context.Cause(rctx); why != nil && !errors.Is(why, errGaveUp) {
		// Given up on before its POST: the server never saw it, so it is
		// neither abandoned nor cancelled at the server, and whatever
		// its owner held for it is free at once. (The client's death
		// goes on to failed, which leaves the call to its settlement.)
		return false, why
	}
	resp, err := h.do(rctx, http.MethodPost, o, line, hAccept, nil)
	if errors.Is(err, ErrInvalidArgument) {
		return false, err // an argument no header can carry: nothing was sent
	}
	if err != nil {
		return h.failed(rctx, cl, o, err)
	}
	last, retry, _, err := h.answer(rctx, cl, o, resp, m)
	// A server may end a call's stream at any time, and the client
	// resumes it (2025-11-25: servers poll so); a run of maxResumes
	// resumptions that carry no message ends the call, as does its
	// deadline.
	for empty := 0; err == nil && h.waiting(cl) && last != "" && empty < maxResumes && h.c.Era() != EraModern; {
		// The stream ended before the reply, but it had event ids: the
		// spec's resumption is a GET with Last-Event-ID, after the
		// retry the server asked for.
		if !sleepCtx(rctx, max(retry, minStreamWait)) {
			break
		}
		resp, err = h.do(rctx, http.MethodGet, outbound{}, nil, hAcceptSSE, func(hd http.Header) { hd["Last-Event-Id"] = []string{last} })
		if err != nil {
			return h.failed(rctx, cl, o, err)
		}
		var id string
		var n int
		id, retry, n, err = h.answer(rctx, cl, o, resp, m)
		if id != "" {
			last = id // else the stream carried no id, and resumes from where it did
		}
		if n > 0 {
			empty = 0
		} else {
			empty++
		}
	}
	if rctx.Err() != nil && h.waiting(cl) {
		if why := context.Cause(rctx); !errors.Is(why, errGaveUp) {
			return true, why
		}
		return true, nil // death settled it
	}
	if err == nil && h.waiting(cl) {
		err = &HTTPError{Method: o.method, Status: resp.StatusCode, ContentType: shownType(resp), Reason: "the response ended before the reply"}
	}
	if err != nil {
		h.c.settle(cl.id, jsonlex.Value{}, err)
	}
	return true, nil
}

// failed handles a request that got no response: the caller gave up, the
// client died, the server could not be reached (death, so the owner's
// restart policy takes over), or the exchange broke (that call fails).
func (h *httpCarrier) failed(rctx context.Context, cl *call, o outbound, err error) (bool, error) {
	if rctx.Err() != nil {
		if why := context.Cause(rctx); !errors.Is(why, errGaveUp) {
			return true, why
		}
		return true, nil
	}
	if unreachable(err) {
		h.c.die(fmt.Errorf("mcpwire: %s %s: %w", http.MethodPost, shownURL(h.u), err))
		return true, nil
	}
	var he *HTTPError
	if errors.As(err, &he) {
		h.c.settle(cl.id, jsonlex.Value{}, he)
		return true, nil
	}
	h.c.settle(cl.id, jsonlex.Value{}, &HTTPError{Method: o.method, Reason: err.Error(), Err: err})
	return true, nil
}

// unreachable reports whether err says the server could not be reached
// at all (name resolution, connection, TLS): no request reached it.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "tls: ") || strings.Contains(s, "x509: ") || strings.Contains(s, "proxyconnect")
}

// waiting reports whether cl is still in flight.
func (h *httpCarrier) waiting(cl *call) bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.calls[cl.id] == cl
}

// answer reads the response to cl's request and hands every message in
// it to the client, until cl is settled or the response ends. For an SSE
// stream it returns the last event id and the retry wait, for a
// resumption, and how many messages it carried. An error is that call's
// failure.
func (h *httpCarrier) answer(ctx context.Context, cl *call, o outbound, resp *http.Response, m *mcpproto.Message) (string, time.Duration, int, error) {
	defer resp.Body.Close()
	mt := mediaType(resp)
	if h.sessionGone(resp) {
		return "", 0, 0, nil
	}
	if o.method == "initialize" && resp.StatusCode/100 == 2 {
		if err := h.takeSession(resp); err != nil {
			return "", 0, 0, err
		}
	}
	switch {
	case resp.StatusCode == http.StatusOK && mt == "text/event-stream":
		return h.readEvents(ctx, resp, m, func() bool { return h.waiting(cl) }, o.method, cl.id)
	case resp.StatusCode/100 == 2 && mt == "application/json":
		return "", 0, 0, h.readJSON(resp, cl, o, m)
	case resp.StatusCode/100 == 2:
		reason := "a request's answer must be application/json or text/event-stream"
		if resp.StatusCode == http.StatusAccepted {
			reason = "202 Accepted carries no reply to a request"
		}
		return "", 0, 0, h.httpErr(o, resp, reason)
	}
	if o.method == "initialize" {
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			h.fallback.Store(true)
		}
	}
	if mt == "application/json" {
		// An error status may still carry the JSON-RPC error that says
		// why (a 2026-07-28 server's 400 UnsupportedProtocolVersion,
		// HeaderMismatch): that is the call's answer.
		if err := h.readJSON(resp, cl, o, m); err == nil && !h.waiting(cl) {
			return "", 0, 0, nil
		}
	}
	return "", 0, 0, h.httpErr(o, resp, "")
}

// readJSON reads a body holding one message (or, under 2025-03-26, a
// batch), bounded by the message cap.
func (h *httpCarrier) readJSON(resp *http.Response, cl *call, o outbound, m *mcpproto.Message) error {
	bp := linePool.Get().(*[]byte)
	body, err := readBody((*bp)[:0], resp, h.c.cfg.MaxLineBytes)
	err = h.handleJSON(body, err, resp, cl, o, m)
	if cap(body) <= maxPooledLine {
		*bp = body[:0]
		linePool.Put(bp)
	}
	return err
}

// handleJSON is readJSON's handling of the body it read (or failed to
// read: readErr). Nothing it returns aliases body.
func (h *httpCarrier) handleJSON(body []byte, readErr error, resp *http.Response, cl *call, o outbound, m *mcpproto.Message) error {
	if err := readErr; err != nil {
		return &HTTPError{Method: o.method, Status: resp.StatusCode, ContentType: "application/json", Reason: "reading the body: " + err.Error(), Err: err}
	}
	if len(body) > h.c.cfg.MaxLineBytes {
		return &MalformedResultError{ID: cl.id, Reason: fmt.Sprintf("a response body longer than %d bytes", h.c.cfg.MaxLineBytes), Err: ErrProtocol}
	}
	h.c.handleLine(body, m, cl.id)
	if !h.waiting(cl) || resp.StatusCode/100 != 2 {
		return nil
	}
	// Another request's reply is not quoted in this one's error: it may
	// be another program's result. A batch may hold one anywhere.
	if i := jsonlex.SkipSpace(body, 0); i < len(body) && body[i] == '[' {
		return &HTTPError{Method: o.method, Status: resp.StatusCode, ContentType: "application/json", Reason: "the body is a batch without the reply to the request"}
	}
	if id, ok := mcpproto.PeekResponseID(body); ok && id != cl.id {
		return &HTTPError{Method: o.method, Status: resp.StatusCode, ContentType: "application/json", Reason: fmt.Sprintf("the body is the reply to request %d, not to this one (%d)", id, cl.id)}
	}
	return &HTTPError{Method: o.method, Status: resp.StatusCode, ContentType: "application/json", Reason: "the body is not the reply to the request", Body: answerPreview(resp, body)}
}

// readBody appends resp's body to dst, reading at most limit+1 bytes: a
// body longer than limit is seen as such without being read whole. dst
// grows once to an announced length up to maxPooledLine (a longer one is
// not believed in advance: memory follows the bytes that arrive), and by
// doubling otherwise, where io.ReadAll starts small every time.
func readBody(dst []byte, resp *http.Response, limit int) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= int64(min(limit, maxPooledLine)) {
		dst = slices.Grow(dst, int(n)+1) // +1: the read that finds the end
	}
	r := io.LimitedReader{R: resp.Body, N: int64(limit) + 1}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, err
		}
	}
}

// readEvents hands the messages of an SSE stream to the client until
// more() says to stop or the stream ends, returning the last event id and
// the retry wait it asked for. A malformed stream is an error. only is
// the id of the request whose answer the stream is, 0 for none
// (handleLine).
func (h *httpCarrier) readEvents(ctx context.Context, resp *http.Response, m *mcpproto.Message, more func() bool, method string, only int64) (last string, retry time.Duration, n int, err error) {
	dec := sse.NewDecoder(resp.Body, h.lim)
	// The id and retry fields count whether or not their event is
	// dispatched: a server primes a stream with an id alone and sends a
	// retry alone before it closes one.
	ended := func() (string, time.Duration) {
		last, _ := dec.LastID()
		retry := defaultRetryWait
		if r := dec.Retry(); r >= 0 {
			retry = min(time.Duration(r)*time.Millisecond, maxRetryWait)
		}
		return last, retry
	}
	for more() {
		ev, err := dec.Next()
		if err != nil {
			if errors.Is(err, sse.ErrFault) {
				return "", 0, n, &HTTPError{Method: method, Status: resp.StatusCode, ContentType: "text/event-stream", Reason: err.Error(), Err: err}
			}
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				h.c.log.Debug().Err(err).Str("method", method).Msg("mcpwire: SSE stream broke")
			}
			last, retry = ended()
			return last, retry, n, nil
		}
		if ev.Type != "message" || len(ev.Data) == 0 {
			continue // a priming event, or one MCP does not define
		}
		n++
		h.c.handleLine(ev.Data, m, only)
	}
	last, retry = ended()
	return last, retry, n, nil
}

// mediaType is the media type of resp's Content-Type, lower-cased, ""
// when there is none or it does not parse.
func mediaType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	// The two MCP answers' types, as servers send them, without
	// ParseMediaType's map of parameters.
	switch ct {
	case "application/json", "text/event-stream":
		return ct
	case "application/json; charset=utf-8":
		return "application/json"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

// httpErr builds the error for an unusable response, quoting the start
// of its body.
func (h *httpCarrier) httpErr(o outbound, resp *http.Response, reason string) *HTTPError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorPreview+8))
	if reason == "" {
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			reason = "the server requires authorization"
			if w := resp.Header.Get("Www-Authenticate"); w != "" {
				// The challenge may quote the token it refused.
				reason += " (WWW-Authenticate: " + answerPreview(resp, []byte(w)) + ")"
			}
		case resp.StatusCode/100 == 2:
			reason = "unusable answer"
		default:
			reason = "the server refused the request"
		}
	}
	return &HTTPError{Method: o.method, Status: resp.StatusCode, ContentType: shownType(resp), Reason: reason, Body: answerPreview(resp, b)}
}

// sessionGone handles a 404 to a request that carried a session: the
// server ended the session, so the client dies with ErrSessionExpired
// and its owner starts a new one. It reports whether it was that.
func (h *httpCarrier) sessionGone(resp *http.Response) bool {
	s := h.session.Load()
	if resp.StatusCode != http.StatusNotFound || s == nil || resp.Request.Header.Get("Mcp-Session-Id") == "" {
		return false
	}
	shown := *s
	if len(shown) > 8 {
		shown = shown[:8] + "…"
	}
	// An *HTTPError in the reason, so that the call it fails is audited
	// with its status as any other HTTP failure is.
	h.c.die(&HTTPError{Method: resp.Request.Header.Get("Mcp-Method"), Status: http.StatusNotFound, ContentType: shownType(resp),
		Reason: fmt.Sprintf("the server ended session %s; a new session starts with the next client", shown), Err: ErrSessionExpired})
	return true
}

// takeSession keeps the session id an initialize response assigned.
func (h *httpCarrier) takeSession(resp *http.Response) error {
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil
	}
	if len(id) > maxSessionID {
		return &HTTPError{Method: "initialize", Status: resp.StatusCode, Reason: fmt.Sprintf("an Mcp-Session-Id of %d bytes (at most %d)", len(id), maxSessionID)}
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return &HTTPError{Method: "initialize", Status: resp.StatusCode, Reason: "an Mcp-Session-Id outside visible ASCII"}
		}
	}
	h.session.Store(&id)
	return nil
}

// send posts a notification or a response, expecting 202 Accepted (any
// 2xx is taken).
func (h *httpCarrier) send(ctx context.Context, o outbound, line []byte) error {
	ctx, cancel := context.WithTimeout(ctx, h.c.cfg.WriteTimeout)
	defer cancel()
	stop := context.AfterFunc(h.base, cancel)
	defer stop()
	resp, err := h.do(ctx, http.MethodPost, o, line, hAccept, nil)
	if o.method == "" {
		o.method = "response" // for the error: a response has no Mcp-Method
	}
	if err != nil {
		if unreachable(err) && ctx.Err() == nil {
			h.c.die(fmt.Errorf("mcpwire: %s %s: %w", http.MethodPost, shownURL(h.u), err))
		}
		return err
	}
	defer drainBody(resp)
	if h.sessionGone(resp) {
		return ErrSessionExpired
	}
	if resp.StatusCode/100 != 2 {
		return h.httpErr(o, resp, "")
	}
	return nil
}

// cancels: over Streamable HTTP in the 2026-07-28 era closing the
// response stream is the cancellation; earlier revisions ask for the
// notification (the response's end is not one there).
func (h *httpCarrier) cancels() bool { return h.c.Era() != EraModern }

// sendAside posts line on a goroutine of its own (at most maxAsidePosts
// at once, each bounded by the write timeout and the client's life), so
// that a call given up on a server that has stopped answering returns at
// its deadline, and a server's request on a call's stream holds that
// call no longer than the stream does.
func (h *httpCarrier) sendAside(o outbound, line []byte) {
	h.aside.run(h.c, o, func() { _ = h.send(context.Background(), o, line) })
}

// negotiated records the revision initialize settled on, for every
// later request's MCP-Protocol-Version.
func (h *httpCarrier) negotiated(v string) {
	f := []string{v}
	h.version.Store(&f)
}

// established runs once the handshake is done: in the legacy eras the
// GET stream is opened for the server's own messages, and the handshake
// waits (within ctx) until the server has answered its GET, so that what
// the server sends from then on has a stream to come on.
func (h *httpCarrier) established(ctx context.Context) {
	if h.c.Era() == EraModern {
		return
	}
	h.mu.Lock()
	if h.closed || h.getOpen {
		h.mu.Unlock()
		return
	}
	h.getOpen = true
	h.bg.Add(1)
	opened := make(chan struct{})
	go h.getStream(opened)
	h.mu.Unlock()
	t := time.NewTimer(streamOpenWait)
	defer t.Stop()
	select {
	case <-opened:
	case <-ctx.Done():
	case <-t.C:
		h.c.log.Warn().Dur("waited", streamOpenWait).Msg("mcpwire: the server has not answered the GET stream yet; serving without waiting for it")
	}
}

// getStream reads the server's GET stream, reconnecting (with
// Last-Event-ID, after its retry) whenever it ends, until the client
// dies. A server without one answers 405, and is not asked again.
// opened is closed once the first GET is answered.
func (h *httpCarrier) getStream(opened chan struct{}) {
	defer h.bg.Done()
	var once sync.Once
	defer once.Do(func() { close(opened) })
	m := new(mcpproto.Message)
	last, wait, fails := "", time.Duration(0), 0
	for h.base.Err() == nil {
		if !sleepCtx(h.base, wait) {
			return
		}
		retry := time.Duration(0)
		resp, err := h.do(h.base, http.MethodGet, outbound{}, nil, hAcceptSSE, func(hd http.Header) {
			if last != "" {
				hd["Last-Event-Id"] = []string{last}
			}
		})
		once.Do(func() { close(opened) })
		switch {
		case err != nil:
			if h.base.Err() != nil {
				return
			}
			if unreachable(err) {
				// The stream that carries the server's own messages
				// cannot be had again: the server is gone, as a process
				// that exited is, and the owner's restart policy applies
				// now rather than at the next call.
				h.c.die(fmt.Errorf("mcpwire: GET %s: %w", shownURL(h.u), err))
				return
			}
			h.c.log.Debug().Err(err).Msg("mcpwire: opening the GET stream failed")
		case resp.StatusCode == http.StatusMethodNotAllowed:
			drainBody(resp)
			h.c.log.Debug().Msg("mcpwire: the server offers no GET stream (405)")
			return
		case h.sessionGone(resp):
			drainBody(resp)
			return
		case resp.StatusCode == http.StatusOK && mediaType(resp) == "text/event-stream":
			id, r, n, err := h.readEvents(h.base, resp, m, func() bool { return true }, "GET stream", 0)
			_ = resp.Body.Close()
			if id != "" {
				last = id
			}
			if err != nil {
				h.c.log.Warn().Err(err).Msg("mcpwire: the GET stream was malformed; reconnecting")
			}
			if ended(n, r) {
				fails, wait = 0, max(r, minStreamWait)
				continue
			}
			retry = r
		default:
			h.c.log.Debug().Int("status", resp.StatusCode).Msg("mcpwire: the GET stream was refused")
			drainBody(resp)
		}
		fails++
		wait = backoff(retry, fails)
	}
}

// ended reports whether a long-lived stream that carried n messages and
// asked for retry ended as a stream may: having carried a message, or
// asking for a wait of its own (a server that polls, a proxy's idle
// timeout). One that carried none and asks to be reopened at once is a
// failure, whose backoff keeps it from being opened again in a loop.
func ended(n int, retry time.Duration) bool { return n > 0 || retry >= minStreamWait }

// backoff is the wait before a long-lived stream is opened again after
// its fails-th failure in a row: the server's retry, but at least the
// default doubled with each failure, up to maxRetryWait.
func backoff(retry time.Duration, fails int) time.Duration {
	return max(retry, min(defaultRetryWait<<min(fails-1, 5), maxRetryWait))
}

// listen opens the subscriptions/listen stream: a POST whose SSE answer
// stays open, read by a goroutine, and opened again after the backoff
// if it drops without the server's closing reply (notifications may have
// been missed then, so the owner is told to re-list).
// The handshake waits (within hctx) for the server's first answer to it.
func (h *httpCarrier) listen(hctx context.Context, id int64, line []byte) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(h.base)
	h.listens[id] = cancel
	h.bg.Add(1)
	opened := make(chan struct{})
	go h.listenStream(ctx, id, bytes.Clone(line), opened)
	h.mu.Unlock()
	t := time.NewTimer(streamOpenWait)
	defer t.Stop()
	select {
	case <-opened:
	case <-hctx.Done():
	case <-t.C:
		h.c.log.Warn().Dur("waited", streamOpenWait).Msg("mcpwire: the server has not answered subscriptions/listen yet; serving without waiting for it")
	}
	return nil
}

func (h *httpCarrier) listenStream(ctx context.Context, id int64, line []byte, opened chan struct{}) {
	defer h.bg.Done()
	var once sync.Once
	defer once.Do(func() { close(opened) })
	m := new(mcpproto.Message)
	o := outbound{method: "subscriptions/listen"}
	wait, fails := time.Duration(0), 0
	for ctx.Err() == nil && h.c.m.subID.Load() == id {
		if !sleepCtx(ctx, wait) {
			return
		}
		if fails > 0 || wait > 0 {
			h.c.signalToolsChanged() // what the gap missed
		}
		retry := time.Duration(0)
		resp, err := h.do(ctx, http.MethodPost, o, line, hAccept, nil)
		once.Do(func() { close(opened) })
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if unreachable(err) {
				h.c.die(fmt.Errorf("mcpwire: %s %s: %w", http.MethodPost, shownURL(h.u), err))
				return
			}
			h.c.log.Debug().Err(err).Msg("mcpwire: opening the subscriptions/listen stream failed")
		case h.sessionGone(resp):
			drainBody(resp)
			return
		case resp.StatusCode == http.StatusOK && mediaType(resp) == "text/event-stream":
			_, r, n, err := h.readEvents(ctx, resp, m, func() bool { return h.c.m.subID.Load() == id }, o.method, id)
			_ = resp.Body.Close()
			if err != nil {
				h.c.log.Warn().Err(err).Msg("mcpwire: the subscriptions/listen stream was malformed; reopening")
			}
			if ended(n, r) {
				fails, wait = 0, max(r, minStreamWait)
				continue
			}
			retry = r
		case resp.StatusCode/100 == 2 && mediaType(resp) == "application/json":
			// A JSON answer is the stream's end (or a refusal): the
			// client's dispatch logs which.
			b, _ := io.ReadAll(io.LimitReader(resp.Body, int64(h.c.cfg.MaxLineBytes)))
			_ = resp.Body.Close()
			h.c.handleLine(b, m, id)
			return
		default:
			err := h.httpErr(o, resp, "")
			_ = resp.Body.Close()
			h.c.log.Warn().Err(err).Msg("mcpwire: subscriptions/listen refused; tools/list_changed will not arrive")
			return
		}
		fails++
		wait = backoff(retry, fails)
	}
}

// unlisten closes the listen stream, which is its cancellation over HTTP.
func (h *httpCarrier) unlisten(id int64) {
	h.mu.Lock()
	cancel := h.listens[id]
	delete(h.listens, id)
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (h *httpCarrier) electLocked() {}

// endLocked ends every exchange and stream in flight.
func (h *httpCarrier) endLocked() { h.stop(errGaveUp) }

func (h *httpCarrier) tail() []byte { return nil }
func (h *httpCarrier) kind() string { return "streamable-http" }
func (h *httpCarrier) pid() int     { return 0 }

func (h *httpCarrier) readersDone() <-chan struct{} { return h.readers }

// shutdown waits for the streams to end, then ends the session with a
// DELETE (bounded by Remote.ShutdownTimeout), and lets the idle
// connections go.
func (h *httpCarrier) shutdown() (Exit, error) {
	start := time.Now()
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.aside.close()
	h.stop(errGaveUp)
	h.bg.Wait()
	h.aside.wait()
	defer close(h.readers)
	status := "no session"
	if s := h.session.Load(); s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), h.r.ShutdownTimeout)
		resp, err := h.do(ctx, http.MethodDelete, outbound{}, nil, hAccept, nil)
		cancel()
		switch {
		case err != nil:
			status = "session not ended: " + err.Error()
		case resp.StatusCode == http.StatusMethodNotAllowed:
			drainBody(resp)
			status = "session left to the server (DELETE 405)"
		default:
			drainBody(resp)
			status = fmt.Sprintf("session ended (DELETE %d)", resp.StatusCode)
		}
	}
	h.hc.CloseIdleConnections()
	return Exit{How: ExitDisconnected, Status: status, Took: time.Since(start)}, nil
}

// sleepCtx waits d, reporting false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
