package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// The fault tests: a server that dies mid-call, a server too
// slow for its deadline, a client that disconnects mid-call, and a client
// that never reads. Each runs real mcptest children behind a real bridge
// on real sockets, and checks from the server's side (the cancellations
// tool) that abandoned calls were cancelled there too.

// wireConn is a call-socket client that speaks capwire frame by frame, so
// a test chooses every byte it sends (timeout_ms without a local deadline,
// calls it never waits for, no reading at all) and sees every frame that
// comes back, including any duplicate reply capwire.Client would hide.
// Methods return errors rather than failing the test, so they can be used
// from any goroutine. Not safe for concurrent use.
type wireConn struct {
	c  *net.UnixConn
	fr *capwire.FrameReader
}

// dialWire connects and completes the handshake with token.
func dialWire(path, token string) (*wireConn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	w := &wireConn{c: c, fr: capwire.NewFrameReader(c, 0)}
	if err := w.send(&capwire.HelloMsg{V: capwire.Version, Token: token}); err != nil {
		c.Close()
		return nil, err
	}
	m, err := w.recv(backstop)
	if err != nil {
		c.Close()
		return nil, err
	}
	if _, ok := m.(*capwire.WelcomeMsg); !ok {
		c.Close()
		return nil, fmt.Errorf("handshake answered %T %+v, want welcome", m, m)
	}
	return w, nil
}

// mustDialWire is dialWire for the test goroutine; the connection is
// closed at cleanup.
func mustDialWire(t *testing.T, path, token string) *wireConn {
	t.Helper()
	w, err := dialWire(path, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.c.Close() })
	return w
}

// callFrame encodes a call frame; args is encoded as a MessagePack map.
func callFrame(id uint64, server, tool string, args map[string]any, timeoutMS uint64) ([]byte, error) {
	raw, err := msgpack.Marshal(args)
	if err != nil {
		return nil, err
	}
	return capwire.AppendFrame(nil, &capwire.CallMsg{ID: id, Cap: capwire.CapPrefix + server, Op: tool, Args: raw, TimeoutMS: timeoutMS}, 0)
}

// send writes one message, bounded by a write deadline.
func (w *wireConn) send(m capwire.Message) error {
	frame, err := capwire.AppendFrame(nil, m, 0)
	if err != nil {
		return err
	}
	return w.write(frame)
}

// call sends one call frame.
func (w *wireConn) call(id uint64, server, tool string, args map[string]any, timeoutMS uint64) error {
	frame, err := callFrame(id, server, tool, args, timeoutMS)
	if err != nil {
		return err
	}
	return w.write(frame)
}

// write writes b; the deadline is a backstop against a bridge that
// neither reads nor closes.
func (w *wireConn) write(b []byte) error {
	_ = w.c.SetWriteDeadline(time.Now().Add(backstop))
	_, err := w.c.Write(b)
	return err
}

// recv reads the next frame, waiting at most d, and decodes it.
func (w *wireConn) recv(d time.Duration) (capwire.Message, error) {
	_ = w.c.SetReadDeadline(time.Now().Add(d))
	frame, err := w.fr.ReadFrame(nil)
	if err != nil {
		return nil, err
	}
	return capwire.Decode(frame)
}

// mustRecvDenied reads the next frame and checks it denies call id with
// code.
func (w *wireConn) mustRecvDenied(t *testing.T, id uint64, code string) *capwire.DeniedMsg {
	t.Helper()
	m, err := w.recv(30 * time.Second)
	if err != nil {
		t.Fatalf("waiting for the denial of call %d: %v", id, err)
	}
	d, ok := m.(*capwire.DeniedMsg)
	if !ok || d.ID != id || d.Denial.Code != code {
		t.Fatalf("got %T %+v, want denied %s for call %d", m, m, code, id)
	}
	return d
}

// cancellations asks server (through c) which calls it has seen
// cancelled.
func cancellations(c *capwire.Client, server string) ([]mcptest.Cancellation, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Call(ctx, server, "cancellations", nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Cancelled []mcptest.Cancellation `msgpack:"cancelled"`
	}
	if err := r.Decode(&out); err != nil {
		return nil, err
	}
	return out.Cancelled, nil
}

