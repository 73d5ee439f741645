package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// The load tests: many connections with many calls in flight
// at once, every reply accounted for, and a shutdown in the middle of the
// load that loses no reply and leaves no process or socket behind.

// loadCall is one call of the load and the reply it must get.
type loadCall struct {
	server, tool string
	args         map[string]any
	check        func(r *capwire.Result) error
}

// loadMix returns the k-th call of connection conn: echo on server a, add
// on server b, and fail (a tool error, still a result) on a, each with a
// payload no other call has, so a reply routed to the wrong call or the
// wrong connection cannot pass.
func loadMix(conn, k int) loadCall {
	tag := strconv.Itoa(conn) + "/" + strconv.Itoa(k)
	switch k % 3 {
	case 0:
		return loadCall{"a", "echo", map[string]any{"text": tag}, func(r *capwire.Result) error {
			if r.IsError || r.Text() != tag {
				return fmt.Errorf("echo %s answered %+v", tag, r)
			}
			return nil
		}}
	case 1:
		a, b := int64(conn)*1_000_003, int64(k)
		return loadCall{"b", "add", map[string]any{"a": a, "b": b}, func(r *capwire.Result) error {
			var sc struct {
				Sum int64 `msgpack:"sum"`
			}
			if err := r.Decode(&sc); err != nil || sc.Sum != a+b || r.Text() != strconv.FormatInt(a+b, 10) {
				return fmt.Errorf("add %d+%d answered %+v (%v)", a, b, r, err)
			}
			return nil
		}}
	default:
		return loadCall{"a", "fail", map[string]any{"message": "no " + tag}, func(r *capwire.Result) error {
			if !r.IsError || r.Text() != "no "+tag {
				return fmt.Errorf("fail %s answered %+v", tag, r)
			}
			return nil
		}}
	}
}

// runLoadConn sends calls (all at once, pipelined) on a fresh connection
// and reads until each has exactly one reply; then a sentinel call's reply
// must be the next frame, so no stray or duplicate reply is queued behind
// the last one. ids are 1…len(calls).
func runLoadConn(path, token string, calls []loadCall) error {
	w, err := dialWire(path, token)
	if err != nil {
		return err
	}
	defer w.c.Close()
	var batch []byte
	for i, c := range calls {
		f, err := callFrame(uint64(i+1), c.server, c.tool, c.args, 0)
		if err != nil {
			return err
		}
		batch = append(batch, f...)
	}
	if err := w.write(batch); err != nil {
		return err
	}
	seen := make(map[uint64]bool, len(calls))
	for len(seen) < len(calls) {
		m, err := w.recv(60 * time.Second)
		if err != nil {
			return fmt.Errorf("after %d of %d replies: %w", len(seen), len(calls), err)
		}
		r, ok := m.(*capwire.ResultMsg)
		if !ok {
			return fmt.Errorf("reply %T %+v, want a result", m, m)
		}
		if r.ID < 1 || r.ID > uint64(len(calls)) || seen[r.ID] {
			return fmt.Errorf("reply for id %d: unknown or a second reply (seen %v)", r.ID, sortedIDs(seen))
		}
		seen[r.ID] = true
		if err := calls[r.ID-1].check(&r.Result); err != nil {
			return fmt.Errorf("call %d: %w", r.ID, err)
		}
	}
	const sentinel = 1 << 32
	if err := w.call(sentinel, "a", "echo", map[string]any{"text": "sentinel"}, 0); err != nil {
		return err
	}
	m, err := w.recv(60 * time.Second)
	if r, ok := m.(*capwire.ResultMsg); err != nil || !ok || r.ID != sentinel || r.Result.Text() != "sentinel" {
		return fmt.Errorf("after all replies, got %+v, %v; want only the sentinel's reply", m, err)
	}
	return nil
}

// loadConns makes room for the load's connections, all of one grant and
// one uid, dialed at once: admission is not what these tests are about.
func loadConns(c *config.Config) {
	c.Bridge.MaxUnauthConnections, c.Bridge.MaxUnauthPerUID = 1024, 1024
	c.Bridge.MaxConnsPerGrant = c.Bridge.MaxConnections
}

// loadServers are two mcptest servers with room for the whole load: the
// point is that every call is answered correctly, not backpressure.
func loadServers(c *config.Config) {
	loadConns(c)
	for i := range c.Servers {
		c.Servers[i].MaxInflight = 256
		c.Servers[i].MaxQueue = 20000
		soleGrant(&c.Servers[i])
	}
}

