package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/mcptest"
	"github.com/capbridge/capbridge/internal/rawecho"
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
						r, err := c.Call(ctx, "t", "echo", raw)
						return err == nil && len(r.Content) == 1 && r.Content[0].Text == benchText
					})
				})
			}
		}
	}
}
