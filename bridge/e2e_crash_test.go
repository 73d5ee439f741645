package bridge

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A server that crashes every few calls under concurrent load: every
// call gets exactly one reply — its result, or server_unavailable for a
// call that met the crash or the restart — and none hangs; the server
// comes back each time, and echo works on every connection afterwards
// with no stray reply left over. Each worker has a connection of its own
// and waits for each reply before the next call, so a second reply to
// any call shows up as the wrong frame at the next receive. A worker
// refused waits for the restart before its next call, so the crash calls
// keep reaching a live server and it dies and restarts many times.
func TestCrashEveryNUnderLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	const workers, calls, every = 4, 24, 8
	s := mcptestServer("s", mcptest.Scenario{})
	s.RestartBackoff, s.RestartMax = 10*time.Millisecond, 100*time.Millisecond
	soleGrant(&s)
	tb := startBridge(t, nil, s)
	token := tb.grant(map[string][]string{"s": nil})
	conns := make([]*wireConn, workers)
	for i := range conns {
		conns[i] = mustDialWire(t, tb.CallSocket(), token)
	}

	srv := tb.srv("s")
	start := time.Now()
	var mu sync.Mutex
	results, denied := 0, 0
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for i, w := range conns {
		wg.Go(func() {
			for k := range calls {
				id := uint64(k + 1)
				tool, args := "echo", map[string]any{"text": fmt.Sprintf("w%d-%d", i, k)}
				if id%every == 0 {
					tool, args = "crash", map[string]any{}
				}
				// The process the call may meet: a denial waits for
				// a different one to be ready.
				pid := srv.status().PID
				if err := w.call(id, "s", tool, args, 0); err != nil {
					errs <- fmt.Errorf("worker %d call %d: %w", i, id, err)
					return
				}
				m, err := w.recv(backstop)
				if err != nil {
					errs <- fmt.Errorf("worker %d call %d (%s): no reply: %w", i, id, tool, err)
					return
				}
				switch r := m.(type) {
				case *capwire.ResultMsg:
					if r.ID != id || tool != "echo" || r.Result.IsError || r.Result.Text() != args["text"] {
						errs <- fmt.Errorf("worker %d call %d (%s): result %+v", i, id, tool, r)
						return
					}
					mu.Lock()
					results++
					mu.Unlock()
				case *capwire.DeniedMsg:
					if r.ID != id || r.Denial.Code != capwire.CodeServerUnavailable {
						errs <- fmt.Errorf("worker %d call %d (%s): denied %+v", i, id, tool, r)
						return
					}
					mu.Lock()
					denied++
					mu.Unlock()
					// Wait for the restart before going on, so the
					// load meets a live server again and the next crash
					// call crashes it rather than being refused. The
					// replacement is told by its pid: the denial of a
					// call that met a death can reach the caller before
					// the supervisor has marked the server dead.
					if err := waitReady(srv, pid); err != nil {
						errs <- fmt.Errorf("worker %d after call %d: %w", i, id, err)
						return
					}
				default:
					errs <- fmt.Errorf("worker %d call %d (%s): %T %+v", i, id, tool, m, m)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	crashes := workers * calls / every
	t.Logf("%d calls in %v: %d results, %d denied, %d crash calls", workers*calls, time.Since(start), results, denied, crashes)
	if st := srv.status(); st.Restarts < 2 {
		t.Errorf("%d restarts under a load of %d crash calls, want several", st.Restarts, crashes)
	}
	if denied < crashes {
		t.Errorf("%d denials, want at least one per crash call (%d)", denied, crashes)
	}

	eventually(t, "the server ready again after restarts", func() bool {
		st := srv.status()
		return State(st.State) == StateReady && st.Restarts >= 1
	})
	for i, w := range conns {
		id := uint64(calls + 1)
		if err := w.call(id, "s", "echo", map[string]any{"text": "after"}, 0); err != nil {
			t.Fatal(err)
		}
		m, err := w.recv(backstop)
		r, ok := m.(*capwire.ResultMsg)
		if err != nil || !ok || r.ID != id || r.Result.Text() != "after" {
			t.Fatalf("worker %d after the load: %T %+v, %v; want call %d's echo", i, m, m, err, id)
		}
		w.c.Close()
	}
	t.Logf("restarts: %d", srv.status().Restarts)
	tb.shutdown()
}

// waitReady waits until srv is ready in a process other than old (0:
// any), for a worker goroutine, which may
// not fail the test itself. The state has no channel to wait on, so it
// is checked often; backstop bounds the wait.
func waitReady(srv *server, old int) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(backstop)
	defer limit.Stop()
	for st := srv.status(); State(st.State) != StateReady || st.PID == old; st = srv.status() {
		select {
		case <-tick.C:
		case <-limit.C:
			return fmt.Errorf("server not ready again after %v: %+v", backstop, srv.status())
		}
	}
	return nil
}
