package mcpserver

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// httpClient posts JSON-RPC messages to one endpoint with chosen headers.
type httpClient struct {
	t   *testing.T
	url string
	hdr http.Header
}

// post sends body with c's headers and extra, and returns the response.
func (c *httpClient) post(body string, extra ...string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header = c.hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// open initializes a legacy session and sends its id from then on.
func (c *httpClient) open() string {
	c.t.Helper()
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	decode(c.t, resp, 200)
	c.hdr.Set("Mcp-Session-Id", id)
	return id
}

// serveLegacy serves h on a test server for the rest of the test and
// returns a client with a legacy session open on it.
func serveLegacy(t *testing.T, h *HTTP) *httpClient {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		ts.Close()
	})
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
	c.open()
	return c
}

// decode reads a JSON response's body, checking its status.
func decode(t *testing.T, resp *http.Response, status int) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	if len(b) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return m
}

// events reads an SSE response's messages as they come.
func events(t *testing.T, resp *http.Response) <-chan map[string]any {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q, want an SSE stream", ct)
	}
	ch := make(chan map[string]any, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil {
					ch <- m
				}
			}
		}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-time.After(time.Minute):
		t.Fatal("nothing on the stream in a minute")
		return nil
	}
}

func errCode(m map[string]any) any {
	e, _ := m["error"].(map[string]any)
	return e["code"]
}

// The legacy era over HTTP: initialize mints a session; a request without
// it is 400, with an unknown one 404; a call that asked for progress is an
// SSE stream of progress then its response; notifications/cancelled ends
// a call, which is not answered; DELETE ends the session; GET is 405; an
// unsupported MCP-Protocol-Version is 400.
func TestHTTPLegacy(t *testing.T) {
	defer leakcheck.Check(t)()
	started := make(chan struct{}, 1)
	h := &HTTP{Server: testServer(started), Local: true}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}

	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if r := decode(t, resp, 200)["result"].(map[string]any); r["protocolVersion"] != "2025-06-18" || len(sid) != 32 {
		t.Fatalf("initialize: %v, session %q", r, sid)
	}
	if m := decode(t, c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), 400); m["error"] == nil {
		t.Errorf("without a session: %v", m)
	}
	decode(t, c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "Mcp-Session-Id", "0123"), 404)
	c.hdr.Set("Mcp-Session-Id", sid)
	c.hdr.Set("Mcp-Protocol-Version", "2025-06-18")
	decode(t, c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), 202)
	if tools := decode(t, c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), 200)["result"].(map[string]any)["tools"].([]any); len(tools) != 2 {
		t.Fatalf("tools/list: %v", tools)
	}
	if r := decode(t, c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`), 200)["result"].(map[string]any); r["content"].([]any)[0].(map[string]any)["text"] != `{"a":1}` {
		t.Fatalf("echo: %v", r)
	}
	decode(t, c.post(`{"jsonrpc":"2.0","id":4,"method":"ping"}`, "Mcp-Protocol-Version", "2099-01-01"), 400)

	// A long call, with progress, cancelled by notification: its stream
	// carries the progress and then ends unanswered.
	stream := events(t, c.post(`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block","_meta":{"progressToken":"p"}}}`))
	if p := recv(t, stream); p["method"] != "notifications/progress" || p["params"].(map[string]any)["progressToken"] != "p" {
		t.Fatalf("progress: %v", p)
	}
	<-started
	decode(t, c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}`), 202)
	for m := range stream {
		t.Errorf("after its cancellation, the call's stream carried %v", m)
	}

	req, _ := http.NewRequest(http.MethodGet, c.url, nil)
	req.Header = c.hdr.Clone()
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("GET: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequest(http.MethodDelete, c.url, nil)
	req.Header = c.hdr.Clone()
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Errorf("DELETE: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	decode(t, c.post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`), 404)
}

