package bridge

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// Every denial and fatal code of docs/capwire.md §5–§6 is produced here by
// a real bridge over its real call socket, through the Go client where it
// can observe the code and through raw frames where it cannot (a client
// that cancels drops the late reply; a client never sends a malformed
// frame). Every denial code is produced by at least one test.

// cannedEnv makes the test binary, re-executed as a server, serve
// cannedTools instead of running tests: mcptest's catalogue cannot answer
// a result the bridge must refuse (structured content the converter
// rejects, a block missing its text, more markers than a frame holds) or a
// JSON-RPC error of a chosen code, and those are what a hostile or buggy
// server sends.
const cannedEnv = "CAPBRIDGE_TEST_CANNED_SERVER"

// cannedGateEnv names a FIFO. The canned server's first call of "gated"
// opens it for reading, which blocks until the test opens it for
// writing, and reads it to EOF: a test releases every gated call at the
// moment it chooses, with no timer involved. Each gated call then
// answers cannedGatedBytes of text.
const cannedGateEnv = "CAPBRIDGE_TEST_CANNED_GATE"

const cannedGatedBytes = 512 << 10

func init() {
	if os.Getenv(cannedEnv) == "1" {
		serveCanned(os.Stdin, os.Stdout)
		os.Exit(0)
	}
}

// cannedMarkers is how many unknown-type blocks many_markers answers:
// each is 13 bytes of JSON but 19 of MessagePack once reduced to an
// "other" marker, so 4000 fit a 64 KiB line and overflow a 64 KiB frame.
const cannedMarkers = 4000

// cannedTools maps a tool name to its tools/call answer: "result:" and the
// result JSON, or "error:" and the JSON-RPC error object.
var cannedTools = map[string]string{
	"ok":             `result:{"content":[{"type":"text","text":"canned"}]}`,
	"lone_surrogate": `result:{"content":[{"type":"text","text":"ok"}],"structuredContent":{"list":[1,{"s":"\ud800"}]}}`,
	"duplicate_key":  `result:{"content":[],"structuredContent":{"a":1,"a":2}}`,
	"text_missing":   `result:{"content":[{"type":"text","text":"fine"},{"type":"text"}]}`,
	"many_markers":   `result:{"content":[` + strings.Repeat(`{"type":"x"},`, cannedMarkers-1) + `{"type":"x"}]}`,
	"rpc_error":      `error:{"code":-32042,"message":"canned failure"}`,
	"gated":          `result:{"content":[{"type":"text","text":"` + strings.Repeat("g", cannedGatedBytes) + `"}]}`,
}

