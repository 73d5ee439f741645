package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The HTTP face serves the same server over Streamable HTTP (both eras)
// and the legacy HTTP+SSE transport. Each legacy session (and the one
// stateless modern instance) is a run of the stdio loop over pipes; the
// face writes each POSTed message to it and routes what it writes back:
// a response to the POST of its request, a progress notification to the
// POST whose request holds its token, a listen notification to its
// subscriptions/listen stream, anything else to the GET stream (or, with
// none open, the newest open request stream).

// HTTPOptions choose how the HTTP face behaves. The zero value serves
// Streamable HTTP with sessions, JSON answers and a GET stream.
type HTTPOptions struct {
	// SSE answers every request with an SSE stream (its related
	// notifications, then the reply) instead of a JSON body.
	SSE bool
	// NoGET answers GET on the MCP endpoint 405: no stream for the
	// server's own messages.
	NoGET bool
	// Stateless assigns no session in the legacy eras: every request
	// goes to one shared instance.
	Stateless bool
	// LegacySSE serves only the 2024-11-05 HTTP+SSE transport: GET opens
	// the stream, whose endpoint event names SSEPostPath; a POST to the
	// MCP endpoint is 404.
	LegacySSE bool
	// EndpointOrigin, with LegacySSE, is put before the endpoint path
	// (another origin, for the client's refusal).
	EndpointOrigin string
	// Bearer, when set, is the one token requests must carry
	// (Authorization: Bearer …); others get 401 with a WWW-Authenticate
	// challenge naming ResourceMetadata.
	Bearer           string
	ResourceMetadata string
	// Verify, when set, checks every request's bearer token instead of
	// Bearer: it returns the token's scopes, or false for a token it
	// does not know (401). A token without every one of RequiredScopes
	// gets 403 insufficient_scope naming them. ChallengeScope, when set,
	// is the scope a 401 challenge names.
	Verify         func(token string) (scopes []string, ok bool)
	RequiredScopes []string
	ChallengeScope string
	// DropAfter, with SSE, ends each request's stream after this many
	// events without its reply (a retry field first), leaving the rest
	// for a GET with Last-Event-ID, once per stream.
	DropAfter int
	// Poll, with DropAfter, ends the stream again after every event
	// past the first DropAfter, with retry: 0: a server that makes the
	// client poll for a long call's progress (2025-11-25).
	Poll bool
	// EndGET ends every GET stream at once, with retry: GETRetry (in
	// ms; 0 by default) and no message: a server that keeps closing it.
	EndGET   bool
	GETRetry int
	// CheckParams holds a 2026-07-28 tools/call to the x-mcp-header
	// annotations of the tool in the listing the server has now (the
	// relisted one once tools/list_changed was sent): each annotated
	// top-level string argument must come as its Mcp-Param header, or
	// the call is refused -32020 HeaderMismatch.
	CheckParams bool
}

// SSEPostPath is where the legacy transport's messages are posted.
const SSEPostPath = "/message"

// HTTPFaultPrefix starts an echo text that makes the HTTP face answer
// that call itself with a fault instead of passing it to the server:
// "mcptest-http:html" (200 text/html), ":wrong_type" (200 text/plain),
// ":truncated" (a JSON body cut short), ":never_end" (an SSE stream that
// sends a comment and then nothing), ":status_500", ":accepted" (202 to
// a request), ":redirect_other" (307 to another origin), ":silent" (no
// answer at all until the client gives up), ":big_event" (an SSE event
// of 17 MiB), ":expire" (the session is ended, so this and every later
// request is 404).
const HTTPFaultPrefix = "mcptest-http:"

// HTTPServer is the HTTP face; it is an http.Handler. Close ends every
// instance and waits for them.
type HTTPServer struct {
	sc  Scenario
	o   HTTPOptions
	ctx context.Context
	end context.CancelFunc
	wg  sync.WaitGroup

	mu       sync.Mutex
	relisted bool // a tools/list_changed was sent: the listing is sc.Relisted
	sessions map[string]*instance
	shared   *instance // the stateless legacy instance
	modern   *instance
	// Requests counts requests by method and path ("POST /mcp"), for
	// tests that check what the client sent.
	requests map[string]int
	headers  []http.Header // the last request headers, newest last (at most 64)
}

