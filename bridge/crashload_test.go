package bridge

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/leakcheck"
	"github.com/capbridge/capbridge/internal/mcptest"
)

// A server that crashes every few calls under concurrent load: every
// call gets exactly one reply — its result, or server_unavailable for a
// call that met the crash or the restart — and none hangs; the server
// comes back each time, and echo works on every connection afterwards
// with no stray reply left over. Each worker has a connection of its own
// and waits for each reply before the next call, so a second reply to
// any call shows up as the wrong frame at the next receive.
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
	if denied < crashes {
		t.Errorf("%d denials, want at least one per crash call (%d)", denied, crashes)
	}

	srv := tb.servers["s"]
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
