package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capbridge/capbridge/internal/jsonout"
	"github.com/capbridge/capbridge/internal/loopback"
)

// MCP over Streamable HTTP (one endpoint, POST; MCP's transports
// chapter). Both eras share it:
//
//   - 2025-03-26 to 2025-11-25: initialize mints a session, whose id the
//     client sends as Mcp-Session-Id on every later request (400 without
//     it, 404 for one that ended); DELETE ends it; GET (a stream the server
//     would push on) is 405, as this server pushes nothing; a call is
//     cancelled by notifications/cancelled, not by a closed stream.
//   - 2026-07-28: no session; every request carries its version in _meta,
//     mirrored in MCP-Protocol-Version, and its method (and a tool's name)
//     in Mcp-Method and Mcp-Name, which must match (400, HeaderMismatch);
//     closing a call's response stream cancels it.
//
// A tools/call that asked for progress is answered as an SSE stream of
// its progress notifications and then its response; everything else as
// one JSON object.

// Bounds of the HTTP carrier.
const (
	maxBody = 4 << 20 // one JSON-RPC message in a POST
	// maxBodies bounds the bytes of the request bodies being read at
	// once, every connection's together. A client may send a message of
	// maxBody as slowly as the server's read timeout allows; with every
	// connection the listener admits doing that, the bodies alone held
	// over half a GiB. Eight messages of the largest size fit; a request
	// that finds the budget spent is refused (503, Retry-After) and
	// holds nothing.
	maxBodies   = 32 << 20
	maxSessions = 64 // live legacy sessions; the longest idle goes first
	// maxRunning bounds the tool calls running at once, every session's
	// and the sessionless era's. A run holds one of the bridge's control
	// connections while it runs, of the 64 the bridge admits: half stay
	// for its operator and harness.
	maxRunning  = 32
	sessionIdle = 30 * time.Minute
	// writeTimeout bounds each write of a response (each event of a
	// stream): a client that stops reading is cut off then, rather than
	// holding its handler, its session's call and the reply for ever.
	writeTimeout   = 30 * time.Second
	codeHeaderMism = -32020
)

// HTTP serves a Server over Streamable HTTP. Its fields must not change
// once it serves; ServeHTTP may be called concurrently; Close ends every
// session and waits for their calls.
type HTTP struct {
	Server *Server
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); 401 otherwise.
	Token string
	// Local makes it a local server (it listens on loopback): a request
	// whose Host or Origin names another host is refused (403), which is
	// what keeps a web page from reaching it by DNS rebinding.
	Local bool
	// Origins are the further Origin values allowed ("https://app.example").
	Origins []string

	once     sync.Once
	running  chan struct{} // a slot per call running (maxRunning)
	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	now      func() time.Time
	// bodyLeft is what is left of the budget for bodies being read
	// (maxBodies).
	bodyLeft atomic.Int64
	// writeWait is writeTimeout but in tests; released, when set (by
	// tests), is told each time a call gives back its running slot;
	// bodies is maxBodies but in tests; bodyMoved, when set, is told of
	// each part of the budget for bodies taken (n > 0) and given back.
	writeWait time.Duration
	released  func()
	bodies    int64
	bodyMoved func(n int64)
}

// session is a legacy client's session.
type session struct {
	id       string
	version  string
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	inflight map[string]context.CancelFunc // by the JSON of the request id
	lastUsed time.Time
	wg       sync.WaitGroup
}

func (h *HTTP) init() {
	h.once.Do(func() {
		h.sessions = map[string]*session{}
		h.running = make(chan struct{}, maxRunning)
		if h.now == nil {
			h.now = time.Now
		}
		if h.writeWait == 0 {
			h.writeWait = writeTimeout
		}
		if h.bodies == 0 {
			h.bodies = maxBodies
		}
		h.bodyLeft.Store(h.bodies)
	})
}

// Close ends every session, cancelling its calls, and waits for them.
func (h *HTTP) Close() {
	h.init()
	h.mu.Lock()
	h.closed = true
	all := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.sessions = map[string]*session{}
	h.mu.Unlock()
	for _, s := range all {
		s.end()
		s.wg.Wait()
	}
}