// NewHTTP returns the HTTP face of a server for sc.
func NewHTTP(sc Scenario, o HTTPOptions) *HTTPServer {
	ctx, end := context.WithCancel(context.Background())
	return &HTTPServer{sc: sc, o: o, ctx: ctx, end: end, sessions: map[string]*instance{}, requests: map[string]int{}}
}

// Close ends every instance and waits for their loops.
func (hs *HTTPServer) Close() {
	hs.end()
	hs.wg.Wait()
}

// Requests reports how many requests the face got for key: "POST " and
// the JSON-RPC method of a POST ("POST tools/call"), "GET", "GET resume"
// (a GET with Last-Event-ID) or "DELETE".
func (hs *HTTPServer) Requests(key string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.requests[key]
}

// LastHeaders returns the headers of the last request counted under key
// (as Requests).
func (hs *HTTPServer) LastHeaders(key string) http.Header {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i := len(hs.headers) - 1; i >= 0; i-- {
		if hs.headers[i].Get("X-Mcptest-Key") == key {
			return hs.headers[i]
		}
	}
	return nil
}

// ExpireSessions ends every session, as a server that forgot them: each
// later request naming one gets 404.
func (hs *HTTPServer) ExpireSessions() {
	hs.mu.Lock()
	var old []*instance
	for id, in := range hs.sessions {
		old = append(old, in)
		hs.sessions[id] = nil
	}
	hs.mu.Unlock()
	for _, in := range old {
		in.stop()
	}
}

func (hs *HTTPServer) count(r *http.Request, kind string) {
	key := strings.TrimSpace(r.Method + " " + kind)
	h := r.Header.Clone()
	h.Set("X-Mcptest-Key", key)
	hs.mu.Lock()
	hs.requests[key]++
	if len(hs.headers) == 64 {
		hs.headers = hs.headers[1:]
	}
	hs.headers = append(hs.headers, h)
	hs.mu.Unlock()
}

// ServeHTTP serves one request.
func (hs *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !hs.authorized(w, r) {
		return
	}
	switch {
	case hs.o.LegacySSE && r.Method == http.MethodGet:
		hs.count(r, "")
		hs.legacyStream(w, r)
	case hs.o.LegacySSE && r.Method == http.MethodPost && r.URL.Path == SSEPostPath:
		hs.legacyPost(w, r)
	case hs.o.LegacySSE:
		hs.count(r, "")
		http.NotFound(w, r)
	case r.Method == http.MethodPost:
		hs.post(w, r)
	case r.Method == http.MethodGet && r.Header.Get("Last-Event-Id") != "":
		hs.count(r, "resume")
		hs.get(w, r)
	case r.Method == http.MethodGet:
		hs.count(r, "")
		hs.get(w, r)
	case r.Method == http.MethodDelete:
		hs.count(r, "")
		hs.delete(w, r)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// authorized holds a request to the face's bearer rules, answering 401
// or 403 with a challenge when it fails them.
func (hs *HTTPServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	challenge := func(status int, params string) {
		if hs.o.ResourceMetadata != "" {
			params += `, resource_metadata="` + hs.o.ResourceMetadata + `"`
		}
		w.Header().Set("WWW-Authenticate", "Bearer "+strings.TrimPrefix(params, ", "))
		http.Error(w, http.StatusText(status), status)
	}
	switch {
	case hs.o.Verify != nil:
		scopes, ok := hs.o.Verify(token)
		if !ok {
			hs.count(r, "unauthorized")
			params := ""
			if hs.o.ChallengeScope != "" {
				params = `, scope="` + hs.o.ChallengeScope + `"`
			}
			challenge(http.StatusUnauthorized, params)
			return false
		}
		for _, need := range hs.o.RequiredScopes {
			if !slices.Contains(scopes, need) {
				hs.count(r, "forbidden")
				challenge(http.StatusForbidden, `error="insufficient_scope", scope="`+strings.Join(hs.o.RequiredScopes, " ")+`"`)
				return false
			}
		}
	case hs.o.Bearer != "" && token != hs.o.Bearer:
		hs.count(r, "unauthorized")
		challenge(http.StatusUnauthorized, "")
		return false
	}
	return true
}

// inbound fields the face routes by.
type httpMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name          string `json:"name"`
		URI           string `json:"uri"`
		ProgressToken json.RawMessage
		Meta          map[string]json.RawMessage `json:"_meta"`
		Arguments     struct {
			Text string `json:"text"`
		} `json:"arguments"`
	} `json:"params"`
}