// waitRunning asks server until at least n calls of tool are running
// there. Counting calls admitted at the bridge is not enough before a
// cancellation is tested: a call admitted but not yet written to the
// server's stdin is withdrawn without a notifications/cancelled, as it
// should be, and the server would never hear of it.
func waitRunning(t *testing.T, c *capwire.Client, server, tool string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d calls of %s running at server %s", n, tool, server), func() bool {
		k := 0
		for _, x := range runningAt(t, c, server) {
			if x.Tool == tool {
				k++
			}
		}
		return k >= n
	})
}

// runningAt asks server (an mcptest server) which calls it is running.
func runningAt(t *testing.T, c *capwire.Client, server string) []mcptest.Running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Call(ctx, server, "running", nil)
	if err != nil {
		t.Fatalf("running: %v", err)
	}
	var out struct {
		Running []mcptest.Running `msgpack:"running"`
	}
	if err := r.Decode(&out); err != nil {
		t.Fatalf("running: %v", err)
	}
	return out.Running
}

// waitCancelled asks server until it has seen at least n cancellations
// of tool. The bridge cancels asynchronously for a client that went away,
// and only the server's record shows it, hence the asking.
func waitCancelled(t *testing.T, c *capwire.Client, server, tool string, n int) []mcptest.Cancellation {
	t.Helper()
	var of []mcptest.Cancellation
	eventually(t, fmt.Sprintf("%d cancellations of %s at server %s", n, tool, server), func() bool {
		got, err := cancellations(c, server)
		if err != nil {
			t.Fatalf("cancellations: %v", err)
		}
		of = of[:0]
		for _, x := range got {
			if x.Tool == tool {
				of = append(of, x)
			}
		}
		return len(of) >= n
	})
	return of
}

func faultCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A server that dies in the middle of a call (exit or SIGKILL) answers
// that call server_unavailable with its last words, and every later call
// too; a second server on the same bridge, and the same connection, keep
// working, including a call that was running on the other server when the
// first one died.
func TestServerCrashMidCall(t *testing.T) {
	for _, tc := range []struct {
		tool, lastWords string
	}{
		{"crash", "mcptest: crashing in the middle of call"},
		{"kill", "mcptest: killing myself with SIGKILL in the middle of call"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			defer leakcheck.Check(t)()
			// Room for the hung calls and the fatal one to run together;
			// the victim's callers are shown its stderr.
			tb := startBridge(t, func(c *config.Config) {
				c.Servers[0].MaxInflight, c.Servers[0].StderrToCaller = 32, true
				soleGrant(&c.Servers[0])
			},
				neverRestart(mcptestServer("victim", mcptest.Scenario{})), mcptestServer("other", mcptest.Scenario{}))
			token := tb.grant(map[string][]string{"victim": nil, "other": nil})
			c := tb.dial(token)
			ctx := faultCtx(t)

			// Calls in flight at the victim on other connections when it
			// dies: each is answered, once, server_unavailable.
			const conns, hangs = 3, 5
			var bystanders []*wireConn
			for range conns {
				w := mustDialWire(t, tb.CallSocket(), token)
				for id := uint64(1); id <= hangs; id++ {
					if err := w.call(id, "victim", "hang", map[string]any{}, 0); err != nil {
						t.Fatal(err)
					}
				}
				bystanders = append(bystanders, w)
			}
			waitInflight(t, tb, "victim", conns*hangs)

			// A call in flight on the other server while the victim dies.
			slow := make(chan error, 1)
			go func() {
				r, err := c.Call(ctx, "other", "slow", map[string]any{"ms": 300, "text": "survived"})
				if err == nil && r.Text() != "survived" {
					err = fmt.Errorf("slow answered %q", r.Text())
				}
				slow <- err
			}()

			_, err := c.Call(ctx, "victim", tc.tool, nil)
			var d *capwire.Denied
			if !errors.As(err, &d) || d.Code != capwire.CodeServerUnavailable {
				t.Fatalf("%s: err = %v, want server_unavailable", tc.tool, err)
			}
			if !strings.Contains(d.Message, tc.lastWords) {
				t.Errorf("denial message %q lacks the stderr tail %q", d.Message, tc.lastWords)
			}
			if err := <-slow; err != nil {
				t.Errorf("call on the other server: %v", err)
			}
			for i, w := range bystanders {
				seen := map[uint64]bool{}
				for range hangs {
					m, err := w.recv(30 * time.Second)
					d, ok := m.(*capwire.DeniedMsg)
					if err != nil || !ok || d.Denial.Code != capwire.CodeServerUnavailable || d.ID < 1 || d.ID > hangs || seen[d.ID] {
						t.Fatalf("connection %d: %+v, %v after %v; want server_unavailable once per call", i, m, err, sortedIDs(seen))
					}
					if !strings.Contains(d.Denial.Message, tc.lastWords) {
						t.Errorf("denial message %q lacks the stderr tail %q", d.Denial.Message, tc.lastWords)
					}
					seen[d.ID] = true
				}
				w.c.Close()
			}
			for i := range 5 {
				r, err := c.Call(ctx, "other", "echo", map[string]any{"text": fmt.Sprint("still here ", i)})
				if err != nil || r.Text() != fmt.Sprint("still here ", i) {
					t.Fatalf("other server after the crash: %+v, %v", r, err)
				}
			}
			// Under restart = "never" the dead server stays dead: later
			// calls are refused at once, still with the reason.
			_, err = c.Call(ctx, "victim", "echo", map[string]any{"text": "x"})
			if !errors.As(err, &d) || d.Code != capwire.CodeServerUnavailable || strings.Count(d.Message, tc.lastWords) != 1 {
				t.Errorf("call after the death: %v, want server_unavailable with the stderr tail, once", err)
			}
			ctl := tb.control()
			st, err := ctl.Status(ctx)
			ctl.Close()
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]State{}
			for _, s := range st.Servers {
				states[s.Name] = State(s.State)
				if s.Name == "victim" && !strings.Contains(s.StderrTail, tc.lastWords) {
					t.Errorf("status stderr_tail of the dead server = %q, want %q in it", s.StderrTail, tc.lastWords)
				}
			}
			if states["victim"] != StateDead || states["other"] != StateReady {
				t.Errorf("states = %v, want victim dead and other ready", states)
			}
			c.Close()
			tb.shutdown()
		})
	}
}