// serveCanned is a minimal MCP server over newline-delimited JSON-RPC:
// initialize, tools/list and tools/call of cannedTools; notifications are
// absorbed. It returns at EOF.
func serveCanned(in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	w := bufio.NewWriter(out)
	gateOpen := false
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || len(req.ID) == 0 || string(req.ID) == "null" {
			continue
		}
		answer := `error:{"code":-32601,"message":"method not found"}`
		switch req.Method {
		case "initialize":
			v, _ := json.Marshal(req.Params.ProtocolVersion)
			answer = `result:{"protocolVersion":` + string(v) + `,"capabilities":{"tools":{}},"serverInfo":{"name":"canned","version":"1"}}`
		case "tools/list":
			var tools []string
			for _, name := range slices.Sorted(maps.Keys(cannedTools)) {
				tools = append(tools, `{"name":"`+name+`","inputSchema":{"type":"object"}}`)
			}
			answer = `result:{"tools":[` + strings.Join(tools, ",") + `]}`
		case "tools/call":
			if a, ok := cannedTools[req.Params.Name]; ok {
				answer = a
			}
			if req.Params.Name == "gated" && !gateOpen {
				gateOpen = true
				if f, err := os.Open(os.Getenv(cannedGateEnv)); err == nil {
					_, _ = io.Copy(io.Discard, f)
					f.Close()
				}
			}
		}
		kind, body, _ := strings.Cut(answer, ":")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"%s":%s}`+"\n", req.ID, kind, body)
		if w.Flush() != nil {
			return
		}
	}
}

// cannedServer configures the test binary as the canned server.
func cannedServer(name string) config.Server {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	s := config.NewServer(name, exe)
	s.Args = []string{"-test.run=^$"}
	s.Env = map[string]string{cannedEnv: "1", "GORACE": "atexit_sleep_ms=0"}
	s.StartupTimeout = 30 * time.Second
	return s
}

// waitRunning waits until n calls run at server (bounded: a test that
// needs a call in flight fails rather than hangs if it never gets there).
func (tb *testBridge) waitRunning(server string, n int64) {
	tb.t.Helper()
	s := tb.srv(server)
	eventually(tb.t, fmt.Sprintf("%d calls running at server %q", n, server), func() bool { return s.adm.Running() == n })
}

// wantDenial asserts err is a *capwire.Denied with code and path, and returns it.
func wantDenial(t *testing.T, err error, code, path string) *capwire.Denied {
	t.Helper()
	var d *capwire.Denied
	if !errors.As(err, &d) {
		t.Fatalf("err = %v, want a %s denial", err, code)
	}
	if d.Code != code || d.Path != path {
		t.Fatalf("denial = %q at %q (%s), want %q at %q", d.Code, d.Path, d.Message, code, path)
	}
	return d
}

func denialCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestDenials produces, through the Go client, every denial a single call
// can observe, against one bridge whose servers each play one part.
func TestDenials(t *testing.T) {
	defer leakcheck.Check(t)()
	broken := neverRestart(mcptestServer("broken", mcptest.Scenario{ExitBeforeHandshake: true}))
	capped := mcptestServer("capped", mcptest.Scenario{})
	capped.MaxCallTimeout = 300 * time.Millisecond
	one := mcptestServer("one", mcptest.Scenario{})
	one.MaxInflight, one.MaxQueue = 1, 0
	soleGrant(&one)
	tb := startBridge(t, nil,
		mcptestServer("t", mcptest.Scenario{}), neverRestart(mcptestServer("crashy", mcptest.Scenario{})),
		broken, capped, one, cannedServer("canned"))
	if st := tb.srv("broken").snapshot().State; st != StateFailed {
		t.Fatalf("broken server is %s, want failed", st)
	}
	all := map[string][]string{}
	for _, name := range tb.Servers() {
		all[name] = nil
	}
	c := tb.dial(tb.grant(all))

	tests := []struct {
		name, server, tool string
		args               map[string]any
		code, path         string
		rpcCode            int
		msgHas             string
	}{
		{name: "unknown server", server: "nosuch", tool: "echo", code: capwire.CodeUnknownCapability},
		{name: "unknown tool", server: "t", tool: "nosuch", code: capwire.CodeUnknownTool},
		// A []byte becomes MessagePack bin, which has no JSON form.
		{name: "bin argument", server: "t", tool: "content", args: map[string]any{"x": map[string]any{"y": []any{1, []byte{1}}}},
			code: capwire.CodeBadArguments, path: "/x/y/1"},
		{name: "bin argument under an escaped key", server: "t", tool: "content", args: map[string]any{"a/b~c": []byte{}},
			code: capwire.CodeBadArguments, path: "/a~1b~0c"},
		// The reason, not the server's stderr: that is the operator's.
		{name: "failed boot", server: "broken", tool: "echo", code: capwire.CodeServerUnavailable, msgHas: `server "broken" is failed: mcpwire: server connection is dead: mcpwire: server exited (exit status 3) (its stderr is in capbridge's status and logs)`},
		{name: "JSON-RPC error", server: "canned", tool: "rpc_error", code: capwire.CodeServerError, rpcCode: -32042, msgHas: "canned failure"},
		{name: "structured lone surrogate", server: "canned", tool: "lone_surrogate", code: capwire.CodeResultMalformed, path: "/structuredContent/list/1/s"},
		{name: "structured duplicate key", server: "canned", tool: "duplicate_key", code: capwire.CodeResultMalformed, path: "/structuredContent/a"},
		{name: "text block without text", server: "canned", tool: "text_missing", code: capwire.CodeResultMalformed, path: "/content/1/text"},
		// The client asks for about 30 s (its ctx deadline travels as
		// timeout_ms); the server's max_call_timeout of 300 ms wins.
		{name: "max_call_timeout caps timeout_ms", server: "capped", tool: "hang", code: capwire.CodeTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Call(denialCtx(t), tc.server, tc.tool, tc.args)
			if err == nil {
				t.Fatalf("result %+v, want %s", r, tc.code)
			}
			d := wantDenial(t, err, tc.code, tc.path)
			if d.RPCCode != tc.rpcCode || !strings.Contains(d.Message, tc.msgHas) {
				t.Errorf("denial = %+v, want rpc_code %d and a message with %q", d, tc.rpcCode, tc.msgHas)
			}
		})
	}

	t.Run("crashed server", func(t *testing.T) {
		_, err := c.Call(denialCtx(t), "crashy", "crash", nil)
		d := wantDenial(t, err, capwire.CodeServerUnavailable, "")
		if strings.Contains(d.Message, "crashing in the middle of call") || !strings.Contains(d.Message, `server "crashy" died`) {
			t.Errorf("message %q: want the server and why, and not its stderr", d.Message)
		}
		// Dead stays dead (no silent restart); the others serve on.
		_, err = c.Call(denialCtx(t), "crashy", "echo", map[string]any{"text": "x"})
		wantDenial(t, err, capwire.CodeServerUnavailable, "")
		if r, err := c.Call(denialCtx(t), "t", "echo", map[string]any{"text": "still here"}); err != nil || r.Text() != "still here" {
			t.Fatalf("other server: %v, %v", r, err)
		}
	})

	t.Run("server overloaded", func(t *testing.T) {
		ctx, cancel := context.WithCancel(denialCtx(t))
		done := make(chan error, 1)
		go func() { _, err := c.Call(ctx, "one", "hang", nil); done <- err }()
		tb.waitRunning("one", 1)
		_, err := c.Call(denialCtx(t), "one", "echo", map[string]any{"text": "x"})
		wantDenial(t, err, capwire.CodeOverloaded, "")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("hanging call: %v", err)
		}
		tb.waitRunning("one", 0)
	})

	// The Go client drops the reply of a call it gave up on; what it must
	// achieve is that the call stops at the server (the bridge sends
	// notifications/cancelled and frees the slot). The code itself is
	// checked with raw frames in TestRawDenials.
	t.Run("cancel frees the server", func(t *testing.T) {
		ctx, cancel := context.WithCancel(denialCtx(t))
		done := make(chan error, 1)
		go func() { _, err := c.Call(ctx, "t", "hang", nil); done <- err }()
		tb.waitRunning("t", 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("call: %v", err)
		}
		tb.waitRunning("t", 0)
	})

	t.Run("revoked mid-call", func(t *testing.T) {
		g, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
		if err != nil {
			t.Fatal(err)
		}
		rc := tb.dial(token)
		defer rc.Close()
		done := make(chan error, 1)
		go func() { _, err := rc.Call(denialCtx(t), "t", "hang", nil); done <- err }()
		tb.waitRunning("t", 1)
		if !tb.Revoke(g.ID) {
			t.Fatal("revoke found no grant")
		}
		wantDenial(t, <-done, capwire.CodeRevoked, "")
		tb.waitRunning("t", 0)
		// A call racing the connection's close is refused revoked; after
		// it, the connection is gone.
		if _, err := rc.Call(denialCtx(t), "t", "echo", map[string]any{"text": "x"}); !errors.Is(err, capwire.ErrClosed) && !errors.Is(err, capwire.ErrRevoked) {
			t.Errorf("call after revoke: %v, want revoked or the connection closed", err)
		}
	})

	t.Run("expired mid-call", func(t *testing.T) {
		g, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
		if err != nil {
			t.Fatal(err)
		}
		ec := tb.dial(token)
		defer ec.Close()
		done := make(chan error, 1)
		go func() { _, err := ec.Call(denialCtx(t), "t", "hang", nil); done <- err }()
		tb.waitRunning("t", 1)
		// What the grant's expiry timer does when the TTL runs out
		// (TestGrantExpires checks the timer itself, on a fake clock).
		tb.grants.end(g.ID, ErrGrantExpired)
		wantDenial(t, <-done, capwire.CodeRevoked, "")
	})
	c.Close()
	tb.shutdown()
}