// The 2026-07-28 era over HTTP: no session; the headers must mirror the
// body (HeaderMismatch, 400, -32020); an unsupported version is 400 with
// the supported list; an unknown method is 404 with -32601; a call with
// progress is an SSE stream, and closing it cancels the call.
func TestHTTPModern(t *testing.T) {
	defer leakcheck.Check(t)()
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{})
	srv := testServer(started)
	srv.Tools = append(srv.Tools, Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(ctx context.Context, _ json.RawMessage, p Progress) (*Result, error) {
			p(1, 0, "waiting")
			<-ctx.Done()
			close(cancelled)
			return &Result{Text: "never sent"}, nil
		}})
	h := &HTTP{Server: srv, Local: true}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}}}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

	r := decode(t, c.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, "Mcp-Method", "server/discover"), 200)
	if res := r["result"].(map[string]any); res["resultType"] != "complete" || !strings.Contains(jsonOf(res["supportedVersions"]), "2026-07-28") {
		t.Fatalf("discover: %v", r)
	}
	if resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, "Mcp-Method", "server/discover"); resp.Header.Get("Mcp-Session-Id") != "" {
		t.Error("a 2026-07-28 response carries a session id")
	} else {
		resp.Body.Close()
	}
	for _, bad := range []struct{ body, method, name, version string }{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`, "tools/call", "", "2026-07-28"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`, "tools/list", "", "2025-11-25"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, "tools/call", "other", "2026-07-28"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, "tools/call", "", "2026-07-28"},
	} {
		if m := decode(t, c.post(bad.body, "Mcp-Method", bad.method, "Mcp-Name", bad.name, "Mcp-Protocol-Version", bad.version), 400); errCode(m) != float64(codeHeaderMism) {
			t.Errorf("%s with Mcp-Method %q, Mcp-Name %q, version %q: %v, want HeaderMismatch", bad.body, bad.method, bad.name, bad.version, m)
		}
	}
	// Mcp-Name in MCP's base64 form.
	enc := "=?base64?" + base64.StdEncoding.EncodeToString([]byte("echo")) + "?="
	if m := decode(t, c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"b":2},`+meta+`}}`,
		"Mcp-Method", "tools/call", "Mcp-Name", enc), 200); m["result"].(map[string]any)["resultType"] != "complete" {
		t.Errorf("a call: %v", m)
	}
	m := decode(t, c.post(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`,
		"Mcp-Method", "tools/list", "Mcp-Protocol-Version", "2099-01-01"), 400)
	if errCode(m) != float64(codeUnsupportedVer) || !strings.Contains(jsonOf(m), `"supported":["2026-07-28"]`) {
		t.Errorf("an unsupported version: %v", m)
	}
	if m := decode(t, c.post(`{"jsonrpc":"2.0","id":5,"method":"resources/list","params":{`+meta+`}}`, "Mcp-Method", "resources/list"), 404); errCode(m) != float64(codeNoMethod) {
		t.Errorf("an unknown method: %v", m)
	}

	// Closing the response stream is the cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"wait","_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	req.Header = c.hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "wait")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := recv(t, events(t, resp)); p["method"] != "notifications/progress" {
		t.Fatalf("progress: %v", p)
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("closing the stream did not cancel the call")
	}
}

// DNS rebinding and authentication: a local server refuses a Host or an
// Origin that is not the loopback's (403); a token, when set, is required
// (401 without it).
func TestHTTPGuards(t *testing.T) {
	defer leakcheck.Check(t)()
	h := &HTTP{Server: testServer(make(chan struct{}, 1)), Local: true, Token: "s3cret", Origins: []string{"https://app.example"}}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	const ping = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
	resp := c.post(ping)
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("without a token: %d %v", resp.StatusCode, resp.Header)
	}
	resp.Body.Close()
	decode(t, c.post(ping, "Authorization", "Bearer wrong"), 401)
	c.hdr.Set("Authorization", "Bearer s3cret")
	decode(t, c.post(ping), 200)
	decode(t, c.post(ping, "Origin", "http://localhost:5173"), 200)
	decode(t, c.post(ping, "Origin", "https://app.example"), 200)
	decode(t, c.post(ping, "Origin", "https://evil.example"), 403)
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(ping))
	req.Header = c.hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Host = "evil.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 403 {
		t.Errorf("a rebound Host: %v, %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	decode(t, c.post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), 400)
	decode(t, c.post(`not json`), 400)
}

