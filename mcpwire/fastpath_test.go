package mcpwire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// kickConn is the in-memory transport with read deadlines, so the client
// runs its leader/follower reading (callers read their own replies) as it
// does over a child's pipes.
type kickConn struct{ *memConn }

func (k kickConn) SetReadDeadline(t time.Time) error { return k.out.SetReadDeadline(t) }

// connectKick is connectScripted over a kickConn.
func connectKick(t *testing.T, cfg Config) (*Client, *script) {
	t.Helper()
	conn, m := newMemory(time.Second, 0)
	s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
	done := make(chan error, 1)
	var c *Client
	go func() {
		var err error
		c, err = Connect(context.Background(), kickConn{conn.(*memConn)}, cfg)
		done <- err
	}()
	s.refuseProbe()
	s.recv()
	s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"` + requestedVersion + `","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
	s.recv() // notifications/initialized
	if err := <-done; err != nil {
		t.Fatalf("connect: %v", err)
	}
	return c, s
}

// inStacks reports whether some goroutine's stack holds every one of
// frames, and holds them only while blocked in a select if parked is set.
func inStacks(parked bool, frames ...string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if parked && !strings.Contains(g, "[select") {
			continue
		}
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			return true
		}
	}
	return false
}

// waitLeader waits until a call holds the reading side: with one call in
// flight, that call. A notification makes an idle reader (which may hold
// it after the handshake) handle a chunk and let go.
func waitLeader(t *testing.T, s *script) {
	t.Helper()
	s.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
	deadline := time.Now().Add(30 * time.Second)
	for !inStacks(false, "readside.(*Side).lead(", "mcpwire.(*Client).request(") {
		if time.Now().After(deadline) {
			t.Fatal("no call ever took the reading side")
		}
		runtime.Gosched()
	}
}

// waitFollower waits until a caller is parked as a follower: blocked in
// Await's select rather than reading.
func waitFollower(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !inStacks(true, "readside.(*Side).Await(", "mcpwire.(*Client).request(") {
		if time.Now().After(deadline) {
			t.Fatal("no caller ever waited as a follower")
		}
		runtime.Gosched()
	}
}

// The leader giving up (cancel or its own timeout) must hand the reading
// side to the follower, whose reply then reaches it; the server learns of
// the cancellation on the wire.
func TestLeaderGivesUpFollowerStillServed(t *testing.T) {
	for _, how := range []string{"cancel", "timeout"} {
		t.Run(how, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c, s := connectKick(t, Config{CallIdleTimeout: time.Minute})
			defer func() { s.m.End(""); c.Close() }()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opt := CallOptions{}
			if how == "timeout" {
				opt.IdleTimeout = 100 * time.Millisecond
			}
			errA := make(chan error, 1)
			go func() { _, err := c.CallTool(ctx, "a", JSONArgs(nil), opt); errA <- err }()
			if req := s.recv(); !strings.Contains(req, `"id":2,`) {
				t.Fatalf("first request %q", req)
			}
			waitLeader(t, s)

			resB := make(chan *CallToolResult, 1)
			errB := make(chan error, 1)
			go func() {
				r, err := c.CallTool(context.Background(), "b", JSONArgs(nil), CallOptions{})
				resB <- r
				errB <- err
			}()
			if req := s.recv(); !strings.Contains(req, `"id":3,`) {
				t.Fatalf("second request %q", req)
			}
			waitFollower(t)
			if how == "cancel" {
				cancel()
			}
			want := map[string]string{"cancel": "cancelled", "timeout": "timed out"}[how]
			if got := s.recv(); got != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"`+want+`"}}`+"\n" {
				t.Errorf("cancel line = %q", got)
			}
			err := <-errA
			if how == "cancel" && !errors.Is(err, context.Canceled) || how == "timeout" && !errors.Is(err, ErrTimeout) {
				t.Errorf("leader's error = %v", err)
			}
			s.send(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"for b"}]}}`)
			if err := <-errB; err != nil {
				t.Fatalf("follower: %v", err)
			}
			if r := <-resB; len(r.Content) != 1 || r.Content[0].Text != "for b" {
				t.Errorf("follower got %+v", r)
			}
		})
	}
}

// The server ending while a leader reads and followers wait settles every
// call once, with the death.
func TestReaderDeathMidCall(t *testing.T) {
	defer leakcheck.Check(t)()
	c, s := connectKick(t, Config{})
	defer c.Close()
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() { _, err := c.CallTool(context.Background(), "t", JSONArgs(nil), CallOptions{}); errs <- err }()
		s.recv()
	}
	s.m.End("boom")
	for range n {
		if err := <-errs; !errors.Is(err, ErrDead) || !errors.Is(err, ErrExited) {
			t.Errorf("call got %v", err)
		}
	}
	select {
	case err := <-errs:
		t.Errorf("a call settled twice: %v", err)
	default:
	}
	c.mu.Lock()
	left := len(c.calls)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls left in flight", left)
	}
}

// With no call in flight, the client still reads: a notification and a
// server ping are handled without any call to carry them.
func TestIdleReaderServesServer(t *testing.T) {
	defer leakcheck.Check(t)()
	c, s := connectKick(t, Config{})
	defer func() { s.m.End(""); c.Close() }()
	s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	select {
	case <-c.ToolsChanged():
	case <-time.After(30 * time.Second):
		t.Fatal("tools/list_changed never signalled while idle")
	}
	s.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if got := s.recv(); got != `{"jsonrpc":"2.0","id":"p","result":{}}`+"\n" {
		t.Errorf("ping answer %q", got)
	}
}

// Many callers over a real child's pipes (leader/follower reading and
// group-committed writes), some cancelling at random moments: every call
// gets exactly its own echo or its cancellation, and nothing is left in
// flight.
func TestManyConcurrentCallersWithCancels(t *testing.T) {
	defer leakcheck.Check(t)()
	argv, env := rawecho.Command()
	c, err := Start(context.Background(), Command{Argv: argv, Env: env, Inherit: []string{"PATH", "HOME", "TMPDIR"}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const callers, each = 32, 100
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	var served atomic.Int64
	for g := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range each {
				text := fmt.Sprintf("caller %d call %d %s", g, i, strings.Repeat("x", rng.IntN(300)))
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(8) == 0 {
					go cancel()
				}
				r, err := c.CallTool(ctx, "echo", JSONArgs([]byte(`{"text":"`+text+`"}`)), CallOptions{})
				cancel()
				switch {
				case errors.Is(err, context.Canceled):
				case err != nil:
					errs <- fmt.Errorf("%s: %w", text, err)
				case len(r.Content) != 1 || r.Content[0].Text != text:
					errs <- fmt.Errorf("%s: got %+v", text, r.Content)
				default:
					served.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := served.Load(); n < callers*each/2 {
		t.Errorf("only %d of %d calls served", n, callers*each)
	}
	c.mu.Lock()
	left := len(c.calls)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls left in flight", left)
	}
	// The client is still healthy and a lone call is served.
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping after the storm: %v", err)
	}
}
