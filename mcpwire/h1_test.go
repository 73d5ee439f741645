package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// countingServer is an httptest server that counts the connections it
// accepted and reports each one's close.
type countingServer struct {
	*httptest.Server
	mu     sync.Mutex
	opened int
	closed chan struct{} // one token per closed connection
}

func newCountingServer(t *testing.T, h http.Handler) *countingServer {
	t.Helper()
	cs := &countingServer{closed: make(chan struct{}, 64)}
	cs.Server = httptest.NewUnstartedServer(h)
	cs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			cs.mu.Lock()
			cs.opened++
			cs.mu.Unlock()
		case http.StateClosed, http.StateHijacked:
			cs.closed <- struct{}{}
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

func (cs *countingServer) conns() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.opened
}

// h1Post POSTs a small body to url and returns the answer's body.
func h1Post(t *testing.T, hc *http.Client, ctx context.Context, url string) (string, error) {
	t.Helper()
	return h1Send(t, hc, ctx, http.MethodPost, url)
}

// h1Send sends a request of method to url (a POST with a small body)
// and returns the answer's body.
func h1Send(t *testing.T, hc *http.Client, ctx context.Context, method, url string) (string, error) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"x":1}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// The caller's transport keeps one connection for sequential exchanges,
// Content-Length and chunked bodies alike, and a new one when the
// server says Connection: close or a body was left unread.
func TestH1Reuse(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cs := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/chunked":
			_, _ = w.Write([]byte("part one, "))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("part two"))
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte("closing"))
		case "/long":
			_, _ = w.Write([]byte(strings.Repeat("x", 64<<10)))
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	hc, err := HTTPClient(HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	if _, ok := hc.Transport.(*fastTransport); !ok {
		t.Fatalf("the client's transport is %T", hc.Transport)
	}
	ctx := context.Background()
	for i := range 20 {
		path := "/"
		if i%2 == 1 {
			path = "/chunked"
		}
		body, err := h1Post(t, hc, ctx, cs.URL+path)
		if err != nil || (body != "ok" && body != "part one, part two") {
			t.Fatalf("exchange %d: %q, %v", i, body, err)
		}
	}
	if n := cs.conns(); n != 1 {
		t.Fatalf("%d connections for 20 sequential exchanges, want 1", n)
	}
	if body, err := h1Post(t, hc, ctx, cs.URL+"/close"); err != nil || body != "closing" {
		t.Fatalf("close: %q, %v", body, err)
	}
	<-cs.closed
	if _, err := h1Post(t, hc, ctx, cs.URL); err != nil || cs.conns() != 2 {
		t.Fatalf("after Connection: close: %v, %d connections", err, cs.conns())
	}
	// A body closed unread leaves a connection that cannot be reused.
	req, _ := http.NewRequest(http.MethodGet, cs.URL+"/long", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	<-cs.closed
	if _, err := h1Post(t, hc, ctx, cs.URL); err != nil || cs.conns() != 3 {
		t.Fatalf("after an unread body: %v, %d connections", err, cs.conns())
	}
}

// An idle connection the server closed is not used again: the check
// before reuse sees its end, and a new connection serves the request.
func TestH1ServerClosedIdle(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cs := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	cs.Config.SetKeepAlivesEnabled(true)
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	if _, err := h1Post(t, hc, context.Background(), cs.URL); err != nil {
		t.Fatal(err)
	}
	// The server ends its idle connections (as a server's keep-alive
	// timeout does), and the client is told nothing.
	cs.CloseClientConnections()
	<-cs.closed
	if body, err := h1Post(t, hc, context.Background(), cs.URL); err != nil || body != "ok" || cs.conns() != 2 {
		t.Fatalf("after the server closed the idle connection: %q, %v, %d connections", body, err, cs.conns())
	}
}

// A server that closes a reused connection as the request arrives,
// without answering (its keep-alive ran out as the request crossed it, or
// it went down having read it). The request was written whole, so the
// server may have acted on it: a POST, a tools/call among them, fails and
// is never sent again; a GET, which may be sent twice, goes once more on
// a new connection (net/http's rule).
func TestH1ClosedAsReused(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	// answer reads a request and answers it, and says which method it
	// had ("" when none came).
	answer := func(c net.Conn, br *bufio.Reader) string {
		req, err := http.ReadRequest(br)
		if err != nil {
			return ""
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return req.Method
	}
	// Each connection answers one request and hangs up on the next as
	// soon as it starts arriving; the method that opened each goes to
	// opened.
	opened := make(chan string, 4)
	url := rawHTTPServer(t, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			opened <- answer(c, br)
			_, _ = br.Peek(1)
			_ = c.Close()
		}
	})
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	get := func() (string, error) { return h1Send(t, hc, ctx, http.MethodGet, url) }

	if body, err := h1Post(t, hc, ctx, url); err != nil || body != "ok" || <-opened != http.MethodPost {
		t.Fatalf("the first POST: %q, %v", body, err)
	}
	if body, err := h1Post(t, hc, ctx, url); err == nil {
		t.Fatalf("a POST the server hung up on was answered %q: it was sent again", body)
	}
	// The next connection's first request is the GET below, not the
	// POST again.
	if body, err := get(); err != nil || body != "ok" {
		t.Fatalf("a GET after the POST: %q, %v", body, err)
	}
	if m := <-opened; m != http.MethodGet {
		t.Fatalf("the second connection began with %q, not the GET: the POST was sent again", m)
	}
	// That connection hangs up on the next GET, which goes again.
	if body, err := get(); err != nil || body != "ok" {
		t.Fatalf("a GET the server hung up on: %q, %v", body, err)
	}
	if m := <-opened; m != http.MethodGet {
		t.Fatalf("the third connection began with %q", m)
	}
}

