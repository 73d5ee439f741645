package bridge

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
	"github.com/capbridge/capbridge/mcpwire"
)

// BenchmarkBridgeCallMetrics is BenchmarkBridgeCall's bridge path with
// metrics off and on, side by side in one run (benchstat -col /metrics):
// what counting a call, its latency, its frames' bytes and its denials
// costs the hot path. Off is a bridge whose metrics were removed before
// any connection, so every hook returns at its nil check.
func BenchmarkBridgeCallMetrics(b *testing.B) {
	margv, menv := mcptest.Command(mcptest.Scenario{})
	rargv, renv := rawecho.Command()
	for _, srv := range []struct {
		name      string
		argv, env []string
	}{{"mcptest", margv, menv}, {"rawecho", rargv, renv}} {
		for _, par := range []int{1, 32} {
			for _, on := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/inflight=%d/metrics=%v", srv.name, par, on), func(b *testing.B) {
					br, token := benchBridge(b, srv.argv, srv.env)
					if !on {
						// Under mu: the accept loop reads metrics under
						// it in track, and every connection's goroutine
						// starts after that.
						br.mu.Lock()
						br.metrics = nil
						br.mu.Unlock()
					}
					benchEcho(b, br, token, par, nil)
				})
			}
		}
	}
}

// BenchmarkMetricsHooks is what counting one call adds, alone: its
// retirement (counter and latency) and its two frames' bytes, on a
// server with a listing, serially and on every core.
func BenchmarkMetricsHooks(b *testing.B) {
	cfg := config.Defaults()
	cfg.Servers = []config.Server{config.NewServer("s", "/bin/true")}
	br := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	s := br.srv("s")
	s.metrics.booted(time.Now(), &table{tools: map[string]mcpwire.Tool{"echo": {}, "add": {}}})
	m, traffic, o := br.metrics, br.metrics.trafficFunc(), outcome{result: &capwire.Result{}}
	hooks := func() {
		traffic(90, 0)
		m.retired("s", "echo", o, 50*time.Microsecond)
		traffic(0, 80)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hooks()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				hooks()
			}
		})
	})
}
