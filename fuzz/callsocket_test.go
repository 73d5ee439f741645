package fuzz

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// The test binary doubles as the mcptest server behind the bridge.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	leakcheck.Main(m)
}

// hostileTools are the tools the fuzzed connection's grant names: every
// mcptest tool except those that make the one shared server die by
// design — crash and kill, and the framing faults bad_utf8 and long_line
// past the line limit (DESIGN: a framing fault is the server's death) —
// and the stderr and noise floods, which only cost time. A call to one of
// those is still sent, and is denied not_granted.
var hostileTools = []string{"add", "content", "duplicate_id", "echo", "fail", "hang", "notify",
	"progress", "result_and_error", "server_request", "slow", "string_id", "unknown_id", "cancellations"}

// live is the bridge a fuzz process drives: one mcptest server "t"
// behind it, a token for the fuzzed connection, and a well-behaved
// connection that must keep working whatever the fuzzed one sends.
type live struct {
	br      *bridge.Bridge
	hostile string // token
	good    *capwire.Client
	ctl     *control.Client
	// baseline is the connection count with only good and ctl open.
	baseline int
}

// startLive boots the bridge; it is shut down, and every retirement
// checked, when the fuzz target ends.
func startLive(f *testing.F) *live {
	f.Helper()
	argv, env := mcptest.Command(mcptest.Scenario{})
	s := bridgetest.Stdio("t", argv, env)
	// A hostile input may leave calls running (slow, hang) until its
	// connection ends, and may ask for timeouts; keep every bound short
	// so one input cannot hold the process for long.
	s.MaxCallTimeout = 5 * time.Second
	s.MaxInflight = 64
	s.MaxQueue = 256
	srv := bridgetest.NewServer(f, bridgetest.WithServers(s), bridgetest.WithConfig(func(c *config.Config) {
		c.Bridge.WriteTimeout = 2 * time.Second
		c.Bridge.ShutdownGrace = 5 * time.Second
	}))
	l := &live{br: srv.Bridge}
	l.hostile = srv.Grant(map[string][]string{"t": hostileTools})
	l.good = srv.Dial(srv.Grant(map[string][]string{"t": {"echo"}}))
	l.ctl = srv.Control()
	st, err := l.status()
	if err != nil {
		f.Fatal(err)
	}
	l.baseline = st.Connections
	return l
}

func (l *live) status() (*control.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.ctl.Status(ctx)
}

// echo makes one call on the good connection and checks its answer.
func (l *live) echo(text string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := l.good.Call(ctx, "t", "echo", map[string]any{"text": text})
	if err != nil {
		return err
	}
	if r.Text() != text || r.IsError {
		return fmt.Errorf("echo %q answered %+v", text, r)
	}
	return nil
}

// Seeds: real frames, whole and broken.
func frame(m capwire.Message) []byte {
	b, err := capwire.AppendFrame(nil, m, 0)
	if err != nil {
		panic(err)
	}
	return b
}

func call(id uint64, tool string, args map[string]any) []byte {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := msgpack.Marshal(args)
	if err != nil {
		panic(err)
	}
	return frame(&capwire.CallMsg{ID: id, Cap: "mcp.t", Op: tool, Args: raw})
}

