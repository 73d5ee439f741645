package bridge

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A flood of connections that never say hello fills the strangers'
// budget and keeps refilling it, and a program with a token still
// connects and gets its results: each new connection displaces the
// oldest stranger, so the flood recycles its own.
func TestStrangerFloodLetsTokenIn(t *testing.T) {
	defer leakcheck.Check(t)()
	const budget = 8
	tb := startBridge(t, func(c *config.Config) {
		c.Bridge.MaxUnauthConnections = budget
		c.Bridge.MaxUnauthPerUID = budget
		// Only displacement frees a stranger's place in this test.
		c.Bridge.HelloTimeout = time.Hour
	}, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})

	// Twice the budget of flooders, each holding one silent
	// connection and dialing again as soon as the bridge drops it: what a
	// stranger does to hold the budget.
	stop := make(chan struct{})
	var mu sync.Mutex
	held := map[net.Conn]bool{}
	var wg sync.WaitGroup
	defer func() {
		mu.Lock()
		close(stop)
		for c := range held {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for range 2 * budget {
		wg.Go(func() {
			for {
				c, err := net.Dial("unix", tb.CallSocket())
				mu.Lock()
				select {
				case <-stop:
					mu.Unlock()
					if err == nil {
						c.Close()
					}
					return
				default:
				}
				if err != nil {
					mu.Unlock()
					continue
				}
				held[c] = true
				mu.Unlock()
				_ = c.SetReadDeadline(time.Now().Add(backstop))
				_, _ = c.Read(make([]byte, 1)) // until dropped
				mu.Lock()
				delete(held, c)
				mu.Unlock()
				c.Close()
			}
		})
	}
	pending := func() int {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		return tb.calls.nPending
	}
	eventually(t, "the strangers' budget to fill", func() bool { return pending() == budget && tb.refusals.evicted.Load() > 0 })

	// The flood runs in this process, from the same uid, dialing again
	// the instant it is dropped: a connection of ours is silent for the
	// moment between connect and its hello, and may be dropped in that
	// moment. It may dial again, a few times; it must get through.
	const attempts = 20
	for i := range 3 {
		var c *capwire.Client
		var err error
		for n := 1; ; n++ {
			ctx, cancel := context.WithTimeout(context.Background(), backstop)
			c, err = capwire.Dial(ctx, tb.CallSocket(), token)
			cancel()
			if err == nil {
				t.Logf("connection %d into the flood: dial %d", i, n)
				break
			}
			if n == attempts {
				t.Fatalf("connection %d: %d dials into the flood failed, the last: %v", i, n, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), backstop)
		r, err := c.Call(ctx, "t", "echo", map[string]any{"text": "through"})
		cancel()
		c.Close()
		if err != nil || r.Text() != "through" {
			t.Fatalf("connection %d into the flood: %v, %v", i, r, err)
		}
	}
	if pending() > budget {
		t.Errorf("%d strangers held, budget %d", pending(), budget)
	}
	t.Logf("strangers displaced during the test: %d", tb.refusals.evicted.Load())
	tb.shutdown()
}

// allowed_uids is decided at accept, before the peer costs a place in
// any budget; the refused peer still reads why.
func TestAllowedUIDsAtAccept(t *testing.T) {
	for _, tc := range []struct {
		allowed []uint32
		uid     uint32
		ok      bool
	}{
		{nil, 1000, true},
		{[]uint32{}, 0, true},
		{[]uint32{1000, 1001}, 1001, true},
		{[]uint32{1000}, 1001, false},
		{[]uint32{0}, 1000, false},
	} {
		if got := uidAllowed(tc.allowed, tc.uid); got != tc.ok {
			t.Errorf("uidAllowed(%v, %d) = %v, want %v", tc.allowed, tc.uid, got, tc.ok)
		}
	}

	defer leakcheck.Check(t)()
	me := uint32(os.Getuid())
	t.Run("our uid allowed", func(t *testing.T) {
		tb := startBridge(t, func(c *config.Config) { c.Bridge.AllowedUIDs = []uint32{me + 1, me} }, mcptestServer("t", mcptest.Scenario{}))
		c := tb.dial(tb.grant(map[string][]string{"t": nil}))
		ctx, cancel := context.WithTimeout(context.Background(), backstop)
		defer cancel()
		if r, err := c.Call(ctx, "t", "echo", map[string]any{"text": "in"}); err != nil || r.Text() != "in" {
			t.Fatalf("call: %v, %v", r, err)
		}
		c.Close()
		tb.shutdown()
	})
	t.Run("our uid refused", func(t *testing.T) {
		tb := startBridge(t, func(c *config.Config) { c.Bridge.AllowedUIDs = []uint32{me + 1} }, mcptestServer("t", mcptest.Scenario{}))
		// A raw connection that sends nothing is told at once: the
		// refusal does not wait for a hello.
		raw := dialRaw(t, tb.CallSocket())
		f, ok := raw.next().(*capwire.FatalMsg)
		if !ok || f.Code != capwire.CodeBadToken || !strings.Contains(f.Message, "may not use") {
			t.Fatalf("got %#v, want bad_token for the uid", f)
		}
		tb.mu.Lock()
		n := tb.calls.nPending
		tb.mu.Unlock()
		if n != 0 || tb.refusals.uid.Load() != 1 {
			t.Fatalf("strangers %d, uid refusals %d: a refused peer must cost no place", n, tb.refusals.uid.Load())
		}
		tb.shutdown()
	})
}

// bubbleBridge is a bridge inside a synctest bubble, serving call
// connections over net.Pipe (no socket, no server process), so its
// timers run on the bubble's clock.
func bubbleBridge(t *testing.T, tweak func(*config.Bridge)) (*Bridge, string) {
	cfg := config.Defaults()
	cfg.Servers = []config.Server{config.NewServer("t", "/nonexistent")}
	tweak(&cfg.Bridge)
	b := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	_, token, err := b.Grant(GrantSpec{Servers: map[string][]string{"t": nil}, TTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return b, token
}

// pipeCall connects a client end to b over net.Pipe, as the accept loop
// would for a peer of uid.
func pipeCall(b *Bridge, uid uint32) (net.Conn, chan struct{}) {
	srv, client := net.Pipe()
	s := b.trackStranger(srv, uid)
	ended := make(chan struct{})
	go b.serveCallConn(srv, PeerCred{UID: uid}, s, func() {
		b.untrackCall(s)
		close(ended)
	})
	return client, ended
}

func pipeSend(t *testing.T, c net.Conn, m capwire.Message) {
	t.Helper()
	f, err := capwire.AppendFrame(nil, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(f); err != nil {
		t.Fatal(err)
	}
}

func pipeRecv(t *testing.T, fr *capwire.FrameReader) capwire.Message {
	t.Helper()
	f, err := fr.ReadFrame(nil)
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	m, err := capwire.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An authenticated connection with no call in flight is closed after
// idle_timeout; a call restarts the wait. A stranger that never says
// hello is closed after hello_timeout.
func TestIdleAndHelloTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, token := bubbleBridge(t, func(c *config.Bridge) {
			c.IdleTimeout = time.Minute
			c.HelloTimeout = 3 * time.Second
		})

		silent, silentEnded := pipeCall(b, 1000)
		start := time.Now()
		<-silentEnded
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("a silent stranger was dropped after %v, want hello_timeout, 3s", took)
		}
		silent.Close()

		client, ended := pipeCall(b, 1000)
		fr := capwire.NewFrameReader(client, 0)
		pipeSend(t, client, &capwire.HelloMsg{V: 1, Token: token})
		if m := pipeRecv(t, fr); m.Type() != "welcome" {
			t.Fatalf("got %#v, want welcome", m)
		}
		time.Sleep(40 * time.Second)
		// A call, denied at once (the server never booted): the minute
		// starts again from its reply.
		pipeSend(t, client, &capwire.CallMsg{ID: 1, Cap: "mcp.t", Op: "echo", Args: []byte{0x80}})
		if d, ok := pipeRecv(t, fr).(*capwire.DeniedMsg); !ok || d.Denial.Code != capwire.CodeServerUnavailable {
			t.Fatalf("got %#v, want server_unavailable", d)
		}
		replied := time.Now()
		if _, err := fr.ReadFrame(nil); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection: %v, want it closed (EOF)", err)
		}
		if took := time.Since(replied); took != time.Minute {
			t.Errorf("closed %v after the last call, want idle_timeout, 1m", took)
		}
		<-ended
		client.Close()
		if b.refusals.idle.Load() != 1 || b.refusals.hello.Load() != 1 {
			t.Errorf("idle %d, hello %d: want one of each counted", b.refusals.idle.Load(), b.refusals.hello.Load())
		}
		if err := b.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// Authenticated connections are capped per grant: a hello beyond the
// grant's share is refused bad_token, and the grant's place comes back
// when one of its connections ends.
func TestConnsPerGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, token := bubbleBridge(t, func(c *config.Bridge) { c.MaxConnsPerGrant = 1 })
		first, firstEnded := pipeCall(b, 1000)
		fr := capwire.NewFrameReader(first, 0)
		pipeSend(t, first, &capwire.HelloMsg{V: 1, Token: token})
		if m := pipeRecv(t, fr); m.Type() != "welcome" {
			t.Fatalf("first: %#v", m)
		}
		second, secondEnded := pipeCall(b, 1000)
		hello, err := capwire.AppendFrame(nil, &capwire.HelloMsg{V: 1, Token: token}, 0)
		if err != nil {
			t.Fatal(err)
		}
		go second.Write(hello)
		f, ok := pipeRecv(t, capwire.NewFrameReader(second, 0)).(*capwire.FatalMsg)
		if !ok || f.Code != capwire.CodeBadToken || !strings.Contains(f.Message, "max_conns_per_grant") {
			t.Fatalf("second: %#v, want bad_token naming the grant's budget", f)
		}
		<-secondEnded
		second.Close()
		first.Close()
		<-firstEnded
		third, thirdEnded := pipeCall(b, 1000)
		fr = capwire.NewFrameReader(third, 0)
		pipeSend(t, third, &capwire.HelloMsg{V: 1, Token: token})
		if m := pipeRecv(t, fr); m.Type() != "welcome" {
			t.Fatalf("third, after the first ended: %#v", m)
		}
		third.Close()
		<-thirdEnded
		if err := b.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// Two grants against one slow server each get their share: with
// max_inflight_per_grant 1, grant A's second call queues while grant B's
// call runs beside A's first, which the server itself reports; A's
// call beyond its queue share is refused naming the grant.
func TestGrantsShareAServer(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := mcptestServer("t", mcptest.Scenario{})
	srv.MaxInflight, srv.MaxInflightPerGrant = 3, 1
	srv.MaxQueue, srv.MaxQueuePerGrant = 8, 1
	tb := startBridge(t, nil, srv)
	ca := tb.dial(tb.grant(map[string][]string{"t": nil}))
	cb := tb.dial(tb.grant(map[string][]string{"t": nil}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hang := func(c *capwire.Client) chan error {
		done := make(chan error, 1)
		go func() { _, err := c.Call(ctx, "t", "hang", nil); done <- err }()
		return done
	}
	s := tb.srv("t")
	a1 := hang(ca)
	waitInflight(t, tb, "t", 1)
	a2 := hang(ca)
	eventually(t, "grant A's second call to queue", func() bool { return s.adm.Queued() == 1 })
	b1 := hang(cb)
	waitInflight(t, tb, "t", 2)
	if s.adm.Queued() != 1 {
		t.Fatalf("queued %d, want A's second call still waiting", s.adm.Queued())
	}
	// The operator is a grant of its own: its call takes the third slot
	// and asks the server what runs there.
	cc := tb.control()
	r, err := cc.Call(ctx, &control.CallRequest{Server: "t", Tool: "running"})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Running []mcptest.Running `msgpack:"running"`
	}
	if err := r.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Running) != 2 || out.Running[0].Tool != "hang" || out.Running[1].Tool != "hang" {
		t.Fatalf("running at the server: %+v, want A's first and B's hang", out.Running)
	}
	// A's queue share (1) is taken by its second call.
	_, err = ca.Call(ctx, "t", "echo", map[string]any{"text": "x"})
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeOverloaded || !strings.Contains(d.Message, "this grant") {
		t.Fatalf("A's third call: %v, want overloaded naming the grant", err)
	}
	cancel()
	for _, ch := range []chan error{a1, a2, b1} {
		if err := <-ch; !errors.Is(err, context.Canceled) {
			t.Errorf("hang: %v", err)
		}
	}
	ca.Close()
	cb.Close()
	cc.Close()
	tb.shutdown()
}

// Many connections each announce a 16 MiB frame and send part of it:
// the bytes held for them stay within max_partial_bytes (the largest are
// refused frame_too_large), whatever they announced. The process's RSS
// is logged for the record, not asserted: it depends on the collector
// and includes this test's own clients, in the same process.
func TestPartialFramesBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	const conns, sent, limit = 20, 1 << 20, 8 << 20
	tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxPartialBytes = limit; loadConns(c) }, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	rssBefore := rssKiB(t)
	ws := make([]*wireConn, conns)
	for i := range ws {
		ws[i] = mustDialWire(t, tb.CallSocket(), token)
		// The writes may block once the bridge stops reading a refused
		// frame; each goes on in its own goroutine, ended by Close.
		go ws[i].c.Write(append(binary.BigEndian.AppendUint32(nil, 16<<20), make([]byte, sent)...))
	}
	// 20 × 1 MiB (each charged up to twice that) cannot fit in 8 MiB:
	// the budget must refuse some.
	eventually(t, "the budget to refuse the largest partial frames", func() bool { return tb.partial.Refused() > 0 })
	used := tb.partial.Used()
	t.Logf("%d connections × %d bytes of 16 MiB frames: %d refused, %d bytes charged (limit %d); RSS %d KiB → %d KiB",
		conns, sent, tb.partial.Refused(), used, limit, rssBefore, rssKiB(t))
	if used > limit || tb.partial.Refused() == 0 {
		t.Fatalf("charged %d of %d with %d refused: the budget did not hold", used, limit, tb.partial.Refused())
	}
	for _, w := range ws {
		w.c.Close()
	}
	eventually(t, "every partial frame to return its charge", func() bool { return tb.partial.Used() == 0 })
	tb.shutdown()
}

func rssKiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}