// A call that outlives its deadline is denied timeout, and the server is
// told with notifications/cancelled so it can stop the work. The deadline
// is the client's timeout_ms, capped by max_call_timeout, or call_timeout
// when the client gives none.
func TestSlowServerTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tool      string
		args      map[string]any
		timeoutMS uint64
		tweak     func(*config.Server)
	}{
		{name: "slow/timeout_ms", tool: "slow", args: map[string]any{"ms": 30000, "text": "late"}, timeoutMS: 150},
		{name: "hang/timeout_ms", tool: "hang", args: map[string]any{}, timeoutMS: 150},
		{name: "hang/max_call_timeout caps timeout_ms", tool: "hang", args: map[string]any{}, timeoutMS: 1 << 40,
			tweak: func(s *config.Server) { s.MaxCallTimeout = 150 * time.Millisecond }},
		{name: "hang/call_timeout without timeout_ms", tool: "hang", args: map[string]any{},
			tweak: func(s *config.Server) { s.CallTimeout = 150 * time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			srv := mcptestServer("t", mcptest.Scenario{})
			if tc.tweak != nil {
				tc.tweak(&srv)
			}
			tb := startBridge(t, nil, srv)
			token := tb.grant(map[string][]string{"t": nil})
			w := mustDialWire(t, tb.CallSocket(), token)
			if err := w.call(1, "t", tc.tool, tc.args, tc.timeoutMS); err != nil {
				t.Fatal(err)
			}
			w.mustRecvDenied(t, 1, capwire.CodeTimeout)

			// The bridge sends notifications/cancelled before it answers
			// the caller, so the server has it by now.
			observer := tb.dial(token)
			got, err := cancellations(observer, "t")
			observer.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Tool != tc.tool || got[0].Reason != "timed out" {
				t.Fatalf("server saw cancellations %+v, want one of %s, timed out", got, tc.tool)
			}
			// The connection and the server are still good.
			if err := w.call(2, "t", "echo", map[string]any{"text": "after"}, 0); err != nil {
				t.Fatal(err)
			}
			m, err := w.recv(30 * time.Second)
			if r, ok := m.(*capwire.ResultMsg); err != nil || !ok || r.ID != 2 || r.Result.Text() != "after" {
				t.Fatalf("echo after the timeout: %+v, %v", m, err)
			}
			w.c.Close()
			tb.shutdown()
		})
	}
}

