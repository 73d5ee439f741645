package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// httpServer starts mcptest's HTTP face on a loopback socket.
func httpServer(t *testing.T, sc mcptest.Scenario, o mcptest.HTTPOptions) (*mcptest.HTTPServer, string) {
	t.Helper()
	face := mcptest.NewHTTP(sc, o)
	ts := httptest.NewServer(face)
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	return face, ts.URL + "/mcp"
}

// interceptedServer is httpServer with intercept in front of the face:
// it sees each request's body first and answers the requests it takes
// (true); the face answers the rest. It returns the URL of /mcp.
func interceptedServer(t *testing.T, o mcptest.HTTPOptions, intercept func(w http.ResponseWriter, r *http.Request, body []byte) bool) string {
	t.Helper()
	return interceptedServerOf(t, mcptest.Scenario{}, o, intercept)
}

// interceptedServerOf is interceptedServer of the server sc describes.
func interceptedServerOf(t *testing.T, sc mcptest.Scenario, o mcptest.HTTPOptions, intercept func(w http.ResponseWriter, r *http.Request, body []byte) bool) string {
	t.Helper()
	face := mcptest.NewHTTP(sc, o)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if intercept(w, r, body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		face.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	return ts.URL + "/mcp"
}

func dial(t *testing.T, url string, r Remote, cfg Config) *Client {
	t.Helper()
	r.URL = url
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := Dial(ctx, r, cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return c
}

func echo(t *testing.T, c *Client, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := c.CallTool(ctx, "echo", JSONArgs([]byte(`{"text":`+strconv.Quote(text)+`}`)), CallOptions{})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if len(res.Content) != 1 || res.Content[0].Text != text {
		t.Fatalf("echo answered %+v", res.Content)
	}
}

// closeHTTP closes a remote client and checks its evidence.
func closeHTTP(t *testing.T, c *Client) Exit {
	t.Helper()
	exit, err := c.Close()
	if err != nil || exit.How != ExitDisconnected {
		t.Fatalf("Close = %+v, %v", exit, err)
	}
	return exit
}

// TestStreamableEras meets the server in each era it offers, in both
// answer shapes, and checks the headers each request carries.
func TestStreamableEras(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, tc := range []struct {
		name    string
		sc      mcptest.Scenario
		o       mcptest.HTTPOptions
		era     Era
		version string
	}{
		{"legacy json", mcptest.Scenario{}, mcptest.HTTPOptions{}, EraLegacy, "2025-11-25"},
		{"legacy sse", mcptest.Scenario{}, mcptest.HTTPOptions{SSE: true}, EraLegacy, "2025-11-25"},
		{"legacy stateless", mcptest.Scenario{}, mcptest.HTTPOptions{Stateless: true, NoGET: true}, EraLegacy, "2025-11-25"},
		{"modern json", mcptest.Scenario{Era: mcptest.EraModern}, mcptest.HTTPOptions{}, EraModern, "2026-07-28"},
		{"modern sse", mcptest.Scenario{Era: mcptest.EraModernOnly}, mcptest.HTTPOptions{SSE: true}, EraModern, "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			face, url := httpServer(t, tc.sc, tc.o)
			c := dial(t, url, Remote{}, Config{})
			if c.Era() != tc.era || c.ProtocolVersion() != tc.version {
				t.Fatalf("era %v %s, want %v %s", c.Era(), c.ProtocolVersion(), tc.era, tc.version)
			}
			tools, err := c.ListTools(context.Background())
			if err != nil || len(tools) == 0 {
				t.Fatalf("ListTools = %d tools, %v", len(tools), err)
			}
			echo(t, c, "héllo")
			h := face.LastHeaders("POST tools/call")
			if h.Get("Mcp-Protocol-Version") != tc.version || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != "echo" {
				t.Fatalf("tools/call headers %v", h)
			}
			if !strings.Contains(h.Get("Accept"), "application/json") || !strings.Contains(h.Get("Accept"), "text/event-stream") {
				t.Fatalf("Accept %q", h.Get("Accept"))
			}
			session := tc.era == EraLegacy && !tc.o.Stateless
			if (h.Get("Mcp-Session-Id") != "") != session {
				t.Fatalf("Mcp-Session-Id %q, want one: %v", h.Get("Mcp-Session-Id"), session)
			}
			exit := closeHTTP(t, c)
			if got := face.Requests("DELETE"); (got == 1) != session || !strings.Contains(exit.Status, map[bool]string{true: "DELETE 200", false: "no session"}[session]) {
				t.Fatalf("DELETE sent %d times, exit %q", got, exit.Status)
			}
		})
	}
}

// TestStreamableConcurrent runs many calls at once, each its own POST.
func TestStreamableConcurrent(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, sse := range []bool{false, true} {
		_, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{SSE: sse})
		c := dial(t, url, Remote{}, Config{})
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() { echo(t, c, "call "+strconv.Itoa(i)) })
		}
		wg.Wait()
		closeHTTP(t, c)
	}
}