// FuzzHTTP: whatever a POST carries, the handler answers with a status
// and never panics.
func FuzzHTTP(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":[1],"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}`,
		`{"jsonrpc":"2.0","id":3}`, `[]`, "\x00\xff",
	} {
		f.Add(s, "2026-07-28", "tools/call", "echo")
	}
	h := &HTTP{Server: &Server{Name: "f", Version: "1", Tools: []Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(_ context.Context, args json.RawMessage, _ Progress) (*Result, error) {
			return &Result{Text: string(args)}, nil
		}}}}}
	defer h.Close()
	f.Fuzz(func(t *testing.T, body, version, method, name string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name} {
			if !strings.ContainsAny(v, "\r\n\x00") {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("status %d", w.Code)
		}
	})
}

// Calls running at once are bounded whatever the era: the 2026-07-28
// path, which has no session to count them, refuses the call beyond
// maxRunning at once, as a legacy session refuses the one beyond its own
// bound.
func TestHTTPCallsBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	release := make(chan struct{})
	entered := make(chan struct{}, 2*maxRunning)
	srv := &Server{Name: "t", Version: "1", Tools: []Tool{{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(ctx context.Context, _ json.RawMessage, _ Progress) (*Result, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &Result{Text: "done"}, nil
		}}}}
	h := &HTTP{Server: srv, Local: true}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	const n = maxRunning + 8
	refused := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hold","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, i)
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "hold")
			resp, err := hc.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var m map[string]any
			if json.NewDecoder(resp.Body).Decode(&m) == nil && m["error"] != nil {
				refused <- struct{}{}
			}
		})
	}
	backstop := time.After(time.Minute)
	for seen := 0; ; {
		select {
		case <-refused:
			return
		case <-entered:
			if seen++; seen > maxRunning {
				t.Fatalf("%d calls run at once; at most %d may", seen, maxRunning)
			}
		case <-backstop:
			t.Fatal("no call refused, none over the bound, in a minute")
		}
	}
}

// A legacy call cancelled by notifications/cancelled, with no progress
// stream open, is not answered, but its POST still gets one of the two
// answers a request's POST may have (Streamable HTTP): a stream, which
// ends without a message.
func TestHTTPCancelledCallAnswered(t *testing.T) {
	defer leakcheck.Check(t)()
	started := make(chan struct{}, 1)
	h := &HTTP{Server: testServer(started), Local: true}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
	c.open()
	got := make(chan *http.Response, 1)
	go func() { got <- c.post(`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block"}}`) }()
	<-started
	decode(t, c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}`), 202)
	resp := <-got
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" || len(b) != 0 {
		t.Errorf("the cancelled call's POST: %d, Content-Type %q, body %q; want an empty stream", resp.StatusCode, ct, b)
	}
}

// The bearer token's scheme is matched in any case (RFC 9110, 11.1).
func TestHTTPBearerSchemeCase(t *testing.T) {
	defer leakcheck.Check(t)()
	h := &HTTP{Server: testServer(make(chan struct{}, 1)), Local: true, Token: "s3cret"}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`
	for auth, want := range map[string]int{"Bearer s3cret": 200, "bearer s3cret": 200, "BEARER  s3cret": 200, "Basic s3cret": 401, "Bearer s3cre": 401, "Bearers3cret": 401} {
		resp := c.post(init, "Authorization", auth)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization: %s: status %d, want %d", auth, resp.StatusCode, want)
		}
	}
}

