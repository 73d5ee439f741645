package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testServer has an echo tool and a tool that runs until cancelled,
// reporting progress once it starts.
func testServer(started chan<- struct{}) *Server {
	return &Server{Name: "t", Version: "1", Tools: []Tool{
		{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Call: func(_ context.Context, args json.RawMessage, _ Progress) (*Result, error) {
			return &Result{Text: string(args)}, nil
		}},
		{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`), Call: func(ctx context.Context, _ json.RawMessage, p Progress) (*Result, error) {
			p(1, 2, "started")
			started <- struct{}{}
			<-ctx.Done()
			return &Result{Text: "cancelled"}, nil
		}},
	}}
}

// stdioSession runs Serve over pipes and returns a function that sends one
// line and one that reads the next message.
func stdioSession(t *testing.T, s *Server) (send func(string), next func() map[string]any, done func()) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background(), inR, outW); outW.Close() }()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	send = func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next = func() map[string]any {
		if !sc.Scan() {
			t.Fatalf("no reply: %v", sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("reply %q: %v", sc.Bytes(), err)
		}
		return m
	}
	done = func() {
		inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return after its input ended")
		}
	}
	return send, next, done
}

func TestLegacySession(t *testing.T) {
	defer leakcheck.Check(t)()
	started := make(chan struct{}, 1)
	send, next, done := stdioSession(t, testServer(started))
	defer done()
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if r := next()["result"].(map[string]any); r["protocolVersion"] != "2025-06-18" {
		t.Fatalf("initialize: %v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if tools := next()["result"].(map[string]any)["tools"].([]any); len(tools) != 2 {
		t.Fatalf("tools/list: %v", tools)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`)
	if c := next()["result"].(map[string]any)["content"].([]any)[0].(map[string]any); c["text"] != `{"a":1}` {
		t.Fatalf("echo: %v", c)
	}
	// A cancelled call is not answered; the next request is.
	send(`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block","_meta":{"progressToken":7}}}`)
	if p := next(); p["method"] != "notifications/progress" || p["params"].(map[string]any)["progressToken"] != float64(7) {
		t.Fatalf("progress: %v", p)
	}
	<-started
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if m := next(); m["id"] != float64(4) {
		t.Fatalf("after a cancelled call, got %v, want the ping's reply", m)
	}
	for _, c := range []struct {
		line string
		want float64
	}{
		{`{"jsonrpc":"2.0","id":5,"method":"resources/list"}`, codeNoMethod},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope"}}`, codeInvalidParams},
		{`not json`, codeParse},
		{`[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, codeInvalidRequest},
	} {
		send(c.line)
		m := next()
		if e, _ := m["error"].(map[string]any); e == nil || e["code"] != c.want {
			t.Errorf("%s: %v, want error %v", c.line, m, c.want)
		}
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestModernSession(t *testing.T) {
	defer leakcheck.Check(t)()
	send, next, done := stdioSession(t, testServer(make(chan struct{}, 1)))
	defer done()
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`)
	r := next()["result"].(map[string]any)
	if r["resultType"] != "complete" || !strings.Contains(jsonOf(r["supportedVersions"]), "2026-07-28") {
		t.Fatalf("discover: %v", r)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta + `}}`)
	if r := next()["result"].(map[string]any); r["resultType"] != "complete" {
		t.Fatalf("call: %v", r)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`)
	if e := next()["error"].(map[string]any); e["code"] != float64(-32022) {
		t.Fatalf("an unknown version: %v", e)
	}
}

// FuzzServe: whatever a host sends, Serve answers or ignores it line by
// line and returns when the input ends; it never panics.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`[]`, `{"id":1}`, "\x00\xff",
	} {
		f.Add(s)
	}
	s := &Server{Name: "f", Version: "1", Tools: []Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(_ context.Context, args json.RawMessage, _ Progress) (*Result, error) {
			return &Result{Text: string(args)}, nil
		}}}}
	f.Fuzz(func(t *testing.T, in string) {
		if err := s.Serve(context.Background(), strings.NewReader(in), io.Discard); err != nil && !strings.Contains(err.Error(), "longer than") {
			t.Fatal(err)
		}
	})
}

// Serve returns when its context ends, its input still open and silent:
// a host that keeps its pipe while capbridge mcp is told to stop (a
// signal ends the context) does not keep it serving. The call running is
// cancelled and waited for.
func TestServeEndsWithContext(t *testing.T) {
	started := make(chan struct{}, 1)
	inR, inW := io.Pipe()
	defer inW.Close() // ends the goroutine still reading
	outR, outW := io.Pipe()
	defer outR.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- testServer(started).Serve(ctx, inR, outW) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a backstop: it returns at once
		t.Fatal("Serve went on after its context ended, its input open")
	}
}

// stalled is a host's end of capbridge's output that takes nothing: each
// Write waits until the host goes (close).
type stalled struct {
	gone  chan struct{}
	tried atomic.Int32
}

func (s *stalled) Write(p []byte) (int, error) {
	s.tried.Add(1)
	<-s.gone
	return 0, io.ErrClosedPipe
}

// A host that stops reading holds a bounded number of replies, and its
// requests wait: the server stops reading them. Its calls keep their
// places until their replies are queued, so no more run than there are
// places, queued replies and the one being written; the calls sent after
// are neither run nor read. And the host
// does not keep the server from stopping: once ctx ends, Serve returns
// with the reply it was writing still untaken. Before, every call ran
// and kept its reply in a goroutine of its own (2000 for 2000 calls),
// and Serve waited for the host for ever.
func TestStdioHostNotReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		s := &Server{Name: "t", Version: "1", Tools: []Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`),
			Call: func(_ context.Context, args json.RawMessage, _ Progress) (*Result, error) {
				ran.Add(1)
				return &Result{Text: string(args)}, nil
			}}}}
		inR, inW := io.Pipe()
		out := &stalled{gone: make(chan struct{})}
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- s.Serve(ctx, inR, out) }()
		const calls = 200
		var sent atomic.Int32
		go func() {
			for i := range calls {
				if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"n":%d}}}`+"\n", i, i); err != nil {
					return
				}
				sent.Add(1)
			}
		}()
		synctest.Wait() // everything is waiting for the host
		if n := ran.Load(); n > maxInFlight+maxQueued+1 {
			t.Errorf("%d calls ran with no reply taken, want at most %d", n, maxInFlight+maxQueued+1)
		}
		if n := sent.Load(); n == calls {
			t.Errorf("all %d calls were read with no reply taken", n)
		}
		if out.tried.Load() != 1 {
			t.Errorf("%d writes tried, want the one the host does not take", out.tried.Load())
		}
		stop() // SIGTERM
		synctest.Wait()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		default:
			t.Error("Serve went on after its context ended, waiting for the host to read")
		}
		close(out.gone)
		inR.Close()
	})
}

// A message that is not UTF-8 is a parse error, answered with a null id:
// its id (or progress token) would otherwise be echoed, and the reply
// would not be UTF-8 either.
func TestStdioRepliesAreUTF8(t *testing.T) {
	defer leakcheck.Check(t)()
	send, next, done := stdioSession(t, testServer(make(chan struct{}, 1)))
	defer done()
	for _, line := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"_meta\":{\"progressToken\":\"\xfe\"}}}",
	} {
		send(line)
		if m := next(); m["id"] != nil || errCode(m) != float64(codeParse) {
			t.Errorf("%q: %v", line, m)
		}
	}
	send(`{"jsonrpc":"2.0","id":"é","method":"ping"}`)
	if m := next(); m["id"] != "é" || m["error"] != nil {
		t.Errorf("a UTF-8 id: %v", m)
	}
}