// TestGrants checks that a program reaches exactly what its grant names,
// and that a grant it may not use is refused at hello.
func TestGrants(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}), mcptestServer("u", mcptest.Scenario{}))
	echo := map[string]any{"text": "hi"}

	t.Run("server subset", func(t *testing.T) {
		c := tb.dial(tb.grant(map[string][]string{"t": nil}))
		defer c.Close()
		if got := c.Servers(); len(got) != 1 || got[0] != "t" {
			t.Errorf("welcome servers = %v, want [t]", got)
		}
		if r, err := c.Call(denialCtx(t), "t", "echo", echo); err != nil || r.Text() != "hi" {
			t.Fatalf("granted server: %v, %v", r, err)
		}
		_, err := c.Call(denialCtx(t), "u", "echo", echo)
		wantDenial(t, err, capwire.CodeNotGranted, "")
	})

	t.Run("tool subset", func(t *testing.T) {
		c := tb.dial(tb.grant(map[string][]string{"t": {"echo"}, "u": {"add"}}))
		defer c.Close()
		if r, err := c.Call(denialCtx(t), "t", "echo", echo); err != nil || r.Text() != "hi" {
			t.Fatalf("granted tool: %v, %v", r, err)
		}
		for _, call := range [][2]string{{"t", "add"}, {"u", "echo"}, {"t", "hang"}} {
			_, err := c.Call(denialCtx(t), call[0], call[1], map[string]any{"a": 1, "b": 2})
			wantDenial(t, err, capwire.CodeNotGranted, "")
		}
		if r, err := c.Call(denialCtx(t), "u", "add", map[string]any{"a": 1, "b": 2}); err != nil || r.Text() != "3" {
			t.Fatalf("granted tool on u: %v, %v", r, err)
		}
	})

	uid := uint32(os.Getuid())
	other := uid + 1
	refused := []struct {
		name  string
		token func() string
	}{
		{"revoked", func() string {
			g, token, _ := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
			tb.Revoke(g.ID)
			return token
		}},
		{"revoked by token", func() string {
			token := tb.grant(map[string][]string{"t": nil})
			tb.Revoke(token)
			return token
		}},
		{"expired", func() string {
			g, token, _ := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
			tb.grants.end(g.ID, ErrGrantExpired) // what its timer does
			return token
		}},
		{"peer uid mismatch", func() string {
			_, token, _ := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}, PeerUID: &other})
			return token
		}},
		{"secret altered", func() string {
			// A middle character carries six bits of the secret (the last
			// one also carries padding bits, which strict decoding refuses).
			token := []byte(tb.grant(map[string][]string{"t": nil}))
			i := len(token) - 5
			token[i] = map[bool]byte{true: 'B', false: 'A'}[token[i] == 'A']
			return string(token)
		}},
		{"not a token", func() string { return "hello" }},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := capwire.Dial(denialCtx(t), tb.CallSocket(), tc.token())
			if !errors.Is(err, capwire.ErrBadToken) {
				t.Fatalf("dial: %v, want bad_token", err)
			}
		})
	}

	t.Run("peer uid match", func(t *testing.T) {
		_, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}, PeerUID: &uid})
		if err != nil {
			t.Fatal(err)
		}
		c := tb.dial(token)
		defer c.Close()
		if r, err := c.Call(denialCtx(t), "t", "echo", echo); err != nil || r.Text() != "hi" {
			t.Fatalf("call: %v, %v", r, err)
		}
	})

	t.Run("allowed_uids excludes us", func(t *testing.T) {
		ub := startBridge(t, func(c *config.Config) { c.Bridge.AllowedUIDs = []uint32{other} }, mcptestServer("t", mcptest.Scenario{}))
		_, err := capwire.Dial(denialCtx(t), ub.CallSocket(), ub.grant(map[string][]string{"t": nil}))
		var f *capwire.FatalMsg
		if !errors.As(err, &f) || f.Code != capwire.CodeBadToken || !strings.Contains(f.Message, "may not use") {
			t.Fatalf("dial: %v, want bad_token for the uid", err)
		}
		ub.shutdown()
	})
	tb.shutdown()
}