// A page of an origin --allow-origin names can reach the server as
// browsers require: its preflight, which carries no credentials, is
// answered with CORS's leave for the methods and headers MCP uses, and
// each answer names the origin and exposes the session's header. Any
// other origin is still 403, preflight included; a loopback page, which
// the rebinding guard lets through, gets no leave; and the token still
// guards the requests.
func TestHTTPAllowedOriginCORS(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, token := range []string{"", "s3cret"} {
		h := &HTTP{Server: testServer(make(chan struct{}, 1)), Local: true, Token: token, Origins: []string{"https://app.example"}}
		ts := httptest.NewServer(h)
		preflight := func(origin string) *http.Response {
			req, _ := http.NewRequest(http.MethodOptions, ts.URL+"/mcp", nil)
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, mcp-protocol-version, mcp-session-id")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		resp := preflight("https://app.example")
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") || !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("token %q: the allowed origin's preflight: %d %v", token, resp.StatusCode, resp.Header)
		}
		if resp := preflight("https://evil.example"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("token %q: another origin's preflight: %d %v", token, resp.StatusCode, resp.Header)
		}
		// A loopback page passes the rebinding guard but was not named:
		// no CORS leave, so a browser neither sends its POST nor lets it
		// read an answer.
		if resp := preflight("http://localhost:9999"); resp.StatusCode == http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("token %q: a loopback page's preflight: %d %v", token, resp.StatusCode, resp.Header)
		}
		local := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{"Origin": {"http://127.0.0.1:9999"}}}
		if resp := local.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("token %q: an answer to a loopback page: %v", token, resp.Header)
		} else {
			resp.Body.Close()
		}
		c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{"Origin": {"https://app.example"}}}
		extra := []string{}
		if token != "" {
			if resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a POST without the token: %d", resp.StatusCode)
			} else {
				resp.Body.Close()
			}
			extra = []string{"Authorization", "Bearer " + token}
		}
		resp = c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, extra...)
		if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
			t.Errorf("token %q: the POST's answer: %v", token, resp.Header)
		}
		decode(t, resp, 200)
		ts.Close()
		h.Close()
	}
}

// A client that posts a call and never reads its reply holds neither a
// running slot once the tool has returned (the reply still unwritten),
// nor its handler and session call past the write timeout: 32 such
// clients used to take every slot (and the replies' memory) for as long
// as they kept their connections.
func TestHTTPUnreadReplyHoldsNothing(t *testing.T) {
	defer leakcheck.Check(t)()
	big := strings.Repeat("<", 8<<20) // 8 MiB, unescaped: more than the sockets buffer
	srv := &Server{Name: "t", Version: "1", Tools: []Tool{{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(context.Context, json.RawMessage, Progress) (*Result, error) { return &Result{Text: big}, nil }}}}
	for _, tc := range []struct {
		name string
		wait time.Duration
	}{
		{"slot given back before the reply is written", time.Hour},
		{"handler ends at the write timeout", 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			released := make(chan struct{}, 1)
			h := &HTTP{Server: srv, Local: true, writeWait: tc.wait, released: func() { released <- struct{}{} }}
			ts := httptest.NewServer(h)
			defer ts.Close()
			defer h.Close()
			c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
			sid := c.open()
			h.mu.Lock()
			s := h.sessions[sid]
			h.mu.Unlock()

			// A connection whose receive buffer is small, which never reads.
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			conn, err := d.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big"}}`
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
				ts.Listener.Addr(), sid, len(body), body)
			select {
			case <-released:
			case <-time.After(time.Minute): // a backstop
				t.Fatal("the running slot was not given back")
			}
			if tc.wait == time.Hour {
				// The reply, unread, is still being written: the call is
				// the session's, its slot no longer.
				if s.idle() || len(h.running) != 0 {
					t.Fatalf("session idle %v, %d slots held", s.idle(), len(h.running))
				}
				return
			}
			ended := make(chan struct{})
			go func() {
				s.wg.Wait()
				close(ended)
			}()
			select {
			case <-ended:
			case <-time.After(time.Minute): // a backstop: the write timeout is 100 ms
				t.Fatal("the session's call outlived the write timeout")
			}
		})
	}
}

// A session idle past sessionIdle is over when it is next used, whether
// or not a new session has swept it.
func TestHTTPSessionExpiresUnused(t *testing.T) {
	defer leakcheck.Check(t)()
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	h := &HTTP{Server: testServer(nil), Local: true, now: clock}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
	c.open()
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	mu.Lock()
	now = now.Add(sessionIdle)
	mu.Unlock()
	decode(t, c.post(ping), 200) // used within its time: it lives on
	mu.Lock()
	now = now.Add(sessionIdle + time.Second)
	mu.Unlock()
	decode(t, c.post(ping), 404)
	decode(t, c.post(ping), 404)
}