func (m *httpMsg) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

func (m *httpMsg) token() string {
	if t := m.Params.Meta["progressToken"]; len(t) > 0 {
		return string(t)
	}
	return ""
}

func jsonError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = nullID
	}
	b, _ := json.Marshal(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (hs *HTTPServer) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxLineBytes))
	var m httpMsg
	if err != nil || json.Unmarshal(body, &m) != nil || m.Method == "" && len(m.ID) == 0 {
		hs.count(r, "malformed")
		jsonError(w, http.StatusBadRequest, nil, codeParse, "Parse error")
		return
	}
	key := m.Method
	if key == "" {
		key = "response"
	}
	hs.count(r, key)
	modern := r.Header.Get("Mcp-Protocol-Version") == ModernVersion || m.Params.Meta[metaProtocolVersion] != nil
	in, status, msg := hs.instanceFor(r, &m, modern)
	if in == nil {
		if status == http.StatusBadRequest && msg == "" {
			jsonError(w, status, m.ID, codeUnsupportedVersion, "Unsupported protocol version: this server speaks "+ModernVersion+" only")
			return
		}
		jsonError(w, status, nil, -32000, msg)
		return
	}
	if in.modern {
		code, why := checkHeaders(r, &m)
		if code == 0 && hs.o.CheckParams && m.Method == "tools/call" {
			code, why = hs.checkParams(r, body, m.Params.Name)
		}
		if code != 0 {
			hs.count(r, "mismatch")
			jsonError(w, http.StatusBadRequest, m.ID, code, why)
			return
		}
	}
	if !m.isRequest() {
		in.write(body)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.Method == "tools/call" && m.Params.Name == "echo" && strings.HasPrefix(m.Params.Arguments.Text, HTTPFaultPrefix) {
		hs.fault(w, r, in, strings.TrimPrefix(m.Params.Arguments.Text, HTTPFaultPrefix))
		return
	}
	st := in.open(string(m.ID), m.token(), m.Method == "subscriptions/listen", !hs.o.SSE && m.Method != "subscriptions/listen")
	if m.Method == "initialize" && in.session != "" {
		w.Header().Set("Mcp-Session-Id", in.session)
	}
	in.write(body)
	if hs.pump(w, r, st) || !in.modern {
		return
	}
	// A 2026-07-28 client that closes the answer has cancelled the
	// request: the loop hears it as notifications/cancelled.
	p, _ := json.Marshal(map[string]json.RawMessage{"requestId": m.ID})
	n, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", "notifications/cancelled", p})
	in.write(n)
}

// instanceFor finds the instance a POST goes to, or the status and
// message that refuse it.
func (hs *HTTPServer) instanceFor(r *http.Request, m *httpMsg, modern bool) (*instance, int, string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && !modern {
		in, ok := hs.sessions[sid]
		if !ok || in == nil {
			return nil, http.StatusNotFound, "Session not found"
		}
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !knownVersion(v) {
			return nil, http.StatusBadRequest, "Bad Request: Unsupported protocol version " + v
		}
		return in, 0, ""
	}
	switch {
	case m.Method == "initialize" && hs.sc.Era == EraModernOnly:
		return nil, http.StatusBadRequest, ""
	case m.Method == "initialize" && !hs.o.Stateless:
		in := hs.newInstance(false)
		hs.sessions[in.session] = in
		return in, 0, ""
	case modern && hs.sc.Era != "":
		if hs.modern == nil {
			hs.modern = hs.newInstance(true)
		}
		return hs.modern, 0, ""
	case hs.o.Stateless:
		if hs.shared == nil {
			hs.shared = hs.newInstance(false)
		}
		return hs.shared, 0, ""
	}
	return nil, http.StatusBadRequest, "Bad Request: No valid session ID provided"
}