// rawConn speaks frames by hand on the call socket.
type rawConn struct {
	t  *testing.T
	c  *net.UnixConn
	fr *capwire.FrameReader
}

func dialRaw(t *testing.T, path string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("unix", path, backstop)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c.(*net.UnixConn), fr: capwire.NewFrameReader(c, bound.MaxMessage)}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	_ = r.c.SetWriteDeadline(time.Now().Add(backstop))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) send(m capwire.Message) {
	r.t.Helper()
	b, err := capwire.AppendFrame(nil, m, bound.MaxMessage)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(b)
}

// next reads and decodes one frame from the bridge.
func (r *rawConn) next() capwire.Message {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(backstop))
	b, err := r.fr.ReadFrame(nil)
	if err != nil {
		r.t.Fatalf("reading a frame: %v", err)
	}
	m, err := capwire.Decode(b)
	if err != nil {
		r.t.Fatalf("decoding %x: %v", b, err)
	}
	return m
}

func (r *rawConn) hello(token string) {
	r.t.Helper()
	r.send(&capwire.HelloMsg{V: capwire.Version, Token: token})
	if m, ok := r.next().(*capwire.WelcomeMsg); !ok {
		r.t.Fatalf("hello answered %#v", m)
	}
}

// denied reads the next frame and checks it is a denial of id with code.
func (r *rawConn) denied(id uint64, code string) *capwire.DeniedMsg {
	r.t.Helper()
	m := r.next()
	d, ok := m.(*capwire.DeniedMsg)
	if !ok || d.NoID || d.ID != id || d.Denial.Code != code {
		r.t.Fatalf("got %#v, want %s for call %d", m, code, id)
	}
	return d
}

