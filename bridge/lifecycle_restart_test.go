package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// failingServer is a server whose every boot attempt fails with "boom",
// sending the (fake) time of each attempt on the returned channel.
func failingServer(policy config.Restart, audit zerolog.Logger) (*server, <-chan time.Time) {
	cfg := config.NewServer("s", "/nonexistent")
	cfg.Restart, cfg.RestartBackoff, cfg.RestartMax = policy, time.Second, 10*time.Second
	s := newServer(cfg, zerolog.Nop(), audit, bootOptions{}, nil)
	s.jitter = func(d time.Duration) time.Duration { return d }
	attempts := make(chan time.Time, 64)
	s.launch = func(context.Context) (*table, error) {
		attempts <- time.Now()
		return nil, errors.New("boom")
	}
	return s, attempts
}

// Boot failures are retried with exponential backoff up to restart_max,
// on the bubble's fake clock: the attempts come exactly at 0, 1, 3, 7,
// 15 s, then every 10 s. While it waits the server is in backoff, a
// call is refused with the reason and the next attempt's time, status
// shows the wait, and each restart is audited.
func TestRestartBackoffSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var audit syncbuf.Buffer
		s, attempts := failingServer(config.RestartOnFailure, zerolog.New(&audit))
		start := time.Now()
		s.begin()
		want := []time.Duration{0, 1, 3, 7, 15, 25, 35}
		for i, w := range want {
			at := <-attempts
			if got := at.Sub(start); got != w*time.Second {
				t.Fatalf("attempt %d at %v, want %v", i, got, w*time.Second)
			}
			synctest.Wait() // the supervisor is asleep in its backoff
			st := s.status()
			wait := min(time.Second<<i, 10*time.Second)
			if State(st.State) != StateBackoff || st.Reason != "boom" || st.Restarts != int64(i) ||
				st.BackoffMS != wait.Milliseconds() || st.NextAttemptMS != at.Add(wait).UnixMilli() {
				t.Fatalf("after attempt %d: status %+v", i, st)
			}
			_, err := s.ready()
			if msg := s.unavailableMessage(err); !strings.Contains(msg, `server "s" is backoff: boom; next attempt in `+wait.String()) {
				t.Fatalf("after attempt %d: denial %q", i, msg)
			}
		}
		if n := strings.Count(audit.String(), `"event":"restart"`); n != len(want)-1 {
			t.Errorf("%d restarts audited, want %d:\n%s", n, len(want)-1, audit.String())
		}
		if _, err := s.retire(); err != nil {
			t.Fatal(err)
		}
		if st := s.status(); State(st.State) != StateRetired {
			t.Errorf("after retire: %+v", st)
		}
	})
}

// restart = "never" leaves a failed boot failed: one attempt, whatever
// time passes, and Boot's outcome is the failure.
func TestRestartNever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, attempts := failingServer(config.RestartNever, zerolog.Nop())
		s.begin()
		<-attempts
		<-s.firstDone
		time.Sleep(time.Hour) // fake time: nothing is waiting to restart
		synctest.Wait()
		if len(attempts) != 0 {
			t.Fatalf("%d more attempts under restart = never", len(attempts))
		}
		if st := s.status(); State(st.State) != StateFailed || st.Restarts != 0 || st.BackoffMS != 0 {
			t.Fatalf("status %+v, want failed with no restart", st)
		}
		if s.first.State != StateFailed || s.first.Reason != "boom" {
			t.Fatalf("first outcome %+v", s.first)
		}
		s.retire()
	})
}

