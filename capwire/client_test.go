package capwire

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// waitFor bounds every wait in these tests: a backstop against a hang,
// never an expectation of speed (the machine is shared and the race
// detector is slow).
const waitFor = time.Minute

func TestDial(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startPeer(t, serveEcho)
	defer p.stop()
	ctx := testCtx(t)

	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Servers(); !reflect.DeepEqual(got, testServers) {
		t.Errorf("Servers() = %v", got)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Call(ctx, "github", "x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after Close: %v", err)
	}

	_, err = Dial(ctx, p.path, "bad")
	var f *FatalMsg
	if !errors.Is(err, ErrBadToken) || !errors.As(err, &f) || f.Message == "" {
		t.Errorf("bad token: err = %v", err)
	}
	if _, err := Dial(ctx, p.path+"-missing", "good"); err == nil {
		t.Error("dialing a missing socket succeeded")
	}
}

func TestDialRefusals(t *testing.T) {
	// Only the silent server is meant to outlast the ctx: it never
	// answers, so a short deadline ends its wait however slow the
	// machine. Every other script answers, and gets the ordinary backstop
	// to do so.
	tests := []struct {
		name   string
		script func(t *testing.T, conn net.Conn)
		check  func(err error) bool
	}{
		{"silent server: the ctx deadline ends the wait", func(t *testing.T, conn net.Conn) {
			buf := make([]byte, 64)
			for {
				if _, err := conn.Read(buf); err != nil {
					return
				}
			}
		}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"wrong version in welcome", func(t *testing.T, conn net.Conn) {
			NewFrameReader(conn, 0).ReadFrame(nil)
			b, _ := appendMessage(nil, &WelcomeMsg{V: 2, Servers: []string{}})
			writeFrame(t, conn, b)
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "version 2") }},
		{"garbage answer", func(t *testing.T, conn net.Conn) {
			NewFrameReader(conn, 0).ReadFrame(nil)
			writeFrame(t, conn, []byte{0x92, 1, 2})
		}, func(err error) bool { return errors.Is(err, ErrBadFrame) }},
		{"hang up", func(t *testing.T, conn net.Conn) {
			NewFrameReader(conn, 0).ReadFrame(nil)
		}, func(err error) bool { return err != nil }},
		{"call instead of welcome", func(t *testing.T, conn net.Conn) {
			NewFrameReader(conn, 0).ReadFrame(nil)
			b, _ := appendMessage(nil, &CancelMsg{ID: 1})
			writeFrame(t, conn, b)
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), `"cancel"`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			p := startRaw(t, func(conn net.Conn) { tc.script(t, conn) })
			defer p.stop()
			ctx := testCtx(t)
			if strings.HasPrefix(tc.name, "silent server") {
				short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				ctx = short
			}
			c, err := Dial(ctx, p.path, "good")
			if err == nil {
				c.Close()
			}
			if !tc.check(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// 1000 calls in flight on one connection, answered in shuffled order:
// each caller must get its own reply.
func TestConcurrentCallsShuffledReplies(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 1000
	seen := make(chan map[uint64]bool, 1)
	p := startPeer(t, func(s *scriptConn) {
		var calls []*CallMsg
		ids := map[uint64]bool{}
		for len(calls) < n {
			msg, err := s.Read()
			if err != nil {
				t.Errorf("peer read: %v", err)
				return
			}
			c := msg.(*CallMsg)
			ids[c.ID] = true
			calls = append(calls, c)
		}
		seen <- ids
		rand.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
		for _, c := range calls {
			res := &ResultMsg{ID: c.ID, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: c.Op}}, Structured: c.Args}}
			if err := s.Send(context.Background(), res); err != nil {
				t.Errorf("peer send: %v", err)
				return
			}
		}
		serveEcho(s)
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			op := fmt.Sprintf("tool_%d", i)
			res, err := c.Call(ctx, "github", op, map[string]any{"n": i, "pad": strings.Repeat("x", i%97)})
			if err != nil {
				errs <- err
				return
			}
			var got struct {
				N int `msgpack:"n"`
			}
			if err := res.Decode(&got); err != nil {
				errs <- err
				return
			}
			if res.Text() != op || got.N != i {
				errs <- fmt.Errorf("call %d got text %q n %d", i, res.Text(), got.N)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ids := <-seen; len(ids) != n {
		t.Errorf("peer saw %d distinct ids, want %d", len(ids), n)
	}
}

func TestCancelSendsCancel(t *testing.T) {
	defer leakcheck.Check(t)()
	gotCall := make(chan uint64, 1)
	gotCancel := make(chan uint64, 1)
	p := startPeer(t, func(s *scriptConn) {
		msg, err := s.Read()
		if err != nil {
			return
		}
		call := msg.(*CallMsg)
		gotCall <- call.ID
		msg, err = s.Read()
		if err != nil {
			return
		}
		gotCancel <- msg.(*CancelMsg).ID
		// A late reply to the cancelled call must be dropped by the client.
		s.Send(context.Background(), &ResultMsg{ID: call.ID, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: "late"}}}})
		serveEcho(s)
	})
	defer p.stop()
	c, err := Dial(testCtx(t), p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		<-gotCall
		cancel()
	}()
	_, err = c.Call(ctx, "github", "slow", nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "github/slow") {
		t.Fatalf("cancelled call: err = %v", err)
	}
	select {
	case id := <-gotCancel:
		if id != 1 {
			t.Errorf("cancel named id %d, want 1", id)
		}
	case <-time.After(waitFor):
		t.Fatal("no cancel frame reached the peer")
	}
	res, err := c.Call(testCtx(t), "github", "next", nil)
	if err != nil || res.Text() != "next" {
		t.Fatalf("call after a cancel: %v, %v", res, err)
	}
}