// A request refused before its credentials are checked (no token, or a
// Host or Origin that may not reach the server) gets a connection that
// closes after the answer, so refusals cannot hold connections idle.
func TestHTTPRefusalClosesConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	h := &HTTP{Server: testServer(nil), Local: true, Token: "s3cret-token"}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"another origin", http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer s3cret-token"}}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{}`))
		req.Header = tc.header
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || !resp.Close {
			t.Errorf("%s: status %d, connection closed %v; want %d, closed", tc.name, resp.StatusCode, resp.Close, tc.status)
		}
	}
}

// Replies are not HTML-escaped: "<" stays one byte.
func TestHTTPReplyNotEscaped(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	c := serveLegacy(t, &HTTP{Server: testServer(nil), Local: true})
	resp := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":"<&>"}}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `<&>`) || strings.Contains(string(b), `\u003c`) {
		t.Fatalf("reply %s", b)
	}
}

// The bodies being read at once are bounded all together: while a slow
// client holds most of the budget, a request that does not fit is
// refused 503 with Retry-After, whether its length is declared or not,
// and is served once the budget is given back. A body declared larger
// than a message may be is refused before any of it is read. Without the
// budget, every connection could hold a message of maxBody for the
// read timeout.
func TestHTTPBodiesBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	moved := make(chan int64, 16)
	h := &HTTP{Server: testServer(nil), Local: true, bodies: 1000, bodyMoved: func(n int64) { moved <- n }}
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	wait := func(want int64) {
		t.Helper()
		select {
		case n := <-moved:
			if n != want {
				t.Fatalf("the budget moved by %d, want %d", n, want)
			}
		case <-time.After(time.Minute): // a backstop
			t.Fatalf("the budget did not move by %d", want)
		}
	}
	c := &httpClient{t: t, url: ts.URL + "/mcp", hdr: http.Header{}}
	c.open()
	wait(int64(len(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)))
	<-moved

	// A slow client declares 900 bytes and sends 10.
	slow, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(slow, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 900\r\n\r\n{\"jsonrpc\"", ts.Listener.Addr())
	wait(900)

	ping := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", 150) + `"}}`
	resp := c.post(ping)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("a 503 without Retry-After")
	}
	decode(t, resp, http.StatusServiceUnavailable)

	// Of unknown length (chunked): refused at the read that overdraws.
	req, _ := http.NewRequest(http.MethodPost, c.url, io.MultiReader(strings.NewReader(ping)))
	req.Header = c.hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	if req.ContentLength != 0 || req.TransferEncoding != nil {
		t.Fatalf("the request declares its length (%d, %v)", req.ContentLength, req.TransferEncoding)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, http.StatusServiceUnavailable)
	// What its reads took before the one refused, if they arrived in
	// pieces, was given back before the answer.
	var sum int64
	for drained := false; !drained; {
		select {
		case n := <-moved:
			sum += n
		default:
			drained = true
		}
	}
	if sum != 0 {
		t.Fatalf("the refused body left %d taken", sum)
	}

	// Declared larger than any message: refused, the budget untouched.
	big, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	fmt.Fprintf(big, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ts.Listener.Addr(), maxBody+1)
	r, err := http.ReadResponse(bufio.NewReader(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body declared at maxBody+1: status %d, want 413", r.StatusCode)
	}

	slow.Close() // its handler gives its 900 bytes back
	wait(-900)
	resp = c.post(ping)
	wait(int64(len(ping)))
	wait(-int64(len(ping)))
	decode(t, resp, http.StatusOK)
	select {
	case n := <-moved:
		t.Fatalf("the budget moved by %d more", n)
	default:
	}
}

// Over HTTP too, a message that is not UTF-8 is a parse error (400),
// its id not echoed.
func TestHTTPRepliesAreUTF8(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	c := serveLegacy(t, &HTTP{Server: testServer(nil), Local: true})
	m := decode(t, c.post("{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}"), http.StatusBadRequest)
	if m["id"] != nil || errCode(m) != float64(codeParse) {
		t.Errorf("reply %v", m)
	}
}