// TestStreamableProgressAndResume: progress on a call's SSE stream
// renews its idle deadline, and a stream the server drops mid-call is
// resumed with Last-Event-ID after the retry it asked for.
func TestStreamableProgressAndResume(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, drop := range []int{0, 1} {
		face, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{SSE: true, DropAfter: drop})
		c := dial(t, url, Remote{}, Config{})
		// Four steps of 150 ms: past an idle timeout of 400 ms in all,
		// within it between two.
		res, err := c.CallTool(context.Background(), "progress", JSONArgs([]byte(`{"steps":4,"interval_ms":150}`)), CallOptions{IdleTimeout: 400 * time.Millisecond, MaxTimeout: waitFor})
		if err != nil || res.IsError {
			t.Fatalf("drop %d: progress = %+v, %v", drop, res, err)
		}
		if got := face.Requests("GET resume"); got != drop {
			t.Fatalf("drop %d: resumed %d times", drop, got)
		}
		closeHTTP(t, c)
	}
}

// TestStreamableGETStream: the server's own notifications arrive on the
// GET stream; a server without one (405) is served all the same.
func TestStreamableGETStream(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{})
	c := dial(t, url, Remote{}, Config{})
	// Dial returns once the GET stream is open.
	if _, err := c.CallTool(context.Background(), "notify", JSONArgs([]byte(`{"method":"notifications/tools/list_changed"}`)), CallOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.ToolsChanged():
	case <-time.After(waitFor):
		t.Fatal("list_changed never arrived on the GET stream")
	}
	// A server request on the stream is answered with a POST of its own
	// (ping with {}, the rest -32601), as on stdio.
	for method, want := range map[string]string{"ping": `"result":{}`, "sampling/createMessage": `"code":-32601`} {
		res, err := c.CallTool(context.Background(), "server_request", JSONArgs([]byte(`{"method":"`+method+`"}`)), CallOptions{})
		if err != nil || !strings.Contains(res.Content[0].Text, want) {
			t.Fatalf("server_request %s: %+v, %v", method, res, err)
		}
	}
	closeHTTP(t, c)

	_, url = httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{NoGET: true})
	c = dial(t, url, Remote{}, Config{})
	echo(t, c, "no GET stream")
	closeHTTP(t, c)
}

// TestStreamableModernListen: in the 2026-07-28 era list_changed comes
// on the subscriptions/listen stream, and closing it at Close is its
// cancellation.
func TestStreamableModernListen(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face, url := httpServer(t, mcptest.Scenario{Era: mcptest.EraModern, Relisted: []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`)}}, mcptest.HTTPOptions{})
	c := dial(t, url, Remote{}, Config{})
	if face.Requests("POST subscriptions/listen") != 1 {
		t.Fatalf("listen posted %d times", face.Requests("POST subscriptions/listen"))
	}
	if _, err := c.CallTool(context.Background(), "relist", JSONArgs(nil), CallOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.ToolsChanged():
	case <-time.After(waitFor):
		t.Fatal("list_changed never arrived on the listen stream")
	}
	if face.Requests("GET") != 0 {
		t.Fatal("a modern client opened the GET stream")
	}
	closeHTTP(t, c)
}

// TestStreamableCancel: a call given up on is cancelled: by
// notifications/cancelled in the legacy eras, by closing its answer in
// 2026-07-28; the server hears of it either way.
func TestStreamableCancel(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, sc := range []mcptest.Scenario{{}, {Era: mcptest.EraModern}} {
		face, url := httpServer(t, sc, mcptest.HTTPOptions{SSE: true})
		c := dial(t, url, Remote{}, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := c.CallTool(ctx, "hang", JSONArgs(nil), CallOptions{})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hang = %v", err)
		}
		// The notification is posted aside: the server hears of it soon
		// after the call returned.
		deadline := time.Now().Add(waitFor)
		for {
			res, err := c.CallTool(context.Background(), "cancellations", JSONArgs(nil), CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(res.Content[0].Text, `"hang"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("era %v: the server never heard of the cancellation: %q", c.Era(), res.Content[0].Text)
			}
		}
		if notified := face.Requests("POST notifications/cancelled"); (notified == 1) != (c.Era() == EraLegacy) {
			t.Fatalf("era %v: notifications/cancelled posted %d times", c.Era(), notified)
		}
		closeHTTP(t, c)
	}
}