// recordCalls starts a peer that answers every call with an empty result
// and hands each call it read to the test, and dials it. The caller
// defers stop, which closes both ends.
func recordCalls(t *testing.T) (c *Client, got <-chan *CallMsg, stop func()) {
	t.Helper()
	calls := make(chan *CallMsg, 2)
	p := startPeer(t, func(s *scriptConn) {
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			c := msg.(*CallMsg)
			calls <- c
			s.Send(context.Background(), &ResultMsg{ID: c.ID, Result: Result{Content: []Block{}}})
		}
	})
	c, err := Dial(testCtx(t), p.path, "good")
	if err != nil {
		p.stop()
		t.Fatal(err)
	}
	return c, calls, func() {
		c.Close()
		p.stop()
	}
}

func TestDeadlineTravelsAsTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	c, got, stop := recordCalls(t)
	defer stop()
	if _, err := c.Call(context.Background(), "fs", "a", nil); err != nil {
		t.Fatal(err)
	}
	if ms := (<-got).TimeoutMS; ms != 0 {
		t.Errorf("no deadline sent timeout_ms %d", ms)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := c.Call(ctx, "fs", "a", nil); err != nil {
		t.Fatal(err)
	}
	if ms := (<-got).TimeoutMS; ms == 0 || ms > uint64(waitFor.Milliseconds()) {
		t.Errorf("timeout_ms = %d, want (0, %d]", ms, waitFor.Milliseconds())
	}
}

// A traceparent set on the call's context travels as the call's
// traceparent; a context without one sends none.
func TestTraceparentTravels(t *testing.T) {
	defer leakcheck.Check(t)()
	c, got, stop := recordCalls(t)
	defer stop()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := c.Call(WithTraceparent(context.Background(), tp), "fs", "a", nil); err != nil {
		t.Fatal(err)
	}
	if g := (<-got).Traceparent; g != tp {
		t.Errorf("traceparent %q, want %q", g, tp)
	}
	if _, err := c.Call(context.Background(), "fs", "a", nil); err != nil {
		t.Fatal(err)
	}
	if g := (<-got).Traceparent; g != "" {
		t.Errorf("a context without a traceparent sent %q", g)
	}
}