// A request whose write fails on a reused connection reached no server
// whole, so it goes once more on a new connection, a POST too.
func TestH1WriteFailedOnReuse(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	var dials []*scriptConn
	tr := newH1Transport(func(context.Context, string, string) (net.Conn, error) {
		c := &scriptConn{}
		if len(dials) == 0 {
			c.failWrite = 2 // the first connection fails its second request
		}
		dials = append(dials, c)
		return c, nil
	}, 4)
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	for i := range 2 {
		if body, err := h1Post(t, hc, context.Background(), "http://127.0.0.1:9/mcp"); err != nil || body != "ok" {
			t.Fatalf("exchange %d: %q, %v", i, body, err)
		}
	}
	if len(dials) != 2 || dials[0].writes != 2 || dials[1].writes != 1 {
		t.Fatalf("%d connections", len(dials))
	}
}

// When the new connection for a resend cannot be dialled, the request's
// body is closed all the same, as a RoundTripper must close it; the
// caller's request is left as it was (the resend is a copy).
func TestH1ResendDialFails(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	refused := errors.New("connection refused")
	dials := 0
	tr := newH1Transport(func(context.Context, string, string) (net.Conn, error) {
		if dials++; dials > 1 {
			return nil, refused
		}
		return &scriptConn{failWrite: 2}, nil
	}, 4)
	defer tr.CloseIdleConnections()
	const url = "http://127.0.0.1:9/mcp"
	if body, err := h1Post(t, &http.Client{Transport: tr}, context.Background(), url); err != nil || body != "ok" {
		t.Fatalf("the first exchange: %q, %v", body, err)
	}
	closed := false
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.GetBody = func() (io.ReadCloser, error) {
		return closeFunc{strings.NewReader(`{}`), func() { closed = true }}, nil
	}
	body := req.Body
	if _, err := tr.RoundTrip(req); !errors.Is(err, refused) || !closed {
		t.Fatalf("RoundTrip: %v; the remade body closed: %v", err, closed)
	}
	if req.Body != body {
		t.Fatal("the resend changed the caller's request")
	}
}

// closeFunc is a body whose Close calls a function.
type closeFunc struct {
	io.Reader
	f func()
}

func (c closeFunc) Close() error { c.f(); return nil }

// scriptConn is a connection whose every write is a whole request,
// answered "ok" at once, but its failWrite-th (from 1), which fails as a
// write to a peer that has gone does.
type scriptConn struct {
	net.Conn  // the methods the transport does not call
	failWrite int
	writes    int
	pending   bytes.Buffer
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.writes++
	if c.writes == c.failWrite {
		return 0, syscall.EPIPE
	}
	c.pending.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	return len(p), nil
}

func (c *scriptConn) Read(p []byte) (int, error)  { return c.pending.Read(p) }
func (c *scriptConn) Close() error                { return nil }
func (c *scriptConn) SetDeadline(time.Time) error { return nil }