// TestStreamableBadAnswers: each unusable answer fails its call with an
// error naming the HTTP status and content type, within the call's
// deadline, and the client serves the next call.
func TestStreamableBadAnswers(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{})
	c := dial(t, url, Remote{}, Config{})
	for _, tc := range []struct {
		fault, want string
	}{
		{"html", "HTTP 200 OK (text/html): a request's answer must be application/json or text/event-stream"},
		{"wrong_type", "(text/plain)"},
		{"truncated", "HTTP 200 OK (application/json): the body is not the reply"},
		{"status_500", "HTTP 500 Internal Server Error (text/plain)"},
		{"accepted", "202 Accepted carries no reply"},
		{"redirect_other", "redirect to another origin"},
		{"big_event", "sse: a line longer than 16777280 bytes"},
		{"never_end", "timed out"},
		{"silent", "timed out"},
	} {
		idle := 300 * time.Millisecond
		if tc.fault == "big_event" {
			idle = waitFor // 17 MiB must arrive before the fault is seen
		}
		_, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"`+mcptest.HTTPFaultPrefix+tc.fault+`"}`)), CallOptions{IdleTimeout: idle})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: err = %v, want %q", tc.fault, err, tc.want)
		}
		if c.Err() != nil {
			t.Fatalf("%s killed the client: %v", tc.fault, c.Err())
		}
		echo(t, c, "still here after "+tc.fault)
	}
	closeHTTP(t, c)
}

// TestStreamableSessionExpired: a 404 on the session kills the client
// with ErrSessionExpired (its owner starts a new session), failing the
// calls in flight; nothing is replayed.
func TestStreamableSessionExpired(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{})
	c := dial(t, url, Remote{}, Config{})
	_, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"`+mcptest.HTTPFaultPrefix+`expire"}`)), CallOptions{})
	var dead *DeadError
	if !errors.As(err, &dead) || !errors.Is(err, ErrSessionExpired) || !strings.Contains(err.Error(), "session") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"x"}`)), CallOptions{}); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("a call after expiry = %v", err)
	}
	closeHTTP(t, c)
	if face.Requests("POST tools/call") != 1 {
		t.Fatalf("tools/call posted %d times: a call was replayed or sent after death", face.Requests("POST tools/call"))
	}
	// A new client is a new session.
	c2 := dial(t, url, Remote{}, Config{})
	echo(t, c2, "new session")
	closeHTTP(t, c2)
}

// TestLegacySSE: with TransportAuto a server of the 2024-11-05 HTTP+SSE
// transport is found by the fallback; an endpoint on another origin is
// refused.
func TestLegacySSE(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{LegacySSE: true})
	c := dial(t, url, Remote{}, Config{})
	if c.Era() != EraLegacy {
		t.Fatalf("era %v", c.Era())
	}
	echo(t, c, "over sse")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { echo(t, c, "sse "+strconv.Itoa(i)) })
	}
	wg.Wait()
	closeHTTP(t, c)
	if face.Requests("POST initialize") != 1 {
		t.Fatalf("initialize posted %d times to the legacy endpoint", face.Requests("POST initialize"))
	}

	_, url = httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{LegacySSE: true, EndpointOrigin: "http://elsewhere.invalid"})
	_, err := Dial(context.Background(), Remote{URL: url, Transport: TransportSSE}, Config{})
	if err == nil || !strings.Contains(err.Error(), "not on the stream's origin") {
		t.Fatalf("cross-origin endpoint: %v", err)
	}
}

// TestNoLegacyFallbackOnModernRefusal: with transport auto, an
// initialize refused 400 with one of 2026-07-28's own errors (here
// -32022 from a server of that revision alone, met by a client held to
// the 2025 era) comes from a Streamable HTTP server: the legacy SSE
// stream is not tried, and the server's reason is the error.
func TestNoLegacyFallbackOnModernRefusal(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face, url := httpServer(t, mcptest.Scenario{Era: mcptest.EraModernOnly}, mcptest.HTTPOptions{})
	_, err := Dial(context.Background(), Remote{URL: url}, Config{Era: EraLegacy})
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32022 {
		t.Fatalf("Dial: %v", err)
	}
	if got := face.Requests("GET"); got != 0 {
		t.Fatalf("%d GETs for a legacy SSE stream", got)
	}
}

// TestRemoteUnreachable: no server, a server that says nothing, a
// bearer token missing or present.
func TestRemoteUnreachable(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if _, err := Dial(context.Background(), Remote{URL: "http://" + addr + "/mcp"}, Config{}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("closed port: %v", err)
	}

	// Accepts, reads, says nothing: the handshake timeout bounds it.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var held []net.Conn
	var mu sync.Mutex
	conns.Go(func() {
		for {
			cn, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, cn)
			mu.Unlock()
		}
	})
	start := time.Now()
	_, err = Dial(context.Background(), Remote{URL: "http://" + silent.Addr().String() + "/mcp"}, Config{HandshakeTimeout: 300 * time.Millisecond})
	if err == nil || time.Since(start) > waitFor {
		t.Fatalf("silent server: %v", err)
	}
	_ = silent.Close()
	conns.Wait()
	for _, cn := range held {
		_ = cn.Close()
	}

	_, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{Bearer: "s3cret", ResourceMetadata: "http://127.0.0.1/.well-known/oauth-protected-resource"})
	_, err = Dial(context.Background(), Remote{URL: url}, Config{})
	if !errors.Is(err, ErrHTTP) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "resource_metadata") {
		t.Fatalf("no token: %v", err)
	}
	c := dial(t, url, Remote{Header: http.Header{"Authorization": {"Bearer s3cret"}}}, Config{})
	echo(t, c, "authorized")
	closeHTTP(t, c)
}

// tokenAuth is an Authorizer that has a token only once it was
// challenged (as an OAuth client learns where to get one from a 401),
// or never (none: a person must log in first).
type tokenAuth struct {
	mu         sync.Mutex
	token      string
	none       bool
	challenges int
}

func (a *tokenAuth) Authorize(_ context.Context, h http.Header) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.challenges > 0 && !a.none {
		h.Set("Authorization", "Bearer "+a.token)
	}
	return nil
}

var errNoLogin = errors.New("no login saved")

func (a *tokenAuth) Challenge(context.Context, *http.Response) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.challenges++
	if a.none {
		return false, errNoLogin
	}
	return true, nil
}

// TestAuthorizer: a request refused 401 is sent again once the
// Authorizer answers the challenge, over Streamable HTTP and the legacy
// HTTP+SSE transport alike; an Authorizer that cannot answer fails the
// handshake with ErrAuthorization wrapping its error, and never makes the
// client change eras or transports on it.
func TestAuthorizer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, legacy := range []bool{false, true} {
		face, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{Bearer: "s3cret", LegacySSE: legacy})
		auth := &tokenAuth{token: "s3cret"}
		c := dial(t, url, Remote{Auth: auth}, Config{})
		echo(t, c, "authorized")
		closeHTTP(t, c)
		if auth.challenges != 1 || face.Requests("POST unauthorized")+face.Requests("GET unauthorized") != 1 {
			t.Fatalf("legacy %v: %d challenges, %d refusals; want one of each (the token is kept)", legacy, auth.challenges, face.Requests("POST unauthorized")+face.Requests("GET unauthorized"))
		}

		face, url = httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{Bearer: "s3cret", LegacySSE: legacy})
		_, err := Dial(context.Background(), Remote{URL: url, Auth: &tokenAuth{none: true}}, Config{})
		var he *HTTPError
		if !errors.Is(err, ErrAuthorization) || !errors.Is(err, errNoLogin) || !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
			t.Fatalf("legacy %v, no login: %v", legacy, err)
		}
		if n := face.Requests("POST unauthorized") + face.Requests("GET unauthorized"); n != 1 {
			t.Fatalf("legacy %v, no login: %d requests refused, want the first alone (no fallback)", legacy, n)
		}
	}
}

// failingReader returns its bytes, then err; failed records a read
// past them.
type failingReader struct {
	b      []byte
	err    error
	failed bool
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		f.failed = true
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// TestReadBody: a JSON body is read whole up to the cap and one byte
// past it (so that a longer one is seen as such), into the buffer given,
// which grows to an announced length only when that is small; a failed
// read is returned with what arrived.
func TestReadBody(t *testing.T) {
	const limit = 1 << 20
	for _, tc := range []struct {
		name     string
		size     int
		announce int64 // Content-Length; -1 unknown
		want     int
	}{
		{"empty", 0, 0, 0},
		{"small, announced", 100, 100, 100},
		{"small, unannounced", 100, -1, 100},
		{"16 KiB, announced", 16 << 10, 16 << 10, 16 << 10},
		{"at the cap", limit, -1, limit},
		{"past the cap", limit + 100, limit + 100, limit + 1},
		{"a lie: 1 MiB announced, 10 bytes sent", 10, limit, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(strings.Repeat("x", tc.size))
			resp := &http.Response{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: tc.announce}
			got, err := readBody(make([]byte, 0, 16), resp, limit)
			if err != nil || len(got) != tc.want || string(got) != string(body[:tc.want]) {
				t.Fatalf("read %d bytes, %v; want %d", len(got), err, tc.want)
			}
			if tc.announce > maxPooledLine && tc.size < 1<<10 && cap(got) > 1<<10 {
				t.Errorf("a body announced as %d bytes and %d long took a buffer of %d", tc.announce, tc.size, cap(got))
			}
		})
	}
	boom := errors.New("connection reset")
	resp := &http.Response{Body: io.NopCloser(&failingReader{b: []byte("partial"), err: boom}), ContentLength: -1}
	got, err := readBody(nil, resp, limit)
	if !errors.Is(err, boom) || string(got) != "partial" {
		t.Errorf("a failed read: %q, %v", got, err)
	}
}

// An error a remote request meets never quotes the URL's query (it may
// carry an API key): net/http's own errors name the whole URL, so they
// are unwrapped, and the URL is named without its query.
func TestRemoteErrorsHideQuery(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: every request is refused
	for _, tr := range []Transport{TransportAuto, TransportStreamable, TransportSSE} {
		_, err := Dial(context.Background(), Remote{URL: "http://" + addr + "/mcp?api_key=SECRET-Q", Transport: tr}, Config{})
		if err == nil || strings.Contains(err.Error(), "SECRET-Q") || !strings.Contains(err.Error(), addr+"/mcp") {
			t.Errorf("transport %d: %v", tr, err)
		}
	}
	// A URL Dial refuses outright is not repeated either.
	for _, bad := range []string{"ftp://u:SECRET-P@h/?k=SECRET-Q", "http:///mcp?k=SECRET-Q", "%zz?k=SECRET-Q"} {
		_, err := Dial(context.Background(), Remote{URL: bad}, Config{})
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("Dial(%q): %v", bad, err)
		}
	}
}

// TestStreamablePolled: a server that ends a long call's stream after
// every progress event (retry: 0) is resumed as long as each resumption
// brings something, past maxResumes in all, and the call gets its reply.
func TestStreamablePolled(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const steps = maxResumes + 4
	face, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{SSE: true, DropAfter: 1, Poll: true})
	c := dial(t, url, Remote{}, Config{})
	res, err := c.CallTool(context.Background(), "progress", JSONArgs([]byte(`{"steps":`+strconv.Itoa(steps)+`,"interval_ms":1}`)), CallOptions{MaxTimeout: waitFor})
	if err != nil || res.IsError {
		t.Fatalf("a polled call: %+v, %v", res, err)
	}
	if got := face.Requests("GET resume"); got <= maxResumes {
		t.Fatalf("resumed %d times", got)
	}
	closeHTTP(t, c)
}

// TestStreamableGETStreamBacksOff: a GET stream the server ends at once,
// empty, with retry: 0, is not opened again in a tight loop: each time
// it brings nothing counts as a failure, and the wait grows from a
// second. (A lower bound: a slow machine only makes the waits longer.)
func TestStreamableGETStreamBacksOff(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{EndGET: true})
	start := time.Now()
	c := dial(t, url, Remote{}, Config{})
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for face.Requests("GET") < 2 {
		if time.Since(start) > waitFor {
			t.Fatal("the GET stream was not opened again")
		}
		<-tick.C
	}
	if took := time.Since(start); took < defaultRetryWait {
		t.Fatalf("the GET stream was opened twice in %v", took)
	}
	closeHTTP(t, c)

	// One that asks for a wait of its own (a server that polls, a
	// proxy's idle timeout) is reopened after it, without backing off:
	// four openings take some 450 ms, where a backoff would take 7 s.
	face, url = httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{EndGET: true, GETRetry: 150})
	start = time.Now()
	c = dial(t, url, Remote{}, Config{})
	for face.Requests("GET") < 4 {
		if time.Since(start) > waitFor {
			t.Fatal("the GET stream was not opened again")
		}
		<-tick.C
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("four openings of a stream that asked for 150 ms took %v", took)
	}
	closeHTTP(t, c)
}

// TestStreamableCancelDoesNotHold: a call given up on at its deadline
// returns then, though the server takes the notifications/cancelled
// that follows no faster than the call (the post goes on its own).
func TestStreamableCancelDoesNotHold(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	held := make(chan struct{}, 1)
	url := interceptedServer(t, mcptest.HTTPOptions{}, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
		if !bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
			return false
		}
		select {
		case held <- struct{}{}:
		default:
		}
		<-r.Context().Done() // never answered
		return true
	})
	c := dial(t, url, Remote{}, Config{WriteTimeout: waitFor})
	start := time.Now()
	_, err := c.CallTool(context.Background(), "slow", JSONArgs([]byte(`{"ms":60000}`)), CallOptions{IdleTimeout: 200 * time.Millisecond, MaxTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("a call past its deadline: %v", err)
	}
	if took := time.Since(start); took > waitFor/2 {
		t.Fatalf("the call returned %v after it began: it waited for its cancellation's post", took)
	}
	select { // the cancellation was posted all the same
	case <-held:
	case <-time.After(waitFor):
		t.Fatal("notifications/cancelled was never posted")
	}
	closeHTTP(t, c)
}

// TestStreamableServerRequestDoesNotHold: a server's request on a call's
// stream is answered without holding the call: the reply that follows it
// is read at once, though the server never takes the answer's post.
func TestStreamableServerRequestDoesNotHold(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	held := make(chan struct{}, 1)
	url := interceptedServer(t, mcptest.HTTPOptions{}, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case m.Method == "tools/call" && m.Params.Name == "pinged":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"after the ping\"}]}}\n\n", m.ID)
		case string(m.ID) == `"srv-1"`: // the answer to the ping: never taken
			held <- struct{}{}
			<-r.Context().Done()
		default:
			return false
		}
		return true
	})
	c := dial(t, url, Remote{}, Config{WriteTimeout: waitFor})
	start := time.Now()
	res, err := c.CallTool(context.Background(), "pinged", JSONArgs([]byte(`{}`)), CallOptions{})
	if err != nil || res.Content[0].Text != "after the ping" {
		t.Fatalf("a call whose stream carried a ping: %+v, %v", res, err)
	}
	if took := time.Since(start); took > waitFor/2 {
		t.Fatalf("the call took %v: it waited for the ping's answer to be taken", took)
	}
	select {
	case <-held:
	case <-time.After(waitFor):
		t.Fatal("the ping was never answered")
	}
	closeHTTP(t, c)
}

// TestLegacySSEPostBounds: over the legacy transport each call's POST is
// its own: one the endpoint holds ends at the call's deadline, one it
// TestLegacySSEHTMLAnswer: over the legacy HTTP+SSE transport an HTML
// page answering a call's POST with 200 (a login page, a proxy's) fails
// that call with a fault naming the status and content type, as over
// Streamable HTTP, rather than leaving it to wait out its deadline for a
// reply the stream will never bring.
func TestLegacySSEHTMLAnswer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url := interceptedServer(t, mcptest.HTTPOptions{LegacySSE: true}, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method != http.MethodPost || !bytes.Contains(body, []byte(`"text":"page"`)) {
			return false
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body>Sign in</body></html>")
		return true
	})
	c := dial(t, url, Remote{Transport: TransportSSE}, Config{})
	defer closeHTTP(t, c)
	_, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"page"}`)), CallOptions{MaxTimeout: waitFor})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusOK || he.ContentType != "text/html" {
		t.Fatalf("CallTool: %v, want a fault naming HTTP 200 and text/html", err)
	}
	echo(t, c, "the connection serves on")
}