func knownVersion(v string) bool {
	for _, s := range supportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// checkHeaders holds a 2026-07-28 request to the revision's header
// rules: MCP-Protocol-Version and Mcp-Method present and matching the
// body, Mcp-Name matching params.name or params.uri (Base64 sentinel
// decoded) where the revision requires it.
func checkHeaders(r *http.Request, m *httpMsg) (int, string) {
	var v string
	_ = json.Unmarshal(m.Params.Meta[metaProtocolVersion], &v)
	if h := r.Header.Get("Mcp-Protocol-Version"); h != v {
		return codeHeaderMismatch, fmt.Sprintf("Header mismatch: MCP-Protocol-Version %q, body %q", h, v)
	}
	if !m.isRequest() {
		return 0, ""
	}
	if h := r.Header.Get("Mcp-Method"); h != m.Method {
		return codeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Method %q, body %q", h, m.Method)
	}
	want, named := "", false
	switch m.Method {
	case "tools/call", "prompts/get":
		want, named = m.Params.Name, true
	case "resources/read":
		want, named = m.Params.URI, true
	}
	if named {
		h := r.Header.Get("Mcp-Name")
		if dec, ok := decodeSentinel(h); ok {
			h = dec
		}
		if h != want {
			return codeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Name %q, body %q", h, want)
		}
	}
	return 0, ""
}

const codeHeaderMismatch = -32020

// checkParams checks a tools/call's Mcp-Param headers against the
// x-mcp-header annotations of the tool's top-level properties in the
// current listing.
func (hs *HTTPServer) checkParams(r *http.Request, body []byte, tool string) (int, string) {
	hs.mu.Lock()
	listing := hs.sc.Tools
	if hs.relisted {
		listing = hs.sc.Relisted
	}
	hs.mu.Unlock()
	var call struct {
		Params struct {
			Arguments map[string]any `json:"arguments"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &call)
	for _, raw := range listing {
		var t struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]struct {
					Header string `json:"x-mcp-header"`
				} `json:"properties"`
			} `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Name != tool {
			continue
		}
		for prop, p := range t.InputSchema.Properties {
			v, ok := call.Params.Arguments[prop].(string)
			if p.Header == "" || !ok {
				continue
			}
			if got := r.Header.Get("Mcp-Param-" + p.Header); got != v {
				return codeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Param-%s %q, body %q", p.Header, got, v)
			}
		}
	}
	return 0, ""
}

// hexID returns a random session id.
func hexID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// instance is one run of the server loop behind the face.
type instance struct {
	hs      *HTTPServer
	session string
	modern  bool
	ctx     context.Context
	cancel  context.CancelFunc
	inW     *io.PipeWriter
	inMu    sync.Mutex

	mu      sync.Mutex
	byID    map[string]*stream
	byToken map[string]*stream
	subs    map[string]*stream
	all     map[string]*stream // by stream id, for Last-Event-ID
	get     *stream
	nextSt  int
}

// stream is one SSE (or JSON) answer the face is writing: the messages
// routed to it wait in queue until its handler writes them.
type stream struct {
	id      string
	token   string
	json    bool // a JSON answer: only the reply is written
	listen  bool
	mu      sync.Mutex
	queue   [][]byte
	wake    chan struct{}
	sent    int
	dropped bool // DropAfter has been applied
	final   bool // the reply is queued
}

func (hs *HTTPServer) newInstance(modern bool) *instance {
	ctx, cancel := context.WithCancel(hs.ctx)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	in := &instance{hs: hs, modern: modern, ctx: ctx, cancel: cancel, inW: inW,
		byID: map[string]*stream{}, byToken: map[string]*stream{}, subs: map[string]*stream{}, all: map[string]*stream{}}
	if !modern && !hs.o.Stateless && !hs.o.LegacySSE {
		in.session = hexID()
	}
	hs.wg.Add(2)
	go func() {
		defer hs.wg.Done()
		_ = serve(ctx, inR, outW, io.Discard, hs.sc, nil)
	}()
	go func() {
		defer hs.wg.Done()
		in.route(outR)
	}()
	if modern {
		// Pin the loop's era: the face is stateless, so no request of
		// the client's has to be the first.
		in.write([]byte(`{"jsonrpc":"2.0","id":"mcptest-pin","method":"server/discover","params":{"_meta":{"` + metaProtocolVersion + `":"` + ModernVersion + `","` + metaClientCapabilities + `":{}}}}`))
	}
	return in
}

func (in *instance) stop() { in.cancel() }

// write hands one message to the loop.
func (in *instance) write(msg []byte) {
	in.inMu.Lock()
	defer in.inMu.Unlock()
	line := append(bytes.ReplaceAll(bytes.TrimSpace(msg), []byte("\n"), []byte(" ")), '\n')
	_, _ = in.inW.Write(line)
}

// open registers the answer stream of request id.
func (in *instance) open(id, token string, listen, asJSON bool) *stream {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.nextSt++
	st := &stream{id: strconv.Itoa(in.nextSt), token: token, json: asJSON, listen: listen, wake: make(chan struct{}, 1)}
	in.byID[id] = st
	if token != "" {
		in.byToken[token] = st
	}
	if listen {
		in.subs[id] = st
	}
	in.all[st.id] = st
	return st
}

// route reads what the loop writes and queues each message on the
// stream it belongs to.
func (in *instance) route(out io.Reader) {
	br := bufio.NewReaderSize(out, 64<<10)
	var buf []byte
	for {
		line, err := readLine(br, &buf, MaxLineBytes)
		if err != nil {
			in.mu.Lock()
			for _, st := range in.all {
				st.push(nil, true)
			}
			in.mu.Unlock()
			return
		}
		var m httpMsg
		if json.Unmarshal(line, &m) != nil {
			continue // noise: the stdio loop's stray output has no HTTP form
		}
		if m.Method == "notifications/tools/list_changed" {
			in.hs.mu.Lock()
			in.hs.relisted = in.hs.sc.Relisted != nil
			in.hs.mu.Unlock()
		}
		msg := bytes.Clone(line)
		in.mu.Lock()
		var st *stream
		final := false
		switch {
		case m.Method == "" && len(m.ID) > 0:
			st, final = in.byID[string(m.ID)], true
			delete(in.byID, string(m.ID))
			delete(in.subs, string(m.ID))
		case m.Params.ProgressToken != nil:
			st = in.byToken[string(m.Params.ProgressToken)]
		case m.Params.Meta[metaSubscriptionID] != nil:
			st = in.subs[string(m.Params.Meta[metaSubscriptionID])]
		default:
			st = in.get
			if st == nil {
				for _, s := range in.all {
					if !s.json && !s.final && !s.listen && (st == nil || s.id > st.id) {
						st = s
					}
				}
			}
		}
		if st == nil {
			st = in.get // the legacy transport's one stream
		}
		if final && st != nil && st.token != "" {
			delete(in.byToken, st.token)
		}
		in.mu.Unlock()
		if st != nil {
			st.push(msg, final)
		}
	}
}

func (st *stream) push(msg []byte, final bool) {
	st.mu.Lock()
	if msg != nil && (!st.json || final) {
		st.queue = append(st.queue, msg)
	}
	if final {
		st.final = true
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// pump writes st's messages to w until its reply is written (true) or
// the client goes away or the face drops the stream (false).
func (hs *HTTPServer) pump(w http.ResponseWriter, r *http.Request, st *stream) bool {
	fl, _ := w.(http.Flusher)
	started := false
	for {
		st.mu.Lock()
		q := st.queue
		st.queue = nil
		final := st.final // then the queue's last message is the reply
		st.mu.Unlock()
		if st.json {
			if final && len(q) > 0 {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(q[len(q)-1])
				return true
			}
			if final {
				return true // the loop ended without a reply
			}
		} else {
			if !started {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			for i, msg := range q {
				st.sent++
				fmt.Fprintf(w, "id: %s-%d\ndata: %s\n\n", st.id, st.sent, msg)
				if reply := final && i == len(q)-1; hs.o.DropAfter > 0 && (!st.dropped || hs.o.Poll) && st.sent >= hs.o.DropAfter && !reply {
					// The messages not yet written wait for the resumption.
					st.mu.Lock()
					st.queue = append(q[i+1:len(q):len(q)], st.queue...)
					st.mu.Unlock()
					st.dropped = true
					if hs.o.Poll {
						fmt.Fprintf(w, "retry: 0\n\n")
					} else {
						fmt.Fprintf(w, "retry: 20\n\n")
					}
					if fl != nil {
						fl.Flush()
					}
					return false
				}
			}
			if fl != nil {
				fl.Flush()
			}
			if final {
				return true
			}
		}
		select {
		case <-st.wake:
		case <-r.Context().Done():
			return false
		case <-hs.ctx.Done():
			return false
		}
	}
}

func (hs *HTTPServer) get(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	hs.mu.Lock()
	in, ok := hs.sessions[sid]
	hs.mu.Unlock()
	switch {
	case hs.o.NoGET || sid == "":
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	case !ok || in == nil:
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if last := r.Header.Get("Last-Event-Id"); last != "" {
		sidPart, _, _ := strings.Cut(last, "-")
		in.mu.Lock()
		st := in.all[sidPart]
		in.mu.Unlock()
		if st == nil {
			http.Error(w, "unknown event id", http.StatusNotFound)
			return
		}
		hs.pump(w, r, st)
		return
	}
	if hs.o.EndGET {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "retry: %d\n\n", hs.o.GETRetry)
		return
	}
	in.mu.Lock()
	if in.get != nil {
		in.mu.Unlock()
		http.Error(w, "a GET stream is open already", http.StatusConflict)
		return
	}
	in.nextSt++
	st := &stream{id: strconv.Itoa(in.nextSt), wake: make(chan struct{}, 1)}
	in.get, in.all[st.id] = st, st
	in.mu.Unlock()
	hs.pump(w, r, st)
	in.mu.Lock()
	if in.get == st {
		in.get = nil
	}
	in.mu.Unlock()
}

func (hs *HTTPServer) delete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	hs.mu.Lock()
	in, ok := hs.sessions[sid]
	if ok {
		delete(hs.sessions, sid)
	}
	hs.mu.Unlock()
	if !ok || in == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	in.stop()
	w.WriteHeader(http.StatusOK)
}

// fault answers a call with one of the HTTPFaultPrefix faults.
func (hs *HTTPServer) fault(w http.ResponseWriter, r *http.Request, in *instance, kind string) {
	switch kind {
	case "html":
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
	case "wrong_type":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	case "truncated":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`)
	case "never_end":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": waiting\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-hs.ctx.Done():
		}
	case "silent":
		select {
		case <-r.Context().Done():
		case <-hs.ctx.Done():
		}
	case "status_500":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "internal error\n")
	case "accepted":
		w.WriteHeader(http.StatusAccepted)
	case "redirect_other":
		http.Redirect(w, r, "http://other.invalid/mcp", http.StatusTemporaryRedirect)
	case "big_event":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: ")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 17 << 4 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, "\n\n")
	case "expire":
		hs.ExpireSessions()
		http.Error(w, "session not found", http.StatusNotFound)
	default:
		http.Error(w, "unknown mcptest-http fault "+kind, http.StatusBadRequest)
	}
	_ = in
}

// legacyStream serves the HTTP+SSE transport's stream: a session whose
// every message goes out as an event after the endpoint event.
func (hs *HTTPServer) legacyStream(w http.ResponseWriter, r *http.Request) {
	hs.mu.Lock()
	in := hs.newInstance(false)
	in.session = hexID()
	hs.sessions[in.session] = in
	in.mu.Lock()
	in.nextSt++
	st := &stream{id: "legacy", wake: make(chan struct{}, 1)}
	in.get, in.all[st.id] = st, st
	in.mu.Unlock()
	hs.mu.Unlock()
	defer in.stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: endpoint\ndata: %s%s?sessionId=%s\n\n", hs.o.EndpointOrigin, SSEPostPath, in.session)
	w.(http.Flusher).Flush()
	for {
		st.mu.Lock()
		q := st.queue
		st.queue = nil
		st.mu.Unlock()
		for _, msg := range q {
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
		}
		w.(http.Flusher).Flush()
		select {
		case <-st.wake:
		case <-r.Context().Done():
			return
		case <-in.ctx.Done():
			return
		}
	}
}

// legacyPost takes one message of the HTTP+SSE transport: 202, and the
// answer goes out on the session's stream.
func (hs *HTTPServer) legacyPost(w http.ResponseWriter, r *http.Request) {
	hs.mu.Lock()
	in := hs.sessions[r.URL.Query().Get("sessionId")]
	hs.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxLineBytes))
	var m httpMsg
	if err != nil || json.Unmarshal(body, &m) != nil {
		hs.count(r, "malformed")
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	hs.count(r, m.Method)
	if in == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	// Everything the loop writes goes to the one stream: register
	// nothing, so route sends it to in.get.
	in.write(body)
	w.WriteHeader(http.StatusAccepted)
}

// decodeSentinel decodes the 2026-07-28 Base64 header form.
func decodeSentinel(s string) (string, bool) {
	if !strings.HasPrefix(s, "=?base64?") || !strings.HasSuffix(s, "?=") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(s[len("=?base64?") : len(s)-2])
	return string(b), err == nil
}
