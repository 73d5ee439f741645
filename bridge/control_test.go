package bridge

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

func ctlCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mp(t *testing.T, v any) msgpack.RawMessage {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every request, typed end to end over the real socket, against a real
// bridge.
func TestControlRoundTrips(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	cc := tb.control()
	ctx := ctlCtx(t)

	uid := uint32(12345)
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": {"echo"}}, TTLMS: new(uint64(60_000)), PeerUID: &uid})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.Token, tokenPrefix+g.Grant+".") || time.Until(time.UnixMilli(g.ExpiresMS)) > time.Minute {
		t.Errorf("granted %+v", g)
	}
	st, err := cc.Status(ctx)
	if err != nil || st.Grants != 1 || st.Connections != 1 || len(st.Servers) != 1 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if s := st.Servers[0]; s.Name != "t" || State(s.State) != StateReady || s.PID <= 0 || s.Tools == 0 {
		t.Errorf("server status %+v", s)
	}
	for _, grant := range []string{g.Grant, g.Token} {
		r, err := cc.Revoke(ctx, &control.RevokeRequest{Grant: grant})
		if err != nil || r.Found != (grant == g.Grant) {
			t.Errorf("revoke %q: %+v, %v", grant, r, err)
		}
	}
	f, err := cc.Facade(ctx, &control.FacadeRequest{Server: "t"})
	if err != nil || f.Module != "t" || !strings.Contains(f.Source, "package t") || f.Surface == "" || len(f.ListingSHA256) != 64 {
		t.Errorf("facade: module %q, %d bytes of source, listing %q, %v", f.Module, len(f.Source), f.ListingSHA256, err)
	}
	res, err := cc.Call(ctx, &control.CallRequest{Server: "t", Tool: "echo", Args: mp(t, map[string]any{"text": "hello"})})
	if err != nil || res.Text() != "hello" || res.IsError {
		t.Errorf("call echo: %+v, %v", res, err)
	}
	// A call without args is a call with {}.
	res, err = cc.Call(ctx, &control.CallRequest{Server: "t", Tool: "fail"})
	if err != nil || !res.IsError {
		t.Errorf("call without args: %+v, %v", res, err)
	}
	cc.Close()
	tb.shutdown()
}

// Refusals keep their code across the socket: a control error is a
// *control.Error, a call's denial a *capwire.Denied.
func TestControlErrorCodes(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	cc := tb.control()
	ctx := ctlCtx(t)

	for _, tc := range []struct {
		name string
		do   func() error
		code string
	}{
		{"grant of an unknown server", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"nope": nil}})
			return err
		}, control.CodeUnknownServer},
		{"grant of an unknown tool", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": {"nope"}}})
			return err
		}, control.CodeUnknownTool},
		{"grant of nothing", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{})
			return err
		}, control.CodeBadRequest},
		// A TTL that would overflow time.Duration is refused, not wrapped.
		{"grant with a huge ttl", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(uint64(18446744073710))})
			return err
		}, control.CodeBadRequest},
		{"grant with the largest ttl_ms", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(uint64(math.MaxUint64))})
			return err
		}, control.CodeBadRequest},
		// Zero is a value, not "the default": only leaving ttl_ms out
		// asks for the default.
		{"grant with ttl_ms 0", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(uint64(0))})
			return err
		}, control.CodeBadRequest},
		{"grant with ttl_ms under a second", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(uint64(999))})
			return err
		}, control.CodeBadRequest},
		{"grant with ttl_ms a millisecond over a day", func() error {
			_, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(uint64(MaxGrantTTL/time.Millisecond + 1))})
			return err
		}, control.CodeBadRequest},
		{"facade of an unknown server", func() error {
			_, err := cc.Facade(ctx, &control.FacadeRequest{Server: "nope"})
			return err
		}, control.CodeUnknownServer},
		{"facade in an unknown language", func() error {
			_, err := cc.Facade(ctx, &control.FacadeRequest{Server: "t", Lang: "cobol"})
			return err
		}, control.CodeBadRequest},
	} {
		err := tc.do()
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Code != tc.code || !errors.Is(err, &control.Error{Code: tc.code}) || ce.Message == "" {
			t.Errorf("%s: %v, want a control error %s", tc.name, err, tc.code)
		}
	}

	for _, tc := range []struct {
		name string
		req  control.CallRequest
		want error
	}{
		{"args an array", control.CallRequest{Server: "t", Tool: "echo", Args: msgpack.RawMessage{0x91, 0x01}}, capwire.ErrBadArguments},
		{"args a string", control.CallRequest{Server: "t", Tool: "echo", Args: msgpack.RawMessage{0xa1, 'x'}}, capwire.ErrBadArguments},
		{"args true", control.CallRequest{Server: "t", Tool: "echo", Args: msgpack.RawMessage{0xc3}}, capwire.ErrBadArguments},
		{"unknown server", control.CallRequest{Server: "nope", Tool: "echo"}, capwire.ErrUnknownCapability},
		{"unknown tool", control.CallRequest{Server: "t", Tool: "nope"}, capwire.ErrUnknownTool},
		{"past its deadline", control.CallRequest{Server: "t", Tool: "hang", TimeoutMS: 50}, capwire.ErrTimeout},
	} {
		res, err := cc.Call(ctx, &tc.req)
		var d *capwire.Denied
		if !errors.Is(err, tc.want) || !errors.As(err, &d) || res != nil {
			t.Errorf("call with %s: %+v, %v; want %v", tc.name, res, err, tc.want)
		}
	}
	// Refusals leave the connection usable, and issued nothing.
	if st, err := cc.Status(ctx); err != nil || st.Grants != 0 {
		t.Errorf("status after the refusals: %+v, %v; want no live grant", st, err)
	}
	cc.Close()
	tb.shutdown()
}