// Many calls timing out together each get one timeout denial, and the
// server hears of every one.
func TestManyTimeoutsAllCancelled(t *testing.T) {
	defer leakcheck.Check(t)()
	const conns, perConn = 4, 25
	tb := startBridge(t, func(c *config.Config) { c.Servers[0].MaxInflight = conns * perConn; soleGrant(&c.Servers[0]) },
		mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	var ws []*wireConn
	for range conns {
		w := mustDialWire(t, tb.CallSocket(), token)
		for id := uint64(1); id <= perConn; id++ {
			tool, args := "hang", map[string]any{}
			if id%2 == 0 {
				tool, args = "slow", map[string]any{"ms": 30000}
			}
			if err := w.call(id, "t", tool, args, 300); err != nil {
				t.Fatal(err)
			}
		}
		ws = append(ws, w)
	}
	for i, w := range ws {
		seen := map[uint64]bool{}
		for range perConn {
			m, err := w.recv(30 * time.Second)
			d, ok := m.(*capwire.DeniedMsg)
			if err != nil || !ok || d.Denial.Code != capwire.CodeTimeout || d.ID < 1 || d.ID > perConn || seen[d.ID] {
				t.Fatalf("connection %d: %+v, %v after %v; want timeout once per call", i, m, err, sortedIDs(seen))
			}
			seen[d.ID] = true
		}
		w.c.Close()
	}
	observer := tb.dial(token)
	got, err := cancellations(observer, "t")
	observer.Close()
	if err != nil {
		t.Fatal(err)
	}
	byTool := map[string]int{}
	for _, x := range got {
		if x.Reason != "timed out" {
			t.Errorf("cancellation %+v, want reason timed out", x)
		}
		byTool[x.Tool]++
	}
	if want := map[string]int{"hang": conns * ((perConn + 1) / 2), "slow": conns * (perConn / 2)}; !maps.Equal(byTool, want) {
		t.Errorf("server saw cancellations %v, want %v", byTool, want)
	}
	tb.shutdown()
}

// A call the client abandons (a cancel frame, or the connection closing)
// is cancelled at the server too.
func TestClientAbandonCancelsServerCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		abandon func(w *wireConn) error
		// answered: the client still expects (and gets) a cancelled
		// denial for each call.
		answered bool
	}{
		{"cancel frame", func(w *wireConn) error {
			for id := uint64(1); id <= 3; id++ {
				if err := w.send(&capwire.CancelMsg{ID: id}); err != nil {
					return err
				}
			}
			return nil
		}, true},
		{"disconnect", func(w *wireConn) error { return w.c.Close() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
			token := tb.grant(map[string][]string{"t": nil})
			observer := tb.dial(token)
			w := mustDialWire(t, tb.CallSocket(), token)
			for id := uint64(1); id <= 3; id++ {
				if err := w.call(id, "t", "hang", map[string]any{}, 0); err != nil {
					t.Fatal(err)
				}
			}
			// All three must be running at the server before they are
			// abandoned, or the bridge could withdraw one before it starts.
			waitRunning(t, observer, "t", "hang", 3)
			if err := tc.abandon(w); err != nil {
				t.Fatal(err)
			}
			if tc.answered {
				seen := map[uint64]bool{}
				for range 3 {
					m, err := w.recv(30 * time.Second)
					d, ok := m.(*capwire.DeniedMsg)
					if err != nil || !ok || d.Denial.Code != capwire.CodeCancelled || seen[d.ID] || d.ID < 1 || d.ID > 3 {
						t.Fatalf("after cancel: %+v, %v (seen %v)", m, err, seen)
					}
					seen[d.ID] = true
				}
			}
			got := waitCancelled(t, observer, "t", "hang", 3)
			if len(got) != 3 {
				t.Errorf("server saw %d cancellations of hang, want 3: %+v", len(got), got)
			}
			waitInflight(t, tb, "t", 0)
			w.c.Close()
			observer.Close()
			tb.shutdown()
		})
	}
}