// rawFrame frames any MessagePack value, including envelopes the capwire
// encoder refuses to write.
func rawFrame(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(prefix(uint32(len(b))), b...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func prefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// withHello is the first byte of an input: bit 0 set means "prepend a
// valid hello with the fuzzed connection's token", so the fuzzer spends
// its time past the handshake as well as on it.
const withHello = 1

// FuzzCallSocket writes arbitrary bytes to a live call socket (a real
// bridge with the mcptest server behind it) and checks that the bridge
// neither panics nor hangs, that it ends the hostile connection once the
// client has finished sending, that no connection or call is left behind,
// and that a second, well-behaved connection keeps getting its echo
// answered throughout. Every wait is bounded.
func FuzzCallSocket(f *testing.F) {
	l := startLive(f)
	echo := call(1, "echo", map[string]any{"text": "hi"})
	seeds := [][]byte{
		// Past the handshake: real calls, alone and together.
		echo,
		cat(call(1, "add", map[string]any{"a": 1, "b": 2}), call(2, "content", nil), call(3, "fail", map[string]any{"message": "m"})),
		cat(call(1, "slow", map[string]any{"ms": 60000}), frame(&capwire.CancelMsg{ID: 1}), echo[:9]),
		cat(call(7, "hang", nil), call(8, "slow", map[string]any{"ms": 30000, "text": "t"})),
		cat(call(1, "duplicate_id", nil), call(2, "string_id", nil), call(3, "unknown_id", nil), call(4, "result_and_error", nil), call(5, "bad_utf8", nil), call(6, "long_line", map[string]any{"bytes": 1 << 25})),
		cat(call(1, "server_request", map[string]any{"method": "sampling/createMessage"}), call(2, "notify", map[string]any{"method": "notifications/tools/list_changed"})),
		cat(call(1, "progress", map[string]any{"steps": 3, "interval_ms": 10}), call(2, "cancellations", nil)),
		cat(call(1, "crash", nil), call(2, "kill", nil), call(3, "nope", nil)),
		cat(call(1, "hang", nil), call(1, "hang", nil)),                                                   // duplicate id in flight
		cat(call(1, "echo", map[string]any{"text": 7})),                                                   // tool-level bad input
		rawFrame(map[string]any{"t": "call", "id": 1, "cap": "mcp.t", "op": "echo", "args": []any{1, 2}}), // args not a map
		rawFrame(map[string]any{"t": "call", "id": -1, "cap": "mcp.t", "op": "echo", "args": map[string]any{}}),
		rawFrame(map[string]any{"t": "call", "id": 2, "cap": "mcp.nope", "op": "echo", "args": map[string]any{"text": "x"}}),
		rawFrame(map[string]any{"t": "call", "id": 3, "cap": "t", "op": "echo", "args": map[string]any{"text": "x"}}),
		rawFrame(map[string]any{"t": "call", "id": 4, "cap": "mcp.t", "op": "echo", "args": map[string]any{"text": "x"}, "timeout_ms": 1}),
		frame(&capwire.HelloMsg{V: 1, Token: "again"}), // a second hello
		frame(&capwire.ResultMsg{ID: 1}),                     // a type a client may not send
		cat(prefix(0)),                                       // zero-length frame
		cat(prefix(0xFFFFFFFF), []byte("0123456789")),        // huge length
		cat(prefix(16<<20-1), []byte("0123456789")),          // large announced, little sent
		echo[:len(echo)/2],                                   // truncated frame
		echo[:2],                                             // truncated prefix
		cat(prefix(3), []byte{0x81, 0xa1, 't'}),              // map missing its value
		cat(prefix(2), []byte{0x91, 0xc0}),                   // not a map
		cat(prefix(5), []byte{0xc1, 0xc1, 0xc1, 0xc1, 0xc1}), // never-used byte
	}
	var many []byte
	for id := range uint64(80) { // past max_conn_inflight
		many = append(many, call(id, "slow", map[string]any{"ms": 50})...)
	}
	seeds = append(seeds, many)
	for _, s := range seeds {
		f.Add(append([]byte{withHello}, s...))
	}
	// On the handshake itself.
	for _, s := range [][]byte{
		frame(&capwire.HelloMsg{V: 1, Token: l.hostile}),
		cat(frame(&capwire.HelloMsg{V: 1, Token: l.hostile}), echo),
		frame(&capwire.HelloMsg{V: 1, Token: "cbt1.0000000000000000.00000000000000000000000000000000"}),
		frame(&capwire.HelloMsg{V: 2, Token: l.hostile}),
		echo,
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		{},
	} {
		f.Add(append([]byte{0}, s...))
	}

	n := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		n++
		var in []byte
		if len(data) > 0 && data[0]&withHello != 0 {
			in = frame(&capwire.HelloMsg{V: 1, Token: l.hostile})
		}
		if len(data) > 0 {
			in = append(in, data[1:]...)
		}
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: l.br.CallSocket(), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Read whatever the bridge answers, concurrently, so its replies
		// never back up behind our writes; done reports how the stream
		// ended.
		done := make(chan error, 1)
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := io.Copy(io.Discard, c)
			done <- err
		}()
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, werr := c.Write(in)
		var ne net.Error
		if errors.As(werr, &ne) && ne.Timeout() {
			t.Fatalf("the bridge stopped reading the connection without closing it: %v", werr)
		}
		// The well-behaved connection is answered while the hostile one
		// is still open, calls of its possibly still running.
		if err := l.echo(fmt.Sprint("good ", n)); err != nil {
			t.Fatalf("the well-behaved connection failed while another sent %d hostile bytes: %v", len(in), err)
		}
		// Once the client has sent everything, the bridge must end the
		// connection: calls still running are cancelled, replies are
		// written, and the socket closes.
		_ = c.CloseWrite()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("the bridge did not end the connection after the client finished: %v", err)
		}
		c.Close()
		// Nothing is left behind: the connection is gone from the
		// bridge's books and no call of it still runs at the server.
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := l.status()
			if err != nil {
				t.Fatal(err)
			}
			srv := st.Servers[0]
			if bridge.State(srv.State) != bridge.StateReady {
				t.Fatalf("server is %s after the input: %s %s", srv.State, srv.Reason, srv.StderrTail)
			}
			if st.Connections == l.baseline && srv.Inflight == 0 && srv.Queued == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the connection ended: %v connections (want %d), %d calls running, %d queued", st.Connections, l.baseline, srv.Inflight, srv.Queued)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err := l.echo("after"); err != nil {
			t.Fatalf("the well-behaved connection after the input: %v", err)
		}
	})
}

// isReset reports a connection the bridge reset (it closed with our
// bytes unread), which is an orderly end for this purpose.
func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset by peer")
}