// ttl_ms on the wire: left out is the default; a negative integer, which
// MessagePack would decode as a huge uint64, is refused and named as
// negative; a bound itself is accepted.
func TestControlGrantTTL(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	cc := tb.control()
	ctx := ctlCtx(t)

	before := time.Now()
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if exp := time.UnixMilli(g.ExpiresMS); exp.Before(before.Add(DefaultGrantTTL).Add(-time.Second)) || exp.After(time.Now().Add(DefaultGrantTTL)) {
		t.Errorf("a grant without ttl_ms expires at %v, want %v after %v", exp, DefaultGrantTTL, before)
	}
	for _, ms := range []uint64{uint64(MinGrantTTL / time.Millisecond), uint64(MaxGrantTTL / time.Millisecond)} {
		if _, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(ms)}); err != nil {
			t.Errorf("ttl_ms %d: %v", ms, err)
		}
	}

	nc, err := net.Dial("unix", tb.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame, err := capwire.AppendFramed(nil, control.MaxFrame, func(b []byte) ([]byte, error) {
		body, err := msgpack.Marshal(map[string]any{"t": "grant", "id": 7, "servers": map[string][]string{"t": {}}, "ttl_ms": -1000})
		return append(b, body...), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(backstop))
	reply, err := capwire.NewFrameReader(nc, control.MaxFrame).ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		T       string `msgpack:"t"`
		ID      uint64 `msgpack:"id"`
		Code    string `msgpack:"code"`
		Message string `msgpack:"message"`
	}
	if err := msgpack.Unmarshal(reply, &e); err != nil {
		t.Fatal(err)
	}
	if e.T != "error" || e.ID != 7 || e.Code != control.CodeBadRequest || !strings.Contains(e.Message, "negative") {
		t.Errorf("ttl_ms -1000 answered %+v, want a bad_request error naming it negative", e)
	}
	if st, err := cc.Status(ctx); err != nil || st.Grants != 3 {
		t.Errorf("status: %+v, %v; want the 3 grants in range live", st, err)
	}
	cc.Close()
	tb.shutdown()
}

// Frames the typed client cannot produce: an unknown request, and frames
// that cannot be decoded, which are answered with id 0.
func TestControlMalformed(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	raw := dialControlRaw(t, tb)

	raw.writeFrame(t, mp(t, map[string]any{"t": "frobnicate", "id": 5}))
	if r := raw.readReply(t); r.T != "error" || r.ID != 5 || r.Code != control.CodeUnknownRequest {
		t.Errorf("unknown request: %v", r)
	}
	for _, frame := range [][]byte{
		{0x82, 0xa1, 't', 0xc4, 0x01, 0x00, 0xa2, 'i', 'd', 0x07},                                                               // bin where a string goes
		{0x82, 0xa1, 't', 0xa6, 's', 't', 'a', 't', 'u', 's', 0xa2, 'i', 'd'},                                                   // truncated map
		{0x82, 0xa1, 't', 0xa5, 'g', 'r', 'a', 'n', 't', 0xa7, 's', 'e', 'r', 'v', 'e', 'r', 's', 0xdf, 0xff, 0xff, 0xff, 0xff}, // a map claiming 2^32-1 entries
		{0x93, 0x01, 0x02, 0x03}, // not a map
	} {
		raw.writeFrame(t, frame)
		if r := raw.readReply(t); r.T != "error" || r.ID != 0 || r.Code != control.CodeBadRequest ||
			!strings.Contains(r.Message, "malformed control request") {
			t.Errorf("frame % x: %v, want bad_request with id 0", frame, r)
		}
	}
	// A known request whose field has the wrong type keeps its id.
	raw.writeFrame(t, mp(t, map[string]any{"t": "revoke", "id": 9, "grant": 3}))
	if r := raw.readReply(t); r.T != "error" || r.ID != 9 || r.Code != control.CodeBadRequest {
		t.Errorf("revoke with a number: %v", r)
	}
	// The connection still serves.
	raw.writeFrame(t, mp(t, map[string]any{"t": "status", "id": 10}))
	if r := raw.readReply(t); r.T != "status" || r.ID != 10 {
		t.Errorf("status after malformed frames: %v", r)
	}
	raw.c.Close()
	tb.shutdown()
}