// fatal reads the next frame, checks it is a fatal with code, and checks
// the bridge then closes the connection.
func (r *rawConn) fatal(code string) {
	r.t.Helper()
	m := r.next()
	if f, ok := m.(*capwire.FatalMsg); !ok || f.Code != code {
		r.t.Fatalf("got %#v, want fatal %s", m, code)
	}
	_ = r.c.SetReadDeadline(time.Now().Add(backstop))
	if _, err := r.fr.ReadFrame(nil); !errors.Is(err, io.EOF) {
		r.t.Fatalf("after the fatal frame: %v, want the connection closed", err)
	}
}

// rawFrame prefixes a payload with its length.
func rawFrame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// mpRaw is a value mpMap writes verbatim.
type mpRaw []byte

// mpMap encodes a MessagePack map of up to 15 entries from alternating keys
// and values, in order and with repeats kept: what a hostile client writes.
func mpMap(kv ...any) []byte {
	out := []byte{0x80 | byte(len(kv)/2)}
	for _, v := range kv {
		if r, ok := v.(mpRaw); ok {
			out = append(out, r...)
			continue
		}
		b, err := msgpack.Marshal(v)
		if err != nil {
			panic(err)
		}
		out = append(out, b...)
	}
	return out
}

// deepArray nests n arrays.
func deepArray(n int) mpRaw {
	b := make([]byte, 0, n+1)
	for range n - 1 {
		b = append(b, 0x91)
	}
	return append(b, 0x90)
}