// rawHTTPServer listens on a loopback port and runs serve with the
// listener on a goroutine of its own, to answer by hand; the test's
// cleanup closes the listener and waits for serve. It returns the URL of
// /mcp there.
func rawHTTPServer(t *testing.T, serve func(ln net.Listener)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { serve(ln) })
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

// A request's context ends its exchange while the body is read (the
// read returns at once), and the connection is not reused; a response
// head beyond its bound is refused.
func TestH1CancelAndBounds(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	release := make(chan struct{})
	cs := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			_, _ = w.Write([]byte("start"))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer close(release)
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cs.URL+"/slow", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := resp.Body.Read(make([]byte, 16)); read <- err }()
	cancel()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("a read went on after its context ended")
		}
	case <-time.After(waitFor):
		t.Fatal("the read did not end with its context")
	}
	_ = resp.Body.Close()
	if body, err := h1Post(t, hc, context.Background(), cs.URL); err != nil || body != "ok" || cs.conns() != 2 {
		t.Fatalf("after the cancelled exchange: %q, %v, %d connections", body, err, cs.conns())
	}

	// A head of more than a MiB.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = http.ReadRequest(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Huge: "+strings.Repeat("a", 2<<20)+"\r\n\r\n")
	})
	_, err = h1Post(t, hc, context.Background(), "http://"+ln.Addr().String()+"/")
	_ = ln.Close()
	wg.Wait()
	if err == nil || !strings.Contains(err.Error(), "head longer than 1 MiB") {
		t.Fatalf("a 2 MiB head: %v", err)
	}
}

// Informational answers before the final one are skipped, as net/http's
// Transport skips them, and the connection is kept; an endless run of
// them ends at the head's bound.
func TestH1Informational(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	hint := "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
	url := rawHTTPServer(t, func(ln net.Listener) {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for range 2 {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, hint+hint+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
		// The third request is answered with hints alone, past the bound.
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		for sent := 0; sent <= maxResponseHead; sent += len(hint) {
			if _, err := io.WriteString(c, hint); err != nil {
				return
			}
		}
	})
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	// The server serves one connection: a second would never be
	// answered, and the backstop would end the test.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for i := range 2 {
		if body, err := h1Post(t, hc, ctx, url); err != nil || body != "ok" {
			t.Fatalf("exchange %d: %q, %v", i, body, err)
		}
	}
	if body, err := h1Post(t, hc, ctx, url); err == nil || ctx.Err() != nil {
		t.Fatalf("an endless run of 1xx answers gave %q, %v", body, err)
	}
}

// scriptedServer answers each request read on each connection it
// accepts with answer (the connection's index, the request's index on
// it); answer returns false to hang up. seen lists the requests read,
// as "METHOD@connection", in order. The test's cleanup closes every
// connection and waits for the server's goroutines.
func scriptedServer(t *testing.T, answer func(conn, n int, req *http.Request, c net.Conn) bool) (url string, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var log []string
	var open []net.Conn
	url = rawHTTPServer(t, func(ln net.Listener) {
		var wg sync.WaitGroup
		defer wg.Wait()
		defer func() {
			mu.Lock()
			for _, c := range open {
				_ = c.Close()
			}
			mu.Unlock()
		}()
		for ci := 0; ; ci++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					mu.Lock()
					log = append(log, req.Method+"@"+string(rune('0'+ci)))
					mu.Unlock()
					if !answer(ci, n, req, c) {
						return
					}
				}
			})
		}
	})
	return url, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

// A connection is kept only after a final answer whose body ends by its
// framing and when neither side asked to close it: not after a 101 (the
// connection then speaks another protocol), nor after a chunked answer
// to a request that asked to close.
func TestH1KeepsOnlyWhatMayBeReused(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, tc := range []struct {
		name   string
		answer string
		close  bool
	}{
		{"101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", false},
		{"chunked to a close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, seen := scriptedServer(t, func(_, _ int, req *http.Request, c net.Conn) bool {
				a := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
				if req.Method == http.MethodGet {
					a = tc.answer
				}
				_, err := io.WriteString(c, a)
				return err == nil // kept open, whatever was asked
			})
			tr := newH1Transport((&net.Dialer{}).DialContext, 4)
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Close = tc.close
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if body, err := h1Post(t, &http.Client{Transport: tr}, context.Background(), url); err != nil || body != "ok" {
				t.Fatalf("the POST after: %q, %v", body, err)
			}
			want := []string{"GET@0", "POST@1"}
			if tc.name == "chunked" {
				want = []string{"GET@0", "POST@0"}
			}
			if got := seen(); !slices.Equal(got, want) {
				t.Fatalf("the server saw %v, want %v", got, want)
			}
		})
	}
}

