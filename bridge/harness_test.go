package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// The test binary doubles as the mcptest server: a child started with a
// scenario in its environment serves it and exits before any test runs.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	rawecho.MaybeServe()
	leakcheck.Main(m)
}

// testBridge is a booted, listening bridge on sockets in a fresh
// directory, shut down (and checked for a confirmed retirement) when the
// test ends.
type testBridge struct {
	*Bridge
	t      *testing.T
	dir    string
	served chan struct{}
	down   bool
}

// mcptestServer configures a server run by the mcptest child for sc.
func mcptestServer(name string, sc mcptest.Scenario) config.Server {
	argv, env := mcptest.Command(sc)
	s := config.NewServer(name, argv[0])
	s.Args = argv[1:]
	s.Env = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	s.StartupTimeout = 30 * time.Second
	return s
}

// soleGrant gives one grant the whole of s: for tests that drive a
// server with one grant and are not about fair shares.
func soleGrant(s *config.Server) {
	s.MaxInflightPerGrant, s.MaxQueuePerGrant = s.MaxInflight, s.MaxQueue
}

// neverRestart is s with restart = "never": for tests of what a failed
// boot or a death leaves behind when nothing restarts it.
func neverRestart(s config.Server) config.Server {
	s.Restart = config.RestartNever
	return s
}

// startBridge boots a bridge serving servers; tweak, when non-nil, may
// adjust the config first. It fails the test if any server does not boot
// unless allowFailed is set through tweak's returned value.
func startBridge(t *testing.T, tweak func(*config.Config), servers ...config.Server) *testBridge {
	t.Helper()
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	return startBridgeLog(t, log, tweak, servers...)
}

// startBridgeLog is startBridge with log as the bridge's operational log
// and audit trail.
func startBridgeLog(t *testing.T, log zerolog.Logger, tweak func(*config.Config), servers ...config.Server) *testBridge {
	t.Helper()
	return startBridgeOpts(t, Options{Log: log, Audit: log}, tweak, servers...)
}

// startBridgeOpts is startBridge with the Options given (their Config is
// the test's, tweak applied), for tests of what an Option changes.
func startBridgeOpts(t *testing.T, o Options, tweak func(*config.Config), servers ...config.Server) *testBridge {
	t.Helper()
	// Socket paths must fit 108 bytes; t.TempDir's can be long.
	dir, err := os.MkdirTemp("", "cb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Defaults()
	cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
	cfg.Bridge.ShutdownGrace = 2 * time.Second
	// The default write timeout (5 s) is a race a test client loses when
	// a busy machine does not schedule its reading goroutine for that
	// long, and the bridge then drops it as a stalled reader. Tests of
	// that rule set their own through tweak.
	cfg.Bridge.WriteTimeout = time.Minute
	cfg.Servers = servers
	if tweak != nil {
		tweak(cfg)
	}
	o.Config = cfg
	tb := &testBridge{Bridge: New(o), t: t, dir: dir, served: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb.Boot(ctx)
	if err := tb.Listen(); err != nil {
		_ = tb.Shutdown(0)
		t.Fatal(err)
	}
	go func() { tb.Serve(); close(tb.served) }()
	t.Cleanup(tb.shutdown)
	return tb
}

// shutdown stops the bridge once, with the configured grace period;
// every retirement must be confirmed.
func (tb *testBridge) shutdown() {
	if tb.down {
		return
	}
	tb.down = true
	if err := tb.Shutdown(tb.cfg.Bridge.ShutdownGrace); err != nil {
		tb.t.Errorf("shutdown: %v", err)
	}
	<-tb.served
}

// shutdownAt is shutdown with the grace period ending when graceOver is
// closed, so a test decides what happens within it without racing a
// timer.
func (tb *testBridge) shutdownAt(graceOver <-chan time.Time) {
	if tb.down {
		return
	}
	tb.down = true
	if err := tb.Bridge.shutdown(graceOver, 2*tb.cfg.Bridge.WriteTimeout); err != nil {
		tb.t.Errorf("shutdown: %v", err)
	}
	<-tb.served
}

// backstop bounds every wait for an event that a test needs to happen.
// It only fires when the behaviour under test is broken: waits are for
// events, not for time to pass, so a slow machine only makes them longer.
const backstop = 60 * time.Second

// eventually waits until cond holds, failing the test with what after
// backstop. cond reads state that has no channel to wait on (gauges of
// the bridge, the server's own record); it is checked often, and the
// wait ends as soon as it holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(backstop)
	defer limit.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-limit.C:
			t.Fatalf("after %v: still waiting for %s", backstop, what)
		}
	}
}

// draining reports whether Shutdown has closed admission.
func (tb *testBridge) draining() bool {
	return tb.flight.Draining()
}

// grant issues a grant through the public API and returns its token.
func (tb *testBridge) grant(servers map[string][]string) string {
	tb.t.Helper()
	_, token, err := tb.Grant(GrantSpec{Servers: servers})
	if err != nil {
		tb.t.Fatal(err)
	}
	return token
}

// dial connects a capwire client with token; it is closed at cleanup.
func (tb *testBridge) dial(token string) *capwire.Client {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	c, err := capwire.Dial(ctx, tb.CallSocket(), token)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Cleanup(func() { c.Close() })
	return c
}

// control dials the control socket; it is closed at cleanup.
func (tb *testBridge) control() *control.Client {
	tb.t.Helper()
	c, err := control.Dial(context.Background(), tb.ControlSocket())
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Cleanup(func() { c.Close() })
	return c
}

// A smoke test of the harness itself: one call through the whole path.
func TestBridgeEcho(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Call(ctx, "t", "echo", map[string]any{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text() != "hello" || r.IsError {
		t.Fatalf("result = %+v", r)
	}
	c.Close()
	tb.shutdown()
}