// TestRawDenials produces with hand-made frames the denials a Go client
// cannot observe: cancelled, timeout from timeout_ms, every kind of
// bad_request, a duplicate id, and the per-connection bound.
func TestRawDenials(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxConnInflight = 2 }, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	emptyMap := mpRaw{0x80}

	t.Run("cancelled", func(t *testing.T) {
		r := dialRaw(t, tb.CallSocket())
		r.hello(token)
		r.send(&capwire.CallMsg{ID: 7, Cap: "mcp.t", Op: "hang", Args: msgpack.RawMessage{0x80}})
		r.send(&capwire.CancelMsg{ID: 7})
		r.denied(7, capwire.CodeCancelled)
		r.send(&capwire.CancelMsg{ID: 7}) // no longer in flight: ignored
		r.send(&capwire.CallMsg{ID: 7, Cap: "mcp.t", Op: "echo", Args: msgpack.RawMessage(mpMap("text", "again"))})
		if m, ok := r.next().(*capwire.ResultMsg); !ok || m.ID != 7 || m.Result.Text() != "again" {
			t.Fatalf("reused id: %#v", m)
		}
		tb.waitRunning("t", 0)
	})

	t.Run("timeout_ms", func(t *testing.T) {
		r := dialRaw(t, tb.CallSocket())
		r.hello(token)
		r.send(&capwire.CallMsg{ID: 1, Cap: "mcp.t", Op: "hang", Args: msgpack.RawMessage{0x80}, TimeoutMS: 100})
		r.denied(1, capwire.CodeTimeout)
		tb.waitRunning("t", 0)
	})

	t.Run("bad requests", func(t *testing.T) {
		r := dialRaw(t, tb.CallSocket())
		r.hello(token)
		bad := []struct {
			name    string
			payload []byte
			id      uint64
		}{
			{"missing op", mpMap("t", "call", "id", 11, "cap", "mcp.t", "args", emptyMap), 11},
			{"args not a map", mpMap("t", "call", "id", 12, "cap", "mcp.t", "op", "echo", "args", []int{1}), 12},
			{"duplicate key", mpMap("t", "call", "id", 13, "cap", "mcp.t", "op", "echo", "op", "add", "args", emptyMap), 13},
			{"unknown type", mpMap("t", "frobnicate", "id", 14), 14},
			{"invalid UTF-8", mpMap("t", "call", "id", 15, "cap", "mcp.t", "op", mpRaw{0xa3, 0xff, 0xfe, 0xfd}, "args", emptyMap), 15},
			{"args too deep", mpMap("t", "call", "id", 16, "cap", "mcp.t", "op", "echo", "args", mpRaw(append([]byte{0x81, 0xa1, 'a'}, deepArray(bound.MaxDepth)...))), 16},
			{"id after the fault", mpMap("t", "call", "cap", 5, "op", "echo", "args", emptyMap, "id", 17), 17},
		}
		for _, tc := range bad {
			r.write(rawFrame(tc.payload))
			m := r.next()
			if d, ok := m.(*capwire.DeniedMsg); !ok || d.Denial.Code != capwire.CodeBadRequest || d.NoID || d.ID != tc.id {
				t.Errorf("%s: got %#v, want bad_request for call %d", tc.name, m, tc.id)
			}
		}
		// The connection lives on.
		r.send(&capwire.CallMsg{ID: 30, Cap: "mcp.t", Op: "echo", Args: msgpack.RawMessage(mpMap("text", "alive"))})
		if m, ok := r.next().(*capwire.ResultMsg); !ok || m.ID != 30 || m.Result.Text() != "alive" {
			t.Fatalf("after the bad frames: %#v", m)
		}
	})

	// An envelope a client may not send is a bad_request naming its id
	// (§7), and the connection survives.
	t.Run("an envelope a client may not send", func(t *testing.T) {
		r := dialRaw(t, tb.CallSocket())
		r.hello(token)
		r.write(rawFrame(mpMap("t", "result", "id", 18, "is_error", false, "content", []any{})))
		if d, ok := r.next().(*capwire.DeniedMsg); !ok || d.Denial.Code != capwire.CodeBadRequest || d.NoID || d.ID != 18 {
			t.Fatalf("got %#v, want bad_request for id 18", d)
		}
		r.send(&capwire.CallMsg{ID: 19, Cap: "mcp.t", Op: "echo", Args: msgpack.RawMessage(mpMap("text", "alive"))})
		if m, ok := r.next().(*capwire.ResultMsg); !ok || m.ID != 19 {
			t.Fatalf("after the result envelope: %#v", m)
		}
	})

	t.Run("capability without the mcp prefix", func(t *testing.T) {
		r := dialRaw(t, tb.CallSocket())
		r.hello(token)
		r.send(&capwire.CallMsg{ID: 3, Cap: "t", Op: "echo", Args: msgpack.RawMessage(mpMap("text", "x"))})
		r.denied(3, capwire.CodeUnknownCapability)
	})

	t.Run("duplicate id and connection bound", func(t *testing.T) {
		r := dialRaw(t, tb.CallSocket())
		r.hello(token)
		hang := func(id uint64) {
			r.send(&capwire.CallMsg{ID: id, Cap: "mcp.t", Op: "hang", Args: msgpack.RawMessage{0x80}})
		}
		hang(20)
		hang(20)
		r.denied(20, capwire.CodeBadRequest)
		hang(21)
		hang(22) // max_conn_inflight = 2
		r.denied(22, capwire.CodeOverloaded)
		r.send(&capwire.CancelMsg{ID: 20})
		r.denied(20, capwire.CodeCancelled)
		r.send(&capwire.CancelMsg{ID: 21})
		r.denied(21, capwire.CodeCancelled)
	})
	tb.waitRunning("t", 0)
	tb.shutdown()
}