// 200 connections × 50 calls, all in flight together: each call gets
// exactly one reply, with its own payload.
func TestLoadManyConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	const conns, perConn = 200, 50
	tb := startBridge(t, loadServers, mcptestServer("a", mcptest.Scenario{}), mcptestServer("b", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"a": nil, "b": nil})

	start := time.Now()
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for conn := range conns {
		wg.Go(func() {
			calls := make([]loadCall, perConn)
			for k := range calls {
				calls[k] = loadMix(conn, k)
			}
			if err := runLoadConn(tb.CallSocket(), token, calls); err != nil {
				errs <- fmt.Errorf("connection %d: %w", conn, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d connections × %d calls in %v", conns, perConn, time.Since(start))
	// The servers saw every call: two sentinels' worth per connection are
	// on a, the rest split by the mix.
	var total int64
	for _, name := range []string{"a", "b"} {
		total += tb.srv(name).calls.Load()
	}
	if want := int64(conns * (perConn + 1)); total != want {
		t.Errorf("servers counted %d calls, want %d", total, want)
	}
	tb.shutdown()
}

// Shutdown while calls are in flight (what SIGTERM does in capbridge
// serve): every call that reached the bridge gets exactly one reply, its
// result if it finished within the grace period and shutting_down if not;
// then each connection ends, the sockets are gone and no server process
// survives (leakcheck).
func TestShutdownDuringLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	const conns, perConn = 40, 30
	const grace = 500 * time.Millisecond
	// Server a takes the calls that finish, with room for all of them at
	// once; server b takes the calls that cannot, most of them queued
	// behind its 16 slots, so the shutdown meets calls both running and
	// waiting for admission.
	tb := startBridge(t, func(c *config.Config) {
		c.Servers[0].MaxInflight = conns * perConn
		c.Servers[1].MaxInflight = 16
		c.Servers[1].MaxQueue = conns * perConn
		loadConns(c)
		soleGrant(&c.Servers[0])
		soleGrant(&c.Servers[1])
	}, mcptestServer("a", mcptest.Scenario{}), mcptestServer("b", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"a": nil, "b": nil})

	// Per connection: calls that finish in the grace period (echo, slow
	// 100 ms), calls that cannot (slow 60 s, hang), and an echo last, whose
	// reply proves the bridge has read every frame before it.
	type expect struct{ mayFinish, mustFinish bool }
	plan := func(conn, k int) (loadCall, expect) {
		tag := strconv.Itoa(conn) + "/" + strconv.Itoa(k)
		echo := func(r *capwire.Result) error {
			if r.IsError || r.Text() != tag {
				return fmt.Errorf("%s answered %+v", tag, r)
			}
			return nil
		}
		switch {
		case k == perConn-1:
			return loadCall{"a", "echo", map[string]any{"text": tag}, echo}, expect{true, true}
		case k%4 == 0:
			return loadCall{"a", "slow", map[string]any{"ms": 100, "text": tag}, echo}, expect{true, false}
		case k%4 == 1:
			return loadCall{"b", "slow", map[string]any{"ms": 60000, "text": tag}, echo}, expect{false, false}
		case k%4 == 2:
			return loadCall{"b", "hang", map[string]any{}, echo}, expect{false, false}
		default:
			return loadCall{"a", "echo", map[string]any{"text": tag}, echo}, expect{true, false}
		}
	}

	long := map[string]int64{"a": 0}
	for conn := range conns {
		for k := range perConn {
			if c, e := plan(conn, k); !e.mayFinish {
				long[c.server]++
			}
		}
	}
	ready := make(chan struct{}, 2*conns)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for conn := range conns {
		w := mustDialWire(t, tb.CallSocket(), token)
		wg.Go(func() {
			defer w.c.Close()
			err := func() error {
				calls := make([]loadCall, perConn)
				exp := make([]expect, perConn)
				var batch []byte
				for k := range calls {
					calls[k], exp[k] = plan(conn, k)
					f, err := callFrame(uint64(k+1), calls[k].server, calls[k].tool, calls[k].args, 0)
					if err != nil {
						return err
					}
					batch = append(batch, f...)
				}
				if err := w.write(batch); err != nil {
					return err
				}
				seen := map[uint64]bool{}
				signalled := false
				for len(seen) < perConn {
					m, err := w.recv(60 * time.Second)
					if err != nil {
						return fmt.Errorf("after %d of %d replies: %w", len(seen), perConn, err)
					}
					var id uint64
					switch m := m.(type) {
					case *capwire.ResultMsg:
						id = m.ID
						if id >= 1 && id <= perConn {
							if !exp[id-1].mayFinish {
								return fmt.Errorf("call %d (%s) has a result, but cannot finish", id, calls[id-1].tool)
							}
							if err := calls[id-1].check(&m.Result); err != nil {
								return err
							}
						}
					case *capwire.DeniedMsg:
						id = m.ID
						if m.Denial.Code != capwire.CodeShuttingDown {
							return fmt.Errorf("call %d denied %+v, want shutting_down", id, m.Denial)
						}
						if id >= 1 && id <= perConn && exp[id-1].mustFinish {
							return fmt.Errorf("call %d (%s) denied, but it was answered before the shutdown began", id, calls[id-1].tool)
						}
					default:
						return fmt.Errorf("unexpected %T %+v", m, m)
					}
					if id < 1 || id > perConn || seen[id] {
						return fmt.Errorf("reply for id %d: unknown or a second reply", id)
					}
					seen[id] = true
					if id == perConn && !signalled {
						signalled = true
						ready <- struct{}{}
					}
				}
				if !signalled {
					ready <- struct{}{}
				}
				// Then the bridge closes the connection: nothing more.
				m, err := w.recv(30 * time.Second)
				if !errors.Is(err, io.EOF) {
					return fmt.Errorf("after every reply, got %+v, %v; want the connection closed", m, err)
				}
				return nil
			}()
			if err != nil {
				errs <- fmt.Errorf("connection %d: %w", conn, err)
				ready <- struct{}{}
			}
		})
	}
	for range conns {
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			t.Fatal("the load never got under way")
		}
	}
	// Every call has been read; the long ones are running or queued.
	for name, n := range long {
		waitBusy(t, tb, name, n)
	}
	tb.cfg.Bridge.ShutdownGrace = grace
	start := time.Now()
	tb.shutdown()
	t.Logf("shutdown with %d long calls running or queued took %v", long["a"]+long["b"], time.Since(start))
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, p := range []string{tb.CallSocket(), tb.ControlSocket()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s after shutdown: %v, want it removed", p, err)
		}
	}
	if _, err := dialWire(tb.CallSocket(), token); err == nil {
		t.Error("a connection after shutdown was accepted")
	}
}

// waitBusy waits (bounded) until server has exactly n calls running or
// queued.
func waitBusy(t *testing.T, tb *testBridge, server string, n int64) {
	t.Helper()
	s := tb.srv(server)
	eventually(t, fmt.Sprintf("%d calls running or queued at server %q", n, server), func() bool { return s.adm.Running()+s.adm.Queued() == n })
}

// A reply must not keep anything alive once it is queued: a call rate of
// R per second must not pin memory for R × the write bound. (Each reply
// used to leave a context with a 2×write_timeout timer behind, 17 MiB
// for 20 000 replies, held for 10 s.) Denied calls make the test fast:
// they reply without reaching a server.
func TestRepliesPinNoMemory(t *testing.T) {
	defer leakcheck.Check(t)()
	const calls = 20000
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	w := mustDialWire(t, tb.CallSocket(), tb.grant(map[string][]string{"t": nil}))
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	got := make(chan error, 1)
	go func() {
		for n := 0; n < calls; n++ {
			m, err := w.recv(30 * time.Second)
			if err != nil {
				got <- fmt.Errorf("after %d replies: %w", n, err)
				return
			}
			if _, ok := m.(*capwire.DeniedMsg); !ok {
				got <- fmt.Errorf("reply %d is %T, want a denial", n, m)
				return
			}
		}
		got <- nil
	}()
	frame, err := callFrame(1, "t", "no_such_tool", map[string]any{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Ids repeat (each is answered before long); a repeat while in flight
	// is denied bad_request, which is a reply all the same.
	for range calls / 100 {
		if err := w.write(bytes.Repeat(frame, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	const limit = 6 << 20
	grew := int64(heap()) - int64(before)
	t.Logf("heap grew by %d KiB over %d replies", grew>>10, calls)
	if grew > limit {
		t.Errorf("heap grew by %d KiB over %d replies, want under %d KiB: replies pin memory", grew>>10, calls, limit>>10)
	}
	w.c.Close()
	tb.shutdown()
}