// A harness that half-closes after sending its requests (shutdown(SHUT_WR),
// nc -N) still gets every reply: only a full hang-up cancels a call. The
// second request arrives while the first call runs, so the hang-up watch
// must leave it for the next read.
func TestControlHalfCloseKeepsCall(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	raw := dialControlRaw(t, tb)
	raw.writeFrame(t, mp(t, map[string]any{"t": "call", "id": 7, "server": "t", "tool": "slow", "args": map[string]any{"ms": 1000, "text": "still here"}}))
	waitInflight(t, tb, "t", 1)
	raw.writeFrame(t, mp(t, map[string]any{"t": "status", "id": 8}))
	if err := raw.c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	payload, err := raw.fr.ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := capwire.Decode(payload)
	if r, ok := m.(*capwire.ResultMsg); err != nil || !ok || r.ID != 7 || r.Result.Text() != "still here" {
		t.Fatalf("reply after half-close: %#v, %v", m, err)
	}
	if r := raw.readReply(t); r.T != "status" || r.ID != 8 {
		t.Errorf("second reply after half-close: %v", r)
	}
	raw.c.Close()
	tb.shutdown()
}

// Jailed programs filling max_connections on the call socket do not lock
// the harness out of the control socket.
func TestControlSocketHasItsOwnBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxConnections = 2 }, mcptestServer("t", mcptest.Scenario{}))
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", tb.CallSocket())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Wait until both are counted, then the call socket is full.
	eventually(t, "both call-socket connections to be counted", func() bool {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		return len(tb.open) == 2
	})
	cc := tb.control()
	r, err := cc.Status(ctlCtx(t))
	if err != nil || r.Connections != 3 {
		t.Fatalf("status with the call socket full: %+v, %v", r, err)
	}
	for _, c := range held {
		c.Close()
	}
	cc.Close()
	tb.shutdown()
}

// controlRaw speaks the control plane without the typed client, to send
// what it never would.
type controlRaw struct {
	c  *net.UnixConn
	fr *capwire.FrameReader
}

func dialControlRaw(t *testing.T, tb *testBridge) *controlRaw {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: tb.ControlSocket(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &controlRaw{c: c, fr: capwire.NewFrameReader(c, control.MaxFrame)}
}

func (r *controlRaw) writeFrame(t *testing.T, body []byte) {
	t.Helper()
	frame, err := capwire.AppendFramed(nil, 0, func(b []byte) ([]byte, error) { return append(b, body...), nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// rawReply is what the tests read of a reply.
type rawReply struct {
	T       string `msgpack:"t"`
	ID      uint64 `msgpack:"id"`
	Code    string `msgpack:"code"`
	Message string `msgpack:"message"`
}

// readReply reads one reply (the bridge is trusted here).
func (r *controlRaw) readReply(t *testing.T) *rawReply {
	t.Helper()
	payload, err := r.fr.ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	var reply *rawReply
	if err := msgpack.Unmarshal(payload, &reply); err != nil {
		t.Fatal(err)
	}
	return reply
}

// BenchmarkControlCall measures one echo call with operator authority over
// the control socket (capbridge call), against rawecho so the control
// plane's own cost (framing, the hang-up watch, the audit's size check)
// is not hidden behind the server's.
func BenchmarkControlCall(b *testing.B) {
	argv, env := rawecho.Command()
	br, _ := benchBridge(b, argv, env)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc, err := control.Dial(ctx, br.ControlSocket())
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	args, err := msgpack.Marshal(map[string]any{"text": benchText})
	if err != nil {
		b.Fatal(err)
	}
	req := &control.CallRequest{Server: "t", Tool: "echo", Args: args}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := cc.Call(ctx, req); err != nil || r.Text() != benchText {
			b.Fatalf("call: %+v, %v", r, err)
		}
	}
}