// The wait doubles to its cap, starts again after reset, and equal
// jitter keeps each wait in [d/2, d].
func TestBackoff(t *testing.T) {
	b := backoff{initial: 100 * time.Millisecond, max: time.Second, jitter: func(d time.Duration) time.Duration { return d }}
	var got []time.Duration
	for range 6 {
		got = append(got, b.next())
	}
	b.reset()
	got = append(got, b.next())
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 100}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	for range 1000 {
		if d := equalJitter(time.Second); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("equalJitter(1s) = %v", d)
		}
	}
	for _, tc := range []struct {
		policy config.Restart
		clean  bool
		want   bool
	}{
		{config.RestartNever, false, false}, {config.RestartNever, true, false},
		{config.RestartOnFailure, false, true}, {config.RestartOnFailure, true, false},
		{config.RestartAlways, false, true}, {config.RestartAlways, true, true},
	} {
		if got := retries(tc.policy, tc.clean); got != tc.want {
			t.Errorf("retries(%s, clean %v) = %v", tc.policy, tc.clean, got)
		}
	}
}

// A real server that crashes in the middle of a call: the call gets
// exactly one reply, server_unavailable; the server comes back by
// itself; the next call on the same connection, under the same grant,
// succeeds.
func TestRestartAfterCrash(t *testing.T) {
	defer leakcheck.Check(t)()
	s := mcptestServer("s", mcptest.Scenario{})
	s.RestartBackoff, s.RestartMax = 10*time.Millisecond, time.Second
	s.StderrToCaller = true // the denial then quotes the server's last words
	tb := startBridge(t, nil, s)
	w := mustDialWire(t, tb.CallSocket(), tb.grant(map[string][]string{"s": nil}))

	if err := w.call(1, "s", "crash", map[string]any{}, 0); err != nil {
		t.Fatal(err)
	}
	d := w.mustRecvDenied(t, 1, capwire.CodeServerUnavailable)
	if !strings.Contains(d.Denial.Message, "mcptest: crashing in the middle of call") {
		t.Errorf("denial %q lacks the server's last words", d.Denial.Message)
	}
	srv := tb.srv("s")
	eventually(t, "the server ready again after a restart", func() bool {
		st := srv.status()
		return State(st.State) == StateReady && st.Restarts == 1
	})
	if st := srv.status(); st.LastExit != "exit status 1" {
		t.Errorf("last_exit %q, want exit status 1", st.LastExit)
	}
	if err := w.call(2, "s", "echo", map[string]any{"text": "back"}, 0); err != nil {
		t.Fatal(err)
	}
	// The next frame is call 2's: call 1 was answered once.
	m, err := w.recv(backstop)
	r, ok := m.(*capwire.ResultMsg)
	if err != nil || !ok || r.ID != 2 || r.Result.Text() != "back" {
		t.Fatalf("after the restart: %T %+v, %v; want call 2's result", m, m, err)
	}
	ctl := tb.control()
	st, err := ctl.Status(ctlCtx(t))
	if err != nil || st.Servers[0].Restarts != 1 || st.Servers[0].Restart != "on-failure" || st.Servers[0].State != "ready" {
		t.Fatalf("status %+v, %v", st, err)
	}
	ctl.Close()
	w.c.Close()
	tb.shutdown()
}

// tool is a listing entry for a scenario.
func tool(name, schema string) json.RawMessage {
	return json.RawMessage(`{"name":"` + name + `","inputSchema":` + schema + `}`)
}