// TestLegacySSEAccepted202HTML: a legacy server that accepts messages
// with 202 and an HTML body (Express's res.status(202).send("Accepted"))
// has accepted them: its replies come on the stream.
func TestLegacySSEAccepted202HTML(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{LegacySSE: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w = htmlTyped{w}
		}
		face.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { face.Close(); ts.Close() })
	c := dial(t, ts.URL+"/mcp", Remote{Transport: TransportSSE}, Config{})
	defer closeHTTP(t, c)
	echo(t, c, "accepted with a page")
}

// htmlTyped types every answer text/html, as Express's send() of a string
// does.
type htmlTyped struct{ http.ResponseWriter }

func (h htmlTyped) WriteHeader(code int) {
	h.Header().Set("Content-Type", "text/html; charset=utf-8")
	h.ResponseWriter.WriteHeader(code)
}

// refuses fails that call alone, and the client serves the next call.
func TestLegacySSEPostBounds(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url := interceptedServer(t, mcptest.HTTPOptions{LegacySSE: true}, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		switch {
		case r.Method != http.MethodPost:
			return false
		case bytes.Contains(body, []byte(`"name":"held"`)):
			<-r.Context().Done()
		case bytes.Contains(body, []byte(`"name":"refused"`)):
			http.Error(w, "no", http.StatusInternalServerError)
		default:
			return false
		}
		return true
	})
	c := dial(t, url, Remote{Transport: TransportSSE}, Config{WriteTimeout: waitFor})
	start := time.Now()
	_, err := c.CallTool(context.Background(), "held", JSONArgs(nil), CallOptions{IdleTimeout: 200 * time.Millisecond, MaxTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || time.Since(start) > waitFor/2 {
		t.Fatalf("a held POST: %v after %v", err, time.Since(start))
	}
	var he *HTTPError
	if _, err := c.CallTool(context.Background(), "refused", JSONArgs(nil), CallOptions{}); !errors.As(err, &he) || he.Status != http.StatusInternalServerError {
		t.Fatalf("a refused POST: %v", err)
	}
	echo(t, c, "after both")
	closeHTTP(t, c)
}

// TestLegacySSEAsideDuringClose: messages posted aside while the client
// closes (cancellations, answers to the server's requests, as a death
// finds them) are dropped or waited for, never started under shutdown's
// wait.
func TestLegacySSEAsideDuringClose(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, url := httpServer(t, mcptest.Scenario{}, mcptest.HTTPOptions{LegacySSE: true})
	for range 10 {
		c := dial(t, url, Remote{Transport: TransportSSE}, Config{})
		s := c.car.(*streamCarrier)
		line := appendNotification(nil, "notifications/message", []byte(`{"level":"info","data":"x"}`))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 16 {
					s.sendAside(outbound{method: "notifications/message"}, line)
				}
			})
		}
		closeHTTP(t, c)
		wg.Wait()
		s.aside.mu.Lock()
		n := s.aside.n
		s.aside.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d posts aside outlived the close", n)
		}
	}
}

