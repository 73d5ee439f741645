package bridge

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
	"github.com/capbridge/capbridge/mcpwire"
)

// benchText is the echo payload: 64 bytes, as in mcpwire's BenchmarkCallTool.
const benchText = "0123456789012345678901234567890123456789012345678901234567890123"

// BenchmarkBridgeCall measures one echo call through the whole service —
// capwire client → call socket → bridge (grant, interchange, admission,
// reduction, audit) → mcpwire → the server child → back — sequentially
// and with 32 calls in flight on one connection, next to its baseline in
// the same run: an mcpwire.Client calling the same kind of child
// directly. It runs against two servers: mcptest (a realistic Go server)
// and rawecho (the physical-limit server, so the bridge's own cost is not
// hidden behind the server's). The ratio bridge/direct is the bridge's
// cost; compare within one run (the machine is shared and noisy). Audit
// and logs go to zerolog.Nop, so their encoding is not counted.
func BenchmarkBridgeCall(b *testing.B) {
	margv, menv := mcptest.Command(mcptest.Scenario{})
	rargv, renv := rawecho.Command()
	for _, srv := range []struct {
		name      string
		argv, env []string
	}{{"mcptest", margv, menv}, {"rawecho", rargv, renv}} {
		for _, par := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/direct/inflight=%d", srv.name, par), func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := mcpwire.Start(ctx, mcpwire.Command{Argv: srv.argv, Env: srv.env, Inherit: []string{"PATH", "HOME", "TMPDIR"}}, mcpwire.Config{})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				args := mcpwire.JSONArgs([]byte(`{"text":"` + benchText + `"}`))
				benchLoop(b, par, func(ctx context.Context) bool {
					r, err := c.CallTool(ctx, "echo", args, mcpwire.CallOptions{})
					return err == nil && len(r.Content) == 1 && r.Content[0].Text == benchText
				})
			})
			b.Run(fmt.Sprintf("%s/bridge/inflight=%d", srv.name, par), func(b *testing.B) {
				br, token := benchBridge(b, srv.argv, srv.env)
				benchEcho(b, br, token, par, nil)
			})
		}
	}
}

// benchLoop runs call b.N times, one at a time or with par in flight, and
// fails the benchmark if any call did not answer as it should.
func benchLoop(b *testing.B, par int, call func(context.Context) bool) {
	ctx := context.Background()
	var fails atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if par == 1 {
		for b.Loop() {
			if !call(ctx) {
				fails.Add(1)
			}
		}
	} else {
		// RunParallel starts parallelism × GOMAXPROCS goroutines; round
		// up so at least par calls are in flight.
		b.SetParallelism((par + 1) / 2)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !call(ctx) {
					fails.Add(1)
				}
			}
		})
	}
	b.StopTimer()
	if n := fails.Load(); n > 0 {
		b.Fatalf("%d calls failed", n)
	}
}

// benchBridge boots a bridge serving one server "t" run by argv and returns
// it with a token for it; it is shut down when the benchmark ends. The
// server may run 64 calls at once, so admission never throttles the
// parallel run below the baseline's 32 in flight: the ratio then measures
// the bridge's path, not its default max_inflight of 8.
// benchEcho dials br with token and measures a 64-byte echo call to its
// server "t", par calls in flight; ctxOf, if not nil, dresses each call's
// context.
func benchEcho(b *testing.B, br *Bridge, token string, par int, ctxOf func(context.Context) context.Context) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := capwire.Dial(ctx, br.CallSocket(), token)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args, err := msgpack.Marshal(map[string]string{"text": benchText})
	if err != nil {
		b.Fatal(err)
	}
	raw := msgpack.RawMessage(args)
	benchLoop(b, par, func(ctx context.Context) bool {
		if ctxOf != nil {
			ctx = ctxOf(ctx)
		}
		r, err := c.Call(ctx, "t", "echo", raw)
		return err == nil && len(r.Content) == 1 && r.Content[0].Text == benchText
	})
}

func benchBridge(b *testing.B, argv, env []string) (*Bridge, string) {
	b.Helper()
	return benchBridgeOpts(b, Options{Log: zerolog.Nop(), Audit: zerolog.Nop()}, argv, env)
}

// benchBridgeOpts is benchBridge with the Options given (their Config is
// the benchmark's).
func benchBridgeOpts(b testing.TB, o Options, argv, env []string) (*Bridge, string) {
	b.Helper()
	dir, err := os.MkdirTemp("", "cb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	s := config.NewServer("t", argv[0])
	s.Args = argv[1:]
	s.Env = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	s.MaxInflight = 64
	soleGrant(&s)
	cfg := config.Defaults()
	// One grant makes every call of a run, which may be millions: the
	// default budget of audit lines (about 10⁵ calls' worth, charged
	// whatever the sink) would refuse the rest not_granted. The lines
	// are still written and charged, as shipped.
	cfg.Bridge.AuditGrantBudget = math.MaxInt
	cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
	cfg.Servers = []config.Server{s}
	o.Config = cfg
	br := New(o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := br.Boot(ctx); got[0].State != StateReady {
		_ = br.Shutdown(0)
		b.Fatalf("boot: %v", got)
	}
	if err := br.Listen(); err != nil {
		_ = br.Shutdown(0)
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() { br.Serve(); close(served) }()
	b.Cleanup(func() {
		if err := br.Shutdown(5 * time.Second); err != nil {
			b.Errorf("shutdown: %v", err)
		}
		<-served
	})
	_, token, err := br.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
	if err != nil {
		b.Fatal(err)
	}
	return br, token
}