// waitInflight waits (bounded) until server has exactly n calls running.
func waitInflight(t *testing.T, tb *testBridge, server string, n int64) {
	t.Helper()
	s := tb.srv(server)
	eventually(t, fmt.Sprintf("%d calls running at server %q", n, server), func() bool { return s.adm.Running() == n })
}

// A client that stops reading stalls only its own connection: while the
// bridge holds more of its replies than any socket buffer can take,
// another client on the same server gets every answer, and none of the
// stalled client's replies is lost. write_timeout is long enough never
// to end the stall during the test, so the good client's calls cannot
// merely be waiting for the stalled connection to be dropped.
func TestStalledReaderCannotStallOthers(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) {
		c.Bridge.WriteTimeout = time.Hour
		// Capacity is not what this test is about: make room for every
		// call the stalled client can have in flight plus the good
		// client's, so only a stall could fail the good client.
		c.Servers[0].MaxInflight = 2 * c.Bridge.MaxConnInflight
		c.Servers[0].MaxQueue = 1024
		soleGrant(&c.Servers[0])
	}, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	good := tb.dial(token)
	observer := tb.dial(token)
	stalled := mustDialWire(t, tb.CallSocket(), token)

	// Calls still running when the stalled client goes away.
	const hangs = 4
	for id := uint64(1); id <= hangs; id++ {
		if err := stalled.call(id, "t", "hang", map[string]any{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitInflight(t, tb, "t", hangs)
	// Then 16 MiB of results, far more than the socket between the
	// bridge and the client holds (a few hundred KiB unless tuned), so
	// that once the server has answered them all, the bridge's writer for
	// this connection is blocked with replies still to write.
	const big, size = 32, 512 << 10
	var batch []byte
	for id := uint64(hangs + 1); id <= hangs+big; id++ {
		f, err := callFrame(id, "t", "long_line", map[string]any{"bytes": size}, 0)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, f...)
	}
	if err := stalled.write(batch); err != nil {
		t.Fatal(err)
	}
	s := tb.srv("t")
	eventually(t, "the server to answer every large call", func() bool {
		return s.calls.Load() == hangs+big && s.adm.Running() == hangs
	})

	ctx := faultCtx(t)
	for i := range 20 {
		text := fmt.Sprint("good ", i)
		r, err := good.Call(ctx, "t", "echo", map[string]any{"text": text})
		if err != nil || r.Text() != text {
			t.Fatalf("good client's call %d while another stalls: %+v, %v", i, r, err)
		}
	}
	// The stalled connection was never dropped: every reply is there.
	seen := map[uint64]bool{}
	for range big {
		m, err := stalled.recv(backstop)
		r, ok := m.(*capwire.ResultMsg)
		if err != nil || !ok || r.ID <= hangs || r.ID > hangs+big || seen[r.ID] || len(r.Result.Text()) < size/2 {
			t.Fatalf("stalled client, after %d replies: %T, %v; want each large result once", len(seen), m, err)
		}
		seen[r.ID] = true
	}
	// The calls it left running are cancelled at the server when it goes.
	stalled.c.Close()
	waitCancelled(t, observer, "t", "hang", hangs)
	waitInflight(t, tb, "t", 0)
	good.Close()
	observer.Close()
	tb.shutdown()
}

// A client that stops reading is dropped once a write has waited
// write_timeout, and the calls it left running are cancelled at the
// server. The test only needs the timeout to pass eventually, so a short
// one cannot race anything.
func TestStalledReaderIsDropped(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) {
		c.Bridge.WriteTimeout = 300 * time.Millisecond
		c.Servers[0].MaxInflight = 2 * c.Bridge.MaxConnInflight
		c.Servers[0].MaxQueue = 1024
		soleGrant(&c.Servers[0])
	}, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	observer := tb.dial(token)
	stalled := mustDialWire(t, tb.CallSocket(), token)
	const hangs = 4
	for id := uint64(1); id <= hangs; id++ {
		if err := stalled.call(id, "t", "hang", map[string]any{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitInflight(t, tb, "t", hangs)
	// Calls with large results, never read, until the bridge drops the
	// connection and a write fails (EPIPE or ECONNRESET). A write that
	// times out means the bridge neither read nor dropped us.
	for id := uint64(hangs + 1); ; id++ {
		err := stalled.call(id, "t", "long_line", map[string]any{"bytes": 256 << 10}, 0)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the bridge neither read nor dropped a client that does not read: %v", err)
		}
		break
	}
	waitCancelled(t, observer, "t", "hang", hangs)
	waitInflight(t, tb, "t", 0)
	stalled.c.Close()
	observer.Close()
	tb.shutdown()
}

// sortedIDs is for failure messages.
func sortedIDs(m map[uint64]bool) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// A result that does not fit in a frame reaches the client as
// result_too_large, and the audit line says so too: the audit records the
// reply the client got, not the result the server sent.
func TestAuditOfResultTooLarge(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxFrame = 64 << 10 }, cannedServer("canned"))
	tb.audit = zerolog.New(&sink)
	c := tb.dial(tb.grant(map[string][]string{"canned": nil}))
	_, err := c.Call(faultCtx(t), "canned", "many_markers", nil)
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeResultTooLarge {
		t.Fatalf("err = %v, want result_too_large", err)
	}
	c.Close()
	tb.shutdown()
	calls := sink.lines("call")
	if len(calls) != 1 || calls[0]["outcome"] != capwire.CodeResultTooLarge {
		t.Fatalf("audit call lines %v, want one with outcome result_too_large", calls)
	}
}