// TestRemoteErrorsHideEchoedCredentials: a server or proxy that echoes
// the request's credentials in an error page (its Authorization, a
// configured key header, the token cut short by the preview's window)
// does not put them into the error, which status, logs and audit
// repeat; the rest of the page is kept.
func TestRemoteErrorsHideEchoedCredentials(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	long := strings.Repeat("T", 150) + "LONGTOKENEND"
	for _, tc := range []struct {
		name    string
		headers map[string]string
		echo    func(r *http.Request) string
		secrets []string
	}{
		{"bearer", map[string]string{"Authorization": "Bearer s3cret-token"},
			func(r *http.Request) string { return "refused " + r.Header.Get("Authorization") }, []string{"s3cret-token"}},
		{"token alone", map[string]string{"Authorization": "Bearer s3cret-token"},
			func(r *http.Request) string { return "bad token s3cret-token, try again" }, []string{"s3cret-token"}},
		{"key header", map[string]string{"X-Api-Key": "k3y-value"},
			func(r *http.Request) string { return "key " + r.Header.Get("X-Api-Key") + " unknown" }, []string{"k3y-value"}},
		{"cut short", map[string]string{"Authorization": "Bearer " + long},
			func(r *http.Request) string { return strings.Repeat("x", 60) + r.Header.Get("Authorization") }, []string{"TTTT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, tc.echo(r))
			}))
			defer ts.Close()
			hdr := http.Header{}
			for k, v := range tc.headers {
				hdr.Set(k, v)
			}
			for _, tr := range []Transport{TransportStreamable, TransportSSE} {
				_, err := Dial(context.Background(), Remote{URL: ts.URL + "/mcp", Transport: tr, Header: hdr}, Config{Era: EraLegacy})
				var he *HTTPError
				if !errors.As(err, &he) || !strings.Contains(he.Body, "[redacted:") {
					t.Fatalf("transport %d: %v", tr, err)
				}
				for _, s := range tc.secrets {
					if strings.Contains(err.Error(), s) {
						t.Errorf("transport %d: %v", tr, err)
					}
				}
			}
		})
	}
}