func TestPeerDisconnectFailsEveryWaiter(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 10
	p := startPeer(t, func(s *scriptConn) {
		for range n {
			if _, err := s.Read(); err != nil {
				return
			}
		}
		// Returning closes the connection with all n calls unanswered.
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := c.Call(ctx, "github", "x", nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("waiter got %v, want ErrClosed", err)
		}
	}
	if _, err := c.Call(ctx, "github", "x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call on a broken client: %v", err)
	}
}

func TestFatalFailsEveryWaiter(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startPeer(t, func(s *scriptConn) {
		if _, err := s.Read(); err != nil {
			return
		}
		s.Fatal(CodeBadFrame, "scripted")
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Call(ctx, "github", "x", nil)
	var f *FatalMsg
	if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrBadFrame) || !errors.As(err, &f) || f.Message != "scripted" {
		t.Fatalf("err = %v", err)
	}
}

func TestDenialsAreTypedErrors(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startPeer(t, func(s *scriptConn) {
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			c := msg.(*CallMsg)
			d := &DeniedMsg{ID: c.ID, Denial: Denied{Code: c.Op, Message: "because " + c.Op, Path: "/p", RPCCode: -32000, Quota: "fs:rate", RetryMS: 5}}
			if err := s.Send(context.Background(), d); err != nil {
				return
			}
		}
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for code, info := range codes {
		if info.fatal {
			continue
		}
		res, err := c.Call(ctx, "github", code, nil)
		var d *Denied
		if res != nil || !errors.Is(err, sentinel(code)) || !errors.As(err, &d) {
			t.Errorf("%s: res %v err %v", code, res, err)
			continue
		}
		if d.Code != code || d.Message != "because "+code || d.Path != "/p" || d.RPCCode != -32000 || d.Quota != "fs:rate" || d.RetryMS != 5 {
			t.Errorf("%s: denial %+v", code, d)
		}
		if errors.Is(err, ErrClosed) {
			t.Errorf("%s: a denial must not look like a closed connection", code)
		}
	}
}

func TestArgsEncoding(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startPeer(t, serveEcho)
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type args struct {
		Title string `msgpack:"title"`
		N     int    `msgpack:"n"`
	}
	var nilMap map[string]any
	tests := []struct {
		name string
		args any
		want map[string]any // what the peer echoed back, decoded
		err  string
	}{
		{"nil", nil, map[string]any{}, ""},
		{"nil map", nilMap, map[string]any{}, ""},
		{"map", map[string]any{"a": 1, "b": []any{"x", true}}, map[string]any{"a": int8(1), "b": []any{"x", true}}, ""},
		{"struct", args{Title: "t", N: 70000}, map[string]any{"title": "t", "n": uint32(70000)}, ""},
		{"raw map", msgpack.RawMessage(m("k", "v")), map[string]any{"k": "v"}, ""},
		{"slice", []int{1}, nil, "not a map"},
		{"raw array", msgpack.RawMessage(arr(1)), nil, "not a map"},
		{"unencodable", map[string]any{"c": make(chan int)}, nil, "encoding args"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Call(ctx, "fs", "echo", tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := res.Decode(&got); err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("echoed %#v (%v), want %#v", got, err, tc.want)
			}
		})
	}
	// The refused calls sent nothing and broke nothing.
	if _, err := c.Call(ctx, "fs", "echo", nil); err != nil {
		t.Fatal(err)
	}
}

// A malformed reply that names its call fails that call only; a frame of a
// type from a newer capbridge is ignored.
func TestMalformedReplies(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startRaw(t, func(conn net.Conn) {
		fr := NewFrameReader(conn, 0)
		fr.ReadFrame(nil) // hello
		b, _ := appendMessage(nil, &WelcomeMsg{V: 1, Servers: []string{"fs"}})
		writeFrame(t, conn, b)
		for {
			f, err := fr.ReadFrame(nil)
			if err != nil {
				return
			}
			msg, err := Decode(f)
			if err != nil {
				t.Errorf("peer decode: %v", err)
				return
			}
			call := msg.(*CallMsg)
			writeFrame(t, conn, m("t", "progress", "id", call.ID, "pct", 50))
			if call.Op == "bad" {
				writeFrame(t, conn, m("t", "result", "id", call.ID, "is_error", "yes", "content", arr()))
				continue
			}
			b, _ := appendMessage(nil, &ResultMsg{ID: call.ID, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: "ok"}}}})
			writeFrame(t, conn, b)
		}
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Call(ctx, "fs", "bad", nil)
	var we *WireError
	if !errors.As(err, &we) || we.Path != "/is_error" || errors.Is(err, ErrClosed) {
		t.Fatalf("malformed reply: err = %v", err)
	}
	res, err := c.Call(ctx, "fs", "good", nil)
	if err != nil || res.Text() != "ok" {
		t.Fatalf("after a malformed reply: %v %v", res, err)
	}
}