// TestFatalCodes produces every fatal code on the call socket and checks
// the bridge closes the connection after it.
func TestFatalCodes(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	hello := func(kv ...any) []byte { return rawFrame(mpMap(kv...)) }
	tests := []struct {
		name       string
		afterHello bool
		send       []byte
		halfClose  bool
		code       string
	}{
		{name: "zero length", send: []byte{0, 0, 0, 0}, code: capwire.CodeBadFrame},
		{name: "not a map", send: rawFrame([]byte{0x01}), code: capwire.CodeBadFrame},
		{name: "trailing bytes", send: rawFrame(append(mpMap("t", "hello", "v", 1, "token", token), 0xc0)), code: capwire.CodeBadFrame},
		{name: "over max_frame", send: []byte{0xff, 0xff, 0xff, 0xff}, code: capwire.CodeFrameTooLarge},
		{name: "call first", send: rawFrame(mpMap("t", "call", "id", 1, "cap", "mcp.t", "op", "echo", "args", mpRaw{0x80})), code: capwire.CodeBadHello},
		{name: "hello without token", send: hello("t", "hello", "v", 1), code: capwire.CodeBadHello},
		{name: "hello with a number token", send: hello("t", "hello", "v", 1, "token", 5), code: capwire.CodeBadHello},
		{name: "unknown token", send: hello("t", "hello", "v", 1, "token", "cbt1.0000000000000000.AAAAAAAAAAAAAAAAAAAAAA"), code: capwire.CodeBadToken},
		{name: "version 2", send: hello("t", "hello", "v", 2, "token", token), code: capwire.CodeUnsupportedVersion},
		{name: "zero length after hello", afterHello: true, send: []byte{0, 0, 0, 0}, code: capwire.CodeBadFrame},
		{name: "truncated after hello", afterHello: true, send: []byte{0, 0, 0, 10, 0x81, 0xa1}, halfClose: true, code: capwire.CodeBadFrame},
		{name: "over max_frame after hello", afterHello: true, send: binary.BigEndian.AppendUint32(nil, bound.MaxMessage+1), code: capwire.CodeFrameTooLarge},
		{name: "second hello", afterHello: true, send: hello("t", "hello", "v", 1, "token", token), code: capwire.CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, tb.CallSocket())
			if tc.afterHello {
				r.hello(token)
			}
			r.write(tc.send)
			if tc.halfClose {
				_ = r.c.CloseWrite()
			}
			if tc.code == capwire.CodeBadRequest {
				// A hello after the handshake is an envelope a client may
				// not send there: a denial, and the connection lives on.
				if d, ok := r.next().(*capwire.DeniedMsg); !ok || d.Denial.Code != capwire.CodeBadRequest {
					t.Fatalf("got %#v, want bad_request", d)
				}
				return
			}
			r.fatal(tc.code)
		})
	}
	tb.shutdown()
}

