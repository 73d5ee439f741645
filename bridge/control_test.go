package bridge

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/leakcheck"
	"github.com/capbridge/capbridge/internal/mcptest"
)

func ctlCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The control plane's answers, including its refusals, for requests a
// harness may get wrong.
func TestControlRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	cc := tb.control()
	ctx := ctlCtx(t)

	// A call without args is a call with {}; args that are not a map
	// are bad_arguments, not a server failure.
	r, err := cc.Do(ctx, &ControlRequest{T: ctlCall, Server: "t", Tool: "fail"})
	if err != nil || r.T != "result" || !r.IsError {
		t.Errorf("call without args: %+v, %v", r, err)
	}
	for _, args := range []msgpack.RawMessage{{0x91, 0x01}, {0xa1, 'x'}, {0xc3}} {
		r, err := cc.Do(ctx, &ControlRequest{T: ctlCall, Server: "t", Tool: "echo", Args: args})
		if err != nil || r.T != "denied" || r.Code != capwire.CodeBadArguments {
			t.Errorf("call with args % x: %+v, %v; want bad_arguments", []byte(args), r, err)
		}
	}

	// revoke and status carry their counts even when they are zero.
	r, err = cc.Do(ctx, &ControlRequest{T: ctlRevoke, Grant: "0000000000000000"})
	if err != nil || r.Found == nil || *r.Found {
		t.Errorf("revoke of nothing: %+v, %v; want found=false present", r, err)
	}
	r, err = cc.Do(ctx, &ControlRequest{T: ctlStatus})
	if err != nil || r.Grants == nil || *r.Grants != 0 || r.Connections == nil || *r.Connections != 1 {
		t.Errorf("status: %+v, %v; want grants 0 and connections 1 present", r, err)
	}

	// A TTL that would overflow time.Duration is refused, not wrapped.
	if _, err := cc.Do(ctx, &ControlRequest{T: ctlGrant, Servers: map[string][]string{"t": nil}, TTLMS: 18446744073710}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("huge ttl_ms: %v, want a refusal", err)
	}
	if _, err := cc.Do(ctx, &ControlRequest{T: "frobnicate"}); err == nil || !strings.Contains(err.Error(), "unknown control request") {
		t.Errorf("unknown request: %v", err)
	}

	// A frame that cannot be decoded is answered (with id 0) and the
	// client reports the server's message, not an id mismatch.
	raw := dialControlRaw(t, tb)
	raw.writeFrame(t, []byte{0x81, 0xa1, 't', 0xc4, 0x01, 0x00}) // bin where a string goes
	reply := raw.readReply(t)
	if reply.T != ctlError || reply.ID != 0 || !strings.Contains(reply.Message, "malformed control request") {
		t.Errorf("malformed frame: %+v", reply)
	}
	raw.c.Close()
	cc.Close()
	tb.shutdown()
}

// A harness that half-closes after sending its request (shutdown(SHUT_WR),
// nc -N) still gets its call's reply: only a full hang-up cancels.
func TestControlHalfCloseKeepsCall(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	raw := dialControlRaw(t, tb)
	args, _ := msgpack.Marshal(map[string]any{"ms": 300, "text": "still here"})
	body, _ := msgpack.Marshal(&ControlRequest{T: ctlCall, ID: 7, Server: "t", Tool: "slow", Args: args})
	raw.writeFrame(t, body)
	if err := raw.c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r := raw.readReply(t)
	if r.T != "result" || r.ID != 7 || len(r.Content) != 1 || r.Content[0]["text"] != "still here" {
		t.Fatalf("reply after half-close: %+v", r)
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tb.mu.Lock()
		n := len(tb.open)
		tb.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections tracked, want 2", n)
		}
	}
	cc := tb.control()
	r, err := cc.Do(ctlCtx(t), &ControlRequest{T: ctlStatus})
	if err != nil || r.Connections == nil || *r.Connections != 3 {
		t.Fatalf("status with the call socket full: %+v, %v", r, err)
	}
	for _, c := range held {
		c.Close()
	}
	cc.Close()
	tb.shutdown()
}

func TestValidTail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\n", "plain\n"},
		{"\xa9 split rune first", " split rune first"},
		{"\x80\x80\x80\x80\x80x", "\uFFFDx"},
		{"latin-1 caf\xe9", "latin-1 caf\uFFFD"},
		{"", ""},
	} {
		if got := validTail([]byte(tc.in)); got != tc.want {
			t.Errorf("validTail(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

type controlRaw struct{ c *net.UnixConn }

func dialControlRaw(t *testing.T, tb *testBridge) *controlRaw {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: tb.ControlSocket(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &controlRaw{c}
}

func (r *controlRaw) writeFrame(t *testing.T, body []byte) {
	t.Helper()
	if _, err := r.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		t.Fatal(err)
	}
}

func (r *controlRaw) readReply(t *testing.T) *ControlReply {
	t.Helper()
	payload, err := capwire.NewFrameReader(r.c, maxControlFrame).ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	var reply ControlReply
	if err := decodeControl(payload, &reply); err != nil {
		t.Fatal(err)
	}
	return &reply
}