// TestRemoteErrorsHideEchoedHeaders: a server that echoes the request's
// credentials in its answer's headers (a 401's WWW-Authenticate naming
// the token it refused, a Content-Type made of one) does not put them
// into the error either.
func TestRemoteErrorsHideEchoedHeaders(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const token = "tok-7f3a9c1e5b2d4f6a8c0e"
	for _, tc := range []struct {
		name    string
		headers map[string]string
		answer  func(w http.ResponseWriter, r *http.Request)
		kept    string
	}{
		{"challenge", map[string]string{"Authorization": "Bearer " + token}, func(w http.ResponseWriter, r *http.Request) {
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="Token '`+tok+`' has expired"`)
			w.WriteHeader(http.StatusUnauthorized)
		}, `error="invalid_token"`},
		{"challenge key header", map[string]string{"X-Api-Key": token}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `ApiKey error="unknown key `+r.Header.Get("X-Api-Key")+`"`)
			w.WriteHeader(http.StatusUnauthorized)
		}, "unknown key"},
		{"content type", map[string]string{"Authorization": "Bearer " + token}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/"+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			w.WriteHeader(http.StatusBadGateway)
		}, "text/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(tc.answer))
			defer ts.Close()
			hdr := http.Header{}
			for k, v := range tc.headers {
				hdr.Set(k, v)
			}
			_, err := Dial(context.Background(), Remote{URL: ts.URL + "/mcp", Transport: TransportStreamable, Header: hdr}, Config{})
			if !errors.Is(err, ErrHTTP) || !strings.Contains(err.Error(), tc.kept) || !strings.Contains(err.Error(), "[redacted:") {
				t.Fatalf("the server's answer is not quoted, or nothing was taken out: %v", err)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), token[:12]) {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}

// TestRemoteErrorsHideEchoedURL: a server whose error page quotes the
// request's URL ("Cannot POST /mcp?api_key=…", as Express's does) or the
// user information it decoded does not put the URL's query values or
// its password into the error, nor into the log lines of the era's and
// the transport's fallbacks that carry it: over either transport, with
// the value as sent or decoded, a token in the user alone, the query of
// a request redirected since, and a legacy endpoint event naming
// another origin. A short value ("json") is left.
func TestRemoteErrorsHideEchoedURL(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const key = "qk-91d0c2f7e4a8b6"
	cannot := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "Cannot %s %s", r.Method, r.URL.RequestURI())
	}
	for _, tc := range []struct {
		name   string
		tr     Transport
		query  string // after /mcp
		user   string // userinfo
		answer http.HandlerFunc
		hidden []string
	}{
		{"api_key", TransportAuto, "?api_key=" + key, "", cannot, []string{key}},
		{"key", TransportAuto, "?format=json&key=" + key, "", cannot, []string{key}},
		{"sse", TransportSSE, "?key=" + key, "", cannot, []string{key}},
		{"decoded", TransportStreamable, "?key=qk%2F91d0+c2f7%3De4a8", "", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "%s: key %s refused", r.URL.RequestURI(), r.URL.Query().Get("key"))
		}, []string{"qk%2F91d0+c2f7%3De4a8", "qk/91d0 c2f7=e4a8", "91d0"}},
		{"bare", TransportStreamable, "?" + key, "", cannot, []string{key}},
		{"password", TransportStreamable, "", "ingest:pw-5566aa7", func(w http.ResponseWriter, r *http.Request) {
			user, pass, _ := r.BasicAuth()
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "user %s with password %s refused", user, pass)
		}, []string{"pw-5566aa7"}},
		{"token as user", TransportStreamable, "", "ghp_5566aa77bb", func(w http.ResponseWriter, r *http.Request) {
			user, _, _ := r.BasicAuth()
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "token %s refused", user)
		}, []string{"ghp_5566aa77bb"}},
		{"redirected", TransportStreamable, "?key=" + key, "", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/mcp" {
				http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, "/mcp?key=%s moved: no %s here", key, r.URL.Path)
		}, []string{key}},
		{"endpoint event", TransportSSE, "?key=" + key, "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: endpoint\ndata: http://elsewhere.example/messages?%s\n\n", r.URL.RawQuery)
		}, []string{key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(tc.answer)
			defer ts.Close()
			u := ts.URL
			if tc.user != "" {
				u = "http://" + tc.user + "@" + strings.TrimPrefix(u, "http://")
			}
			var logs syncbuf.Buffer
			log := zerolog.New(&logs)
			_, err := Dial(context.Background(), Remote{URL: u + "/mcp" + tc.query, Transport: tc.tr}, Config{Logger: &log, HandshakeTimeout: waitFor})
			if err == nil || !strings.Contains(err.Error(), "[redacted:") {
				t.Fatalf("the server's answer is not quoted, or nothing was taken out: %v", err)
			}
			for _, h := range tc.hidden {
				if strings.Contains(err.Error(), h) {
					t.Errorf("the error holds %q: %v", h, err)
				}
				if strings.Contains(logs.String(), h) {
					t.Errorf("the log holds %q: %s", h, logs.String())
				}
			}
			if strings.Contains(tc.query, "format=json") && strings.Contains(err.Error(), "[redacted:query format]") {
				t.Errorf("a short value was taken out: %v", err)
			}
		})
	}
}

// TestHTTPUnsentCallNotAbandoned: a call given up on before its POST is
// made never reaches the server: it is not reported abandoned
// (CallOptions.Abandoned is for a request written), nor cancelled with a
// notifications/cancelled for a request the server never got, over
// either transport.
func TestHTTPUnsentCallNotAbandoned(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, tr := range []Transport{TransportStreamable, TransportSSE} {
		o := mcptest.HTTPOptions{LegacySSE: tr == TransportSSE}
		face, url := httpServer(t, mcptest.Scenario{}, o)
		c := dial(t, url, Remote{Transport: tr}, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		abandoned := false
		_, err := c.CallTool(ctx, "echo", JSONArgs([]byte(`{"text":"x"}`)), CallOptions{Abandoned: func(<-chan struct{}) { abandoned = true }})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("transport %d: %v", tr, err)
		}
		echo(t, c, "after")
		closeHTTP(t, c) // waits for the posts made aside
		if n := face.Requests("POST tools/call"); n != 1 {
			t.Errorf("transport %d: tools/call posted %d times, want 1 (the echo after)", tr, n)
		}
		if abandoned {
			t.Errorf("transport %d: Abandoned was called for a call never sent", tr)
		}
		if n := face.Requests("POST notifications/cancelled"); n != 0 {
			t.Errorf("transport %d: notifications/cancelled posted %d times", tr, n)
		}
	}
}

// A POST's answer settles only the request it carried: an answer that
// names another call in flight (a misrouting proxy, a confused gateway)
// is stray, and fails the call it answered without quoting the other's
// result. Both calls may be different programs'. Under 2025-03-26 the
// answer may be a batch.
func TestStreamableAnswerSettlesOnlyItsRequest(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, shape := range []string{"application/json", "text/event-stream", "batch"} {
		t.Run(shape, func(t *testing.T) {
			sc := mcptest.Scenario{}
			if shape == "batch" {
				sc.ProtocolVersion = "2025-03-26"
			}
			bArrived, aAnswered := make(chan json.RawMessage, 1), make(chan struct{})
			u := interceptedServerOf(t, sc, mcptest.HTTPOptions{}, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						Arguments struct{ Text string } `json:"arguments"`
					} `json:"params"`
				}
				if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" {
					return false
				}
				answer := func(id json.RawMessage, text string) {
					line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, id, text)
					switch shape {
					case "text/event-stream":
						line = "data: " + line + "\n\n"
						w.Header().Set("Content-Type", shape)
					case "batch":
						line = "[" + line + "]"
						w.Header().Set("Content-Type", "application/json")
					default:
						w.Header().Set("Content-Type", shape)
					}
					io.WriteString(w, line)
				}
				switch m.Params.Arguments.Text {
				case "A": // answers with B's id, once B is in flight
					answer(<-bArrived, "A's result")
				case "B":
					bArrived <- m.ID
					<-aAnswered
					answer(m.ID, "B's result")
				}
				return true
			})
			c := dial(t, u, Remote{}, Config{})
			defer closeHTTP(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			call := func(text string) (string, error) {
				res, err := c.CallTool(ctx, "echo", JSONArgs([]byte(`{"text":"`+text+`"}`)), CallOptions{})
				if err != nil {
					return "", err
				}
				return res.Content[0].Text, nil
			}
			b := make(chan string, 1)
			go func() {
				text, err := call("B")
				b <- fmt.Sprint(text, err)
			}()
			textA, errA := call("A")
			close(aAnswered)
			if errA == nil || strings.Contains(errA.Error(), "result") {
				t.Errorf("call A, answered with B's id: %q, %v; want its failure, quoting nothing of the answer", textA, errA)
			}
			if got := <-b; got != "B's result<nil>" {
				t.Errorf("call B: %q, want its own result", got)
			}
		})
	}
}