// A server that changes its tools and says so (tools/list_changed) is
// re-listed and its new table published: a grant issued before keeps
// the tools whose input schema is byte-identical, is refused
// surface_changed for one whose schema changed and for one added since,
// and unknown_tool for one removed; a grant issued after sees the new
// table whole, and the façade is the new one.
func TestRelistOnListChanged(t *testing.T) {
	defer leakcheck.Check(t)()
	obj := `{"type":"object","properties":{"text":{"type":"string"}}}`
	sc := mcptest.Scenario{
		Tools:    []json.RawMessage{tool("relist", `{"type":"object"}`), tool("echo", obj), tool("fail", `{"type":"object"}`), tool("slow", `{"type":"object"}`)},
		Relisted: []json.RawMessage{tool("relist", `{"type":"object"}`), tool("echo", obj), tool("fail", `{"type":"object","properties":{"message":{"type":"string"}}}`), tool("add", `{"type":"object"}`)},
	}
	tb := startBridge(t, nil, mcptestServer("s", sc))
	srv := tb.srv("s")
	before := srv.current()
	old := tb.dial(tb.grant(map[string][]string{"s": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()

	if r, err := old.Call(ctx, "s", "relist", map[string]any{}); err != nil || r.Text() != "ok" {
		t.Fatalf("relist: %+v, %v", r, err)
	}
	eventually(t, "the new table published", func() bool { return srv.current() != before })
	if r, err := old.Call(ctx, "s", "echo", map[string]any{"text": "same"}); err != nil || r.Text() != "same" {
		t.Errorf("unchanged tool under the old grant: %+v, %v", r, err)
	}
	for tool, code := range map[string]string{"fail": capwire.CodeSurfaceChanged, "add": capwire.CodeSurfaceChanged, "slow": capwire.CodeUnknownTool} {
		_, err := old.Call(ctx, "s", tool, map[string]any{})
		var d *capwire.Denied
		if !errors.As(err, &d) || d.Code != code {
			t.Errorf("%s under the old grant: %v, want %s", tool, err, code)
		}
	}
	fresh := tb.dial(tb.grant(map[string][]string{"s": nil}))
	if r, err := fresh.Call(ctx, "s", "add", map[string]any{"a": 1, "b": 2}); err != nil || r.Text() != "3" {
		t.Errorf("added tool under a new grant: %+v, %v", r, err)
	}
	if r, err := fresh.Call(ctx, "s", "fail", map[string]any{"message": "as listed"}); err != nil || !r.IsError || r.Text() != "as listed" {
		t.Errorf("changed tool under a new grant: %+v, %v", r, err)
	}
	gen, err := srv.facade()
	if err == nil {
		gen, err = gen.WithSource()
	}
	if err != nil || !strings.Contains(string(gen.Source), "func Add(") || strings.Contains(string(gen.Source), "func Slow(") {
		t.Errorf("façade after the change: %v\n%s", err, gen.Source)
	}
	old.Close()
	fresh.Close()
	tb.shutdown()
}

// The bridge serves before its servers boot: a server still in its first
// attempt is unavailable, "starting", until the attempt ends.
func TestStartingUnavailable(t *testing.T) {
	defer leakcheck.Check(t)()
	synctest.Test(t, func(t *testing.T) {
		cfg := config.NewServer("s", "/nonexistent")
		s := newServer(cfg, zerolog.Nop(), zerolog.Nop(), bootOptions{}, nil)
		release := make(chan struct{})
		s.launch = func(ctx context.Context) (*table, error) {
			select {
			case <-release:
				return nil, errors.New("boom")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		s.begin()
		synctest.Wait()
		_, err := s.ready()
		if msg := s.unavailableMessage(err); msg != `server "s" is starting` {
			t.Errorf("while booting: %q", msg)
		}
		close(release)
		<-s.firstDone
		s.retire()
	})
}

// Once a server's client has seen it die, status never says ready, even
// before the supervisor has acted on the death: no pid of a process that
// is gone, and the reason is the death's.
func TestStatusNotReadyAfterDeath(t *testing.T) {
	defer leakcheck.Check(t)()
	s := neverRestart(mcptestServer("s", mcptest.Scenario{}))
	tb := startBridge(t, nil, s)
	defer tb.shutdown()
	srv := tb.srv("s")
	srv.mu.Lock()
	client := srv.cur.client
	srv.mu.Unlock()
	if err := syscall.Kill(client.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-client.Done():
	case <-time.After(backstop):
		t.Fatal("the client never saw its server die")
	}
	st := srv.status()
	if State(st.State) == StateReady || st.PID != 0 || !strings.HasPrefix(st.Reason, "died: ") {
		t.Fatalf("status after the death: %+v; want dead, no pid, the death as reason", st)
	}
}