// A client that never reads cannot hold up Shutdown either. Its large
// replies are released only once the shutdown has begun, so the
// bridge's writer stalls during the shutdown, not before it; Shutdown
// must still return, and the client must find its connection cut short.
func TestStalledReaderCannotStallShutdown(t *testing.T) {
	defer leakcheck.Check(t)()
	gate := filepath.Join(t.TempDir(), "gate")
	if err := unix.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := cannedServer("canned")
	srv.Env[cannedGateEnv] = gate
	const calls = 32 // 16 MiB of replies: far beyond any socket buffer
	tb := startBridge(t, func(c *config.Config) {
		c.Bridge.WriteTimeout = 300 * time.Millisecond
		c.Servers[0].MaxInflight = calls
		soleGrant(&c.Servers[0])
	}, srv)
	stalled := mustDialWire(t, tb.CallSocket(), tb.grant(map[string][]string{"canned": nil}))
	for id := uint64(1); id <= calls; id++ {
		if err := stalled.call(id, "canned", "gated", map[string]any{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	tb.waitRunning("canned", calls)

	// The grace period never ends by itself: the calls finish within it.
	stopped := make(chan struct{})
	go func() { tb.shutdownAt(make(chan time.Time)); close(stopped) }()
	eventually(t, "the shutdown to close admission", tb.draining)
	w, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	select {
	case <-stopped:
	case <-time.After(backstop):
		t.Fatalf("Shutdown has not returned after %v with a client that does not read", backstop)
	}
	got := 0
	for {
		if _, err := stalled.recv(backstop); err != nil {
			break
		}
		got++
	}
	t.Logf("the client read %d of %d replies before its connection was cut", got, calls)
	if got == calls {
		t.Errorf("the client could read all %d replies after the shutdown: the bridge never stalled on it, so nothing was tested", calls)
	}
	stalled.c.Close()
}

// An operator's call on the control socket (capbridge call) is cancelled
// at the server when the operator's client goes away, as a program's is.
func TestControlCallerDisconnectCancels(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	ctl, err := control.Dial(faultCtx(t), tb.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ctl.Call(context.Background(), &control.CallRequest{Server: "t", Tool: "hang", Args: msgpack.RawMessage{0x80}})
		done <- err
	}()
	observer := tb.dial(tb.grant(map[string][]string{"t": nil}))
	waitRunning(t, observer, "t", "hang", 1)
	ctl.Close()
	if err := <-done; err == nil {
		t.Fatal("a hung call on a closed control connection returned a reply")
	}
	got := waitCancelled(t, observer, "t", "hang", 1)
	if got[0].Reason != "cancelled" {
		t.Errorf("cancellation %+v, want reason cancelled", got[0])
	}
	waitInflight(t, tb, "t", 0)
	observer.Close()
	tb.shutdown()
}