// end cancels the session's calls; under mu, so that no call joins wg
// once it is over (legacy refuses a call to an ended session).
func (s *session) end() {
	s.mu.Lock()
	s.cancel()
	s.mu.Unlock()
}

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.init()
	if !h.hostAllowed(r) {
		// Refused before any credential is checked: the connection is
		// not kept for a next request, so that refusals cannot hold
		// connections idle for as long as the server keeps them.
		w.Header().Set("Connection", "close")
		h.httpError(w, http.StatusForbidden, codeInvalidRequest, "this Host or Origin may not reach the server")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && slices.Contains(h.Origins, o) {
		// A page of an origin the operator named is a browser's, which
		// reads an answer only with CORS's leave, and asks before a POST
		// of JSON with these headers (a preflight, which carries no
		// credentials: the token still guards every request that does
		// something). Only named origins: the loopback's own, which the
		// rebinding guard lets through, are any local web page, and a
		// port without a token would be theirs.
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", o)
		hd.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate")
		hd.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hd.Set("Access-Control-Allow-Methods", "POST, DELETE")
			hd.Set("Access-Control-Allow-Headers", corsHeaders)
			hd.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if h.Token != "" {
		// The scheme's name is case-insensitive (RFC 9110, 11.1).
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimLeft(tok, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(tok), []byte(h.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="capbridge"`)
			w.Header().Set("Connection", "close")
			h.httpError(w, http.StatusUnauthorized, codeInvalidRequest, "a bearer token is required")
			return
		}
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodDelete:
		s, status := h.session(r)
		if s == nil {
			h.httpError(w, status, codeInvalidRequest, http.StatusText(status)+": Mcp-Session-Id")
			return
		}
		h.end(s)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "POST, DELETE")
		h.httpError(w, http.StatusMethodNotAllowed, codeInvalidRequest, "this server sends nothing unasked: POST requests")
	}
}

// corsHeaders are the request headers a page may send: HTTP's for a
// JSON POST with a token, and MCP's.
const corsHeaders = "Authorization, Content-Type, Mcp-Protocol-Version, Mcp-Session-Id, Mcp-Method, Mcp-Name, Last-Event-ID"

// hostAllowed checks Host and Origin against DNS rebinding: a local
// server answers only names of the loopback, and any Origin must be the
// loopback's or one configured.
func (h *HTTP) hostAllowed(r *http.Request) bool {
	if h.Local && !loopback.HostPort(r.Host) {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if slices.Contains(h.Origins, o) {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && h.Local && loopback.Host(u.Hostname())
}

func (h *HTTP) post(w http.ResponseWriter, r *http.Request) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		h.httpError(w, http.StatusUnsupportedMediaType, codeInvalidRequest, "the body must be application/json")
		return
	}
	req, status, code, msg := h.readRequest(w, r)
	if status != 0 {
		h.httpError(w, status, code, msg)
		return
	}
	isRequest := len(req.ID) > 0 && string(req.ID) != "null"
	if req.JSONRPC != "2.0" || (req.Method == "" && !isRequest) {
		h.httpError(w, http.StatusBadRequest, codeInvalidRequest, "not a JSON-RPC 2.0 message")
		return
	}
	if req.Method == "" {
		w.WriteHeader(http.StatusAccepted) // a response: this server asked nothing
		return
	}
	var m meta
	_ = json.Unmarshal(req.Params, &m)
	if m.Meta.Version != "" {
		h.modern(w, r, req, m, isRequest)
		return
	}
	h.legacy(w, r, req, m, isRequest)
}

// readRequest reads and decodes r's message, or says how to refuse it
// (status, code, message). The budget its body took is given back
// before it returns: what the request needs is decoded (copied), and
// the body is garbage.
func (h *HTTP) readRequest(w http.ResponseWriter, r *http.Request) (req request, status, code int, msg string) {
	body, held, err := h.readBody(w, r)
	defer h.giveBody(held)
	switch {
	case errors.Is(err, errBodiesFull):
		w.Header().Set("Retry-After", "1")
		return req, http.StatusServiceUnavailable, codeInvalidRequest, "the server is reading as many requests as it holds at once: try again"
	case err != nil:
		return req, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf("a message of at most %d bytes", maxBody)
	}
	if req, code, msg = decodeMessage(body); code != 0 {
		return req, http.StatusBadRequest, code, msg
	}
	return req, 0, 0, ""
}

// errBodiesFull is readBody's when the budget for bodies is spent.
var errBodiesFull = errors.New("mcpserver: the budget for request bodies is spent")

// readBody reads r's body, at most maxBody bytes, within the budget for
// bodies being read: a body of known length takes its length before
// anything is read, one of unknown length what each read brings. It
// returns what it took, to be given back (giveBody) once the body is no
// longer needed, whatever the error.
func (h *HTTP) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int64, error) {
	if r.ContentLength > maxBody {
		return nil, 0, &http.MaxBytesError{Limit: maxBody}
	}
	br := &budgeted{h: h, r: http.MaxBytesReader(w, r.Body, maxBody)}
	if n := r.ContentLength; n > 0 {
		if !h.takeBody(n) {
			return nil, 0, errBodiesFull
		}
		br.held = n
		// Read into a buffer of its size: io.ReadAll's doubling would
		// hold up to twice what was taken.
		body := make([]byte, n)
		_, err := io.ReadFull(br, body)
		return body, br.held, err
	}
	body, err := io.ReadAll(br)
	return body, br.held, err
}

// budgeted reads a body within the budget for bodies: what it reads
// beyond what was taken before reading it takes as it goes.
type budgeted struct {
	h    *HTTP
	r    io.Reader
	held int64 // taken from the budget
	read int64
}

func (b *budgeted) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	if over := b.read - b.held; over > 0 {
		if !b.h.takeBody(over) {
			return 0, errBodiesFull
		}
		b.held += over
	}
	return n, err
}

// takeBody takes n bytes of the budget for bodies, if it has them.
func (h *HTTP) takeBody(n int64) bool {
	for {
		left := h.bodyLeft.Load()
		if left < n {
			return false
		}
		if h.bodyLeft.CompareAndSwap(left, left-n) {
			if h.bodyMoved != nil {
				h.bodyMoved(n)
			}
			return true
		}
	}
}

// giveBody gives n bytes back to the budget for bodies.
func (h *HTTP) giveBody(n int64) {
	if n == 0 {
		return
	}
	h.bodyLeft.Add(n)
	if h.bodyMoved != nil {
		h.bodyMoved(-n)
	}
}

// modern serves one 2026-07-28 message.
func (h *HTTP) modern(w http.ResponseWriter, r *http.Request, req request, m meta, isRequest bool) {
	mismatch := func(what, got, want string) {
		h.reply(w, http.StatusBadRequest, errorMsg(req.ID, codeHeaderMism,
			fmt.Sprintf("Header mismatch: %s header value %q does not match body value %q", what, got, want), nil))
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != m.Meta.Version {
		mismatch("MCP-Protocol-Version", v, m.Meta.Version)
		return
	}
	if m.Meta.Version != modernVersion {
		h.reply(w, http.StatusBadRequest, errorMsg(req.ID, codeUnsupportedVer, "Unsupported protocol version",
			map[string]any{"supported": []string{modernVersion}, "requested": m.Meta.Version}))
		return
	}
	if !isRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if got := r.Header.Get("Mcp-Method"); got != req.Method {
		mismatch("Mcp-Method", got, req.Method)
		return
	}
	s := h.Server
	switch req.Method {
	case "server/discover":
		h.reply(w, http.StatusOK, resultMsg(req.ID, s.stamp(true, s.discover())))
	case "tools/list":
		h.reply(w, http.StatusOK, resultMsg(req.ID, s.stamp(true, s.list(true))))
	case "tools/call":
		var p callParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			h.reply(w, http.StatusOK, errorMsg(req.ID, codeInvalidParams, "tools/call params: "+err.Error(), nil))
			return
		}
		if got := headerValue(r.Header.Get("Mcp-Name")); got != p.Name {
			mismatch("Mcp-Name", got, p.Name)
			return
		}
		// Closing the response stream is the cancellation.
		h.call(w, r.Context(), req, m, p, true)
	default:
		h.reply(w, http.StatusNotFound, errorMsg(req.ID, codeNoMethod, "method not found: "+req.Method, nil))
	}
}

// headerValue decodes MCP's "=?base64?…?=" sentinel form.
func headerValue(v string) string {
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			if b, err := base64.StdEncoding.DecodeString(inner); err == nil {
				return string(b)
			}
		}
	}
	return v
}

// legacy serves one message of a 2025-03-26..2025-11-25 client.
func (h *HTTP) legacy(w http.ResponseWriter, r *http.Request, req request, m meta, isRequest bool) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(legacyVersions, v) {
		h.httpError(w, http.StatusBadRequest, codeInvalidRequest, "unsupported MCP-Protocol-Version "+v+"; supported: "+strings.Join(append([]string{modernVersion}, legacyVersions...), ", "))
		return
	}
	if req.Method == "initialize" {
		if !isRequest {
			h.httpError(w, http.StatusBadRequest, codeInvalidRequest, "initialize is a request")
			return
		}
		res, v := h.Server.initialize(req.Params)
		s, err := h.open(v)
		if err != nil {
			h.reply(w, http.StatusServiceUnavailable, errorMsg(req.ID, codeInternal, err.Error(), nil))
			return
		}
		w.Header().Set("Mcp-Session-Id", s.id)
		h.reply(w, http.StatusOK, resultMsg(req.ID, res))
		return
	}
	s, status := h.session(r)
	if s == nil {
		h.httpError(w, status, codeInvalidRequest, http.StatusText(status)+": Mcp-Session-Id")
		return
	}
	if !isRequest {
		if req.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &p) == nil {
				s.mu.Lock()
				cancel := s.inflight[string(p.RequestID)]
				s.mu.Unlock()
				if cancel != nil {
					cancel()
				}
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	srv := h.Server
	switch req.Method {
	case "ping":
		h.reply(w, http.StatusOK, resultMsg(req.ID, map[string]any{}))
	case "tools/list":
		h.reply(w, http.StatusOK, resultMsg(req.ID, srv.list(false)))
	case "tools/call":
		var p callParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			h.reply(w, http.StatusOK, errorMsg(req.ID, codeInvalidParams, "tools/call params: "+err.Error(), nil))
			return
		}
		key := string(req.ID)
		// The call lives with the session, not the connection: a client
		// that loses the stream has not cancelled (it sends
		// notifications/cancelled for that).
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		s.mu.Lock()
		ended := s.ctx.Err() != nil
		_, dup := s.inflight[key]
		full := len(s.inflight) >= maxInFlight
		if !ended && !dup && !full {
			s.inflight[key] = cancel
			s.wg.Add(1)
		}
		s.mu.Unlock()
		switch {
		case ended:
			// Ended (DELETE, eviction, shutdown) since it was looked up.
			h.httpError(w, http.StatusNotFound, codeInvalidRequest, http.StatusText(http.StatusNotFound)+": Mcp-Session-Id")
			return
		case dup:
			h.reply(w, http.StatusOK, errorMsg(req.ID, codeInvalidRequest, "a request with this id is still in flight", nil))
			return
		case full:
			h.reply(w, http.StatusOK, errorMsg(req.ID, codeInternal, fmt.Sprintf("%d calls are running already; try again when one ends", maxInFlight), nil))
			return
		}
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			s.wg.Done()
		}()
		h.call(w, ctx, req, m, p, false)
	default:
		h.reply(w, http.StatusOK, errorMsg(req.ID, codeNoMethod, "method not found: "+req.Method, nil))
	}
}

// call runs a tool for one POST and writes its response: as JSON, or as
// an SSE stream of progress then the response when the caller asked for
// progress. At most maxRunning calls run at once, whatever their
// session or era; one more is refused at once, not queued. A cancelled
// call is not answered: its POST gets a stream that ends without a
// message, since a POST that carried a request is answered with JSON or
// a stream (Streamable HTTP), and the response is what the receiver
// SHOULD not send (MCP, cancellation).
func (h *HTTP) call(w http.ResponseWriter, ctx context.Context, req request, m meta, p callParams, modern bool) {
	tool := h.Server.tool(p.Name)
	if tool == nil {
		h.reply(w, http.StatusOK, errorMsg(req.ID, codeInvalidParams, "unknown tool: "+p.Name, nil))
		return
	}
	select {
	case h.running <- struct{}{}:
	default:
		h.reply(w, http.StatusOK, errorMsg(req.ID, codeInternal, fmt.Sprintf("%d calls are running already; try again when one ends", maxRunning), nil))
		return
	}
	progress := func(float64, float64, string) {}
	var stream *sse
	if tok := m.Meta.ProgressToken; len(tok) > 0 && string(tok) != "null" {
		stream = h.startSSE(w)
		progress = progressFunc(ctx, tok, stream.send)
	}
	res, err := h.run(ctx, tool, p.args(), progress)
	if ctx.Err() != nil {
		if stream == nil {
			h.startSSE(w)
		}
		return
	}
	var msg map[string]any
	if err != nil {
		msg = errorMsg(req.ID, callErrorCode(err), err.Error(), nil)
	} else {
		msg = resultMsg(req.ID, h.Server.stamp(modern, callResult(res)))
	}
	if stream != nil {
		stream.send(msg)
		return
	}
	h.reply(w, http.StatusOK, msg)
}

// run runs a call that holds one of h.running's slots, and gives the
// slot back when the tool returns (or panics): writing the reply, which
// a client that does not read holds up to writeTimeout, holds none.
func (h *HTTP) run(ctx context.Context, tool *Tool, args json.RawMessage, progress Progress) (*Result, error) {
	defer func() {
		<-h.running
		if h.released != nil {
			h.released()
		}
	}()
	return tool.Call(ctx, args, progress)
}

// progressFunc sends notifications/progress for tok through emit until
// ctx ends; progress reports are serialised.
func progressFunc(ctx context.Context, tok json.RawMessage, emit func(any)) Progress {
	var mu sync.Mutex
	return func(done, total float64, message string) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		params := map[string]any{"progressToken": tok, "progress": done}
		if total > 0 {
			params["total"] = total
		}
		if message != "" {
			params["message"] = message
		}
		emit(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
	}
}

// sse is a response written as Server-Sent Events, one message each.
// Each event is written within wait; once one is not, the rest are
// dropped: the client stopped reading.
type sse struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	wait   time.Duration
	broken bool
}

func (h *HTTP) startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	s := &sse{w: w, rc: http.NewResponseController(w), wait: h.writeWait}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.wait))
	w.WriteHeader(http.StatusOK)
	s.broken = s.rc.Flush() != nil
	return s
}

func (s *sse) send(msg any) {
	b, err := jsonout.Marshal(msg)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.wait))
	if _, err := fmt.Fprintf(s.w, "event: message\ndata: %s\n\n", b); err != nil {
		s.broken = true
		return
	}
	s.broken = s.rc.Flush() != nil
}

// open makes a session, ending the longest idle one when there are
// maxSessions, or those idle past sessionIdle.
func (h *HTTP) open(version string) (*session, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{id: hex.EncodeToString(b[:]), version: version, ctx: ctx, cancel: cancel,
		inflight: map[string]context.CancelFunc{}, lastUsed: h.now()}
	var gone []*session
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cancel()
		return nil, errors.New("mcpserver: shutting down")
	}
	for id, o := range h.sessions {
		if h.now().Sub(o.lastUsed) > sessionIdle && o.idle() {
			delete(h.sessions, id)
			gone = append(gone, o)
		}
	}
	if len(h.sessions) >= maxSessions {
		var oldest *session
		for _, o := range h.sessions {
			if o.idle() && (oldest == nil || o.lastUsed.Before(oldest.lastUsed)) {
				oldest = o
			}
		}
		if oldest == nil {
			h.mu.Unlock()
			cancel()
			return nil, fmt.Errorf("mcpserver: %d sessions are busy; end one (DELETE) or try again", maxSessions)
		}
		delete(h.sessions, oldest.id)
		gone = append(gone, oldest)
	}
	h.sessions[s.id] = s
	h.mu.Unlock()
	for _, o := range gone {
		o.cancel()
	}
	return s, nil
}

// idle reports whether no call of s runs.
func (s *session) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight) == 0
}

// session is the request's session, or nil with the status to answer:
// 400 without Mcp-Session-Id, 404 for one that is not (or no longer)
// known.
func (h *HTTP) session(r *http.Request) (*session, int) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil, http.StatusBadRequest
	}
	h.mu.Lock()
	s := h.sessions[id]
	if s == nil {
		h.mu.Unlock()
		return nil, http.StatusNotFound
	}
	now := h.now()
	if now.Sub(s.lastUsed) > sessionIdle && s.idle() {
		// Idle past its time: over, whether or not a new session has
		// swept it yet.
		delete(h.sessions, id)
		h.mu.Unlock()
		s.end()
		return nil, http.StatusNotFound
	}
	s.lastUsed = now
	h.mu.Unlock()
	return s, 0
}

// end ends a session: its calls are cancelled.
func (h *HTTP) end(s *session) {
	h.mu.Lock()
	delete(h.sessions, s.id)
	h.mu.Unlock()
	s.end()
}

func resultMsg(id json.RawMessage, result map[string]any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": result}
}

func errorMsg(id json.RawMessage, code int, msg string, data any) map[string]any {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

// httpError answers status with a JSON-RPC error that has no id.
func (h *HTTP) httpError(w http.ResponseWriter, status, code int, msg string) {
	h.reply(w, status, errorMsg(nil, code, msg, nil))
}

// reply writes msg as the response, within h's write wait: a client
// that does not read it is cut off then.
func (h *HTTP) reply(w http.ResponseWriter, status int, msg map[string]any) {
	b, err := jsonout.Marshal(msg)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"encoding the reply"}}`)
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.writeWait))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