// TestOversizeResult produces result_too_large: a reply that fits the
// server's line but not, once reduced, the bridge's frame.
func TestOversizeResult(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxFrame = 64 << 10 }, cannedServer("canned"))
	c := tb.dial(tb.grant(map[string][]string{"canned": nil}))
	_, err := c.Call(denialCtx(t), "canned", "many_markers", nil)
	wantDenial(t, err, capwire.CodeResultTooLarge, "")
	if r, err := c.Call(denialCtx(t), "canned", "ok", nil); err != nil || r.Text() != "canned" {
		t.Fatalf("next call: %v, %v", r, err)
	}
	c.Close()
	tb.shutdown()
}

// TestShuttingDown checks that a call arriving during the grace period is
// refused shutting_down, and that a call still running when the grace
// period ends settles shutting_down and the client hears it.
func TestShuttingDown(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	done := make(chan error, 1)
	go func() { _, err := c.Call(denialCtx(t), "t", "hang", nil); done <- err }()
	tb.waitRunning("t", 1)
	graceOver := make(chan time.Time)
	stopped := make(chan struct{})
	go func() { tb.shutdownAt(graceOver); close(stopped) }()
	// During the grace period the connection is still open, but a new
	// call is refused at once rather than started.
	eventually(t, "the shutdown to close admission", tb.draining)
	_, err := c.Call(denialCtx(t), "t", "echo", map[string]any{"text": "late"})
	wantDenial(t, err, capwire.CodeShuttingDown, "")
	select {
	case err := <-done:
		t.Fatalf("the running call ended during the grace period: %v", err)
	case <-stopped:
		t.Fatal("Shutdown returned during the grace period with a call running")
	default:
	}
	close(graceOver)
	<-stopped
	wantDenial(t, <-done, capwire.CodeShuttingDown, "")
	c.Close()
}

// TestEndedGrantReachesNoServer checks that a call made under a grant
// that has already ended is refused before anything is sent to the
// server. A call frame read in the instant between a revoke and the
// connection's close gets here; it must not run the tool. The server's
// own record of notifications/cancelled is the evidence: a call that
// reached it would be cancelled there right after.
func TestEndedGrantReachesNoServer(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	g, _, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	tb.Revoke(g.ID)
	for range 20 {
		o := tb.call(g.Context(), callRequest{server: "t", tool: "hang", args: []byte{0x80}, grant: g})
		if o.denial == nil || o.denial.Code != capwire.CodeRevoked {
			t.Fatalf("outcome %+v, want revoked", o)
		}
	}
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	r, err := c.Call(denialCtx(t), "t", "cancellations", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cancelled []mcptest.Cancellation `msgpack:"cancelled"`
	}
	if err := r.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Cancelled) != 0 {
		t.Errorf("%d calls of the ended grant reached the server: %+v", len(got.Cancelled), got.Cancelled)
	}
	c.Close()
	tb.shutdown()
}