// A request the server began to answer on a reused connection before it
// hung up is not sent again, though it is one that may go twice: the
// server had it (net/http resends only when not one byte came back).
func TestH1NoResendAfterPartialAnswer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url, seen := scriptedServer(t, func(ci, n int, _ *http.Request, c net.Conn) bool {
		if n == 1 {
			_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
			return false
		}
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return err == nil
	})
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if body, err := h1Send(t, hc, ctx, http.MethodGet, url); err != nil || body != "ok" {
		t.Fatalf("the first GET: %q, %v", body, err)
	}
	if body, err := h1Send(t, hc, ctx, http.MethodGet, url); err == nil {
		t.Fatalf("a GET whose answer broke off was answered %q", body)
	}
	if got := seen(); !slices.Equal(got, []string{"GET@0", "GET@0"}) {
		t.Fatalf("the server saw %v: the GET it began to answer was sent again", got)
	}
}

// A server that is not speaking HTTP is told so at its first line, as
// net/http does, not when the call's deadline ends a wait for the rest
// of a head.
func TestH1NotHTTP(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url, _ := scriptedServer(t, func(_, _ int, _ *http.Request, c net.Conn) bool {
		_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
		_, _ = c.Read(make([]byte, 1)) // held open until the client goes
		return false
	})
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := h1Post(t, hc, ctx, url); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "malformed HTTP response") {
		t.Fatalf("an SSH banner: %v (context: %v)", err, ctx.Err())
	}
}

// A request with a field net/http's Transport refuses is refused here
// too, and nothing reaches the server (Request.Write would send it with
// its line break turned into a space).
func TestH1InvalidHeader(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url, seen := scriptedServer(t, func(_, _ int, _ *http.Request, c net.Conn) bool {
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return err == nil
	})
	tr := newH1Transport((&net.Dialer{}).DialContext, 4)
	defer tr.CloseIdleConnections()
	for _, h := range []http.Header{{"X-Api-Key": {"secret\nX-Evil: 1"}}, {"X Key": {"v"}}} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		req.Header = h
		if resp, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header field") {
			if resp != nil {
				_ = resp.Body.Close()
			}
			t.Fatalf("%v: %v", h, err)
		}
	}
	if body, err := h1Post(t, &http.Client{Transport: tr}, context.Background(), url); err != nil || body != "ok" {
		t.Fatalf("a valid request after: %q, %v", body, err)
	}
	if got := seen(); !slices.Equal(got, []string{"POST@0"}) {
		t.Fatalf("the server saw %v", got)
	}
}

// When the context ends as a resend begins (between the exchange that
// failed and the resend's dial, here as the failed connection is
// closed), the callback that expires the first connection acts on that
// connection, not on whatever the transport holds next: after a failed
// dial, nothing.
func TestH1ResendCancelled(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &expiringConn{scriptConn: scriptConn{failWrite: 2}, onClose: cancel, expired: make(chan struct{})}
	refused := errors.New("dial: operation was canceled")
	dials := 0
	tr := newH1Transport(func(context.Context, string, string) (net.Conn, error) {
		if dials++; dials > 1 {
			return nil, refused
		}
		return first, nil
	}, 4)
	defer tr.CloseIdleConnections()
	const url = "http://127.0.0.1:9/mcp"
	if body, err := h1Post(t, &http.Client{Transport: tr}, context.Background(), url); err != nil || body != "ok" {
		t.Fatalf("the first exchange: %q, %v", body, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{}`))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(`{}`)), nil }
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a request whose context ended was answered")
	}
	<-first.expired // a panic on the callback's goroutine would end the test first
}

// expiringConn is a scriptConn whose Close calls onClose and whose
// deadline moved to the past closes expired.
type expiringConn struct {
	scriptConn
	onClose func()
	expired chan struct{}
	once    sync.Once
}

func (c *expiringConn) Close() error { c.onClose(); return nil }

func (c *expiringConn) SetDeadline(d time.Time) error {
	if d.Before(time.Now()) {
		c.once.Do(func() { close(c.expired) })
	}
	return nil
}