// Calls beyond MaxInFlight wait for a slot: the peer never has more than
// MaxInFlight unanswered calls, the waiting calls go out as slots free,
// and a waiting call honours its ctx without ever reaching the wire.
func TestInFlightBound(t *testing.T) {
	defer leakcheck.Check(t)()
	const limit, total = 2, 6
	ctx := testCtx(t)
	d := Dialer{MaxInFlight: limit}

	// Six calls through two slots. The peer answers the oldest call
	// whenever it holds limit of them; at every arrival it checks the
	// unanswered count. A reply is counted before it is sent, so a
	// client keeping the bound can never be seen over it.
	var answered atomic.Int64
	p := startPeer(t, func(s *scriptConn) {
		arrived := make(chan *CallMsg, total)
		go func() {
			defer close(arrived)
			for received := int64(1); ; received++ {
				msg, err := s.Read()
				if err != nil {
					return
				}
				if open := received - answered.Load(); open > limit {
					t.Errorf("%d calls in flight, want at most %d", open, limit)
				}
				arrived <- msg.(*CallMsg)
			}
		}()
		var pending []*CallMsg
		for n := 0; n < total; n++ {
			for len(pending) < limit && n+len(pending) < total {
				c, ok := <-arrived
				if !ok {
					return
				}
				pending = append(pending, c)
			}
			answered.Add(1)
			s.Send(context.Background(), &ResultMsg{ID: pending[0].ID, Result: Result{Content: []Block{}}})
			pending = pending[1:]
		}
	})
	defer p.stop()
	c, err := d.Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for range total {
		wg.Go(func() {
			if _, err := c.Call(ctx, "fs", "x", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	// With both slots held by calls the peer does not answer, a third
	// call gives up when its ctx does, and sends nothing: the client
	// writes frames in order, so once a slot is freed a later "fence"
	// call must be the very next frame the peer sees; a third call (or
	// its cancel) that reached the wire would come before it.
	frames := make(chan Message, 8)
	conns := make(chan *scriptConn, 1)
	p2 := startPeer(t, func(s *scriptConn) {
		conns <- s
		defer close(frames)
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			frames <- msg
		}
	})
	defer p2.stop()
	next := func() *CallMsg {
		t.Helper()
		select {
		case msg, ok := <-frames:
			if !ok {
				t.Fatal("the connection ended")
			}
			c, ok := msg.(*CallMsg)
			if !ok {
				t.Fatalf("peer got %#v, want a call", msg)
			}
			return c
		case <-time.After(waitFor):
			t.Fatal("no frame reached the peer")
		}
		return nil
	}
	c2, err := d.Dial(ctx, p2.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	s2 := <-conns
	hold, release := context.WithCancel(ctx)
	defer release()
	held := make(chan error, limit)
	for range limit {
		go func() { _, err := c2.Call(hold, "fs", "hold", nil); held <- err }()
	}
	first := next()
	if second := next(); first.Op != "hold" || second.Op != "hold" {
		t.Fatalf("peer got %q and %q, want the two holding calls", first.Op, second.Op)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c2.Call(short, "fs", "third", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third call: %v", err)
	}
	s2.Send(context.Background(), &ResultMsg{ID: first.ID, Result: Result{Content: []Block{}}})
	if err := <-held; err != nil {
		t.Fatalf("answered holding call: %v", err)
	}
	fenced := make(chan error, 1)
	go func() { _, err := c2.Call(ctx, "fs", "fence", nil); fenced <- err }()
	if f := next(); f.Op != "fence" {
		t.Fatalf("peer got call %q before the fence: a call past the bound reached the wire", f.Op)
	} else {
		s2.Send(context.Background(), &ResultMsg{ID: f.ID, Result: Result{Content: []Block{}}})
	}
	if err := <-fenced; err != nil {
		t.Fatalf("fence: %v", err)
	}
	release()
	if err := <-held; !errors.Is(err, context.Canceled) {
		t.Errorf("released holding call: %v", err)
	}
}

func TestFromEnvAndShared(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startPeer(t, func(s *scriptConn) {
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			c := msg.(*CallMsg)
			if c.Op == "hangup" {
				return
			}
			s.Send(context.Background(), &ResultMsg{ID: c.ID, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: c.Op}}}})
		}
	})
	defer p.stop()
	defer func() {
		shared.mu.Lock()
		if shared.c != nil {
			shared.c.Close()
			shared.c = nil
		}
		shared.mu.Unlock()
	}()
	ctx := testCtx(t)

	t.Setenv(EnvSocket, "")
	t.Setenv(EnvToken, "good")
	if _, err := FromEnv(ctx); !errors.Is(err, ErrNoEnv) {
		t.Fatalf("FromEnv without a socket: %v", err)
	}
	if _, err := Shared(ctx); !errors.Is(err, ErrNoEnv) {
		t.Fatalf("Shared without a socket: %v", err)
	}
	os.Setenv(EnvSocket, p.path)

	c, err := FromEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	c1, err := Shared(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Shared(ctx); again != c1 {
		t.Fatal("Shared dialed again while the first client was healthy")
	}
	if _, err := c1.Call(ctx, "fs", "hangup", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("hangup: %v", err)
	}
	c2, err := Shared(ctx)
	if err != nil || c2 == c1 {
		t.Fatalf("Shared after a break: %v, same client %v", err, c2 == c1)
	}
	if res, err := c2.Call(ctx, "fs", "hi", nil); err != nil || res.Text() != "hi" {
		t.Fatalf("redialed client: %v %v", res, err)
	}
}

func TestResultHelpers(t *testing.T) {
	r := &Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: "a"}, {Type: BlockOther, Kind: "image"}, {Type: BlockText, Kind: KindText, Text: "b"}}}
	if got := r.Text(); got != "a\nb" {
		t.Errorf("Text() = %q", got)
	}
	if err := r.Decode(new(any)); !errors.Is(err, ErrNoStructured) {
		t.Errorf("Decode without structured: %v", err)
	}
	r.Structured = m("k", arr(1, 2))
	var got struct {
		K []int `msgpack:"k"`
	}
	if err := r.Decode(&got); err != nil || !reflect.DeepEqual(got.K, []int{1, 2}) {
		t.Errorf("Decode: %v %v", got, err)
	}
	var wrong string
	if err := r.Decode(&wrong); err == nil || !strings.HasPrefix(err.Error(), "capwire: ") {
		t.Errorf("Decode into the wrong type: %v", err)
	}
}
