package bridge

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/testkit/bigtools"
	"github.com/capbridge/capbridge/mcpwire"
	"github.com/rs/zerolog"
)

// bigPages is a listing of n generated tools (internal/testkit/bigtools)
// decoded page by page, 500 to a page, as the MCP client decodes a
// server's: each page's tools alias that page's bytes.
func bigPages(tb testing.TB, n int) []mcpwire.Tool {
	tb.Helper()
	var all []mcpwire.Tool
	for from := 0; from < n; from += 500 {
		p, err := mcpproto.DecodeToolsPage(bigtools.Page(nil, from, 500, n, ""))
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, p.Tools...)
	}
	return all
}

// BenchmarkBuildBig measures what a listing costs the bridge once it is
// read: building its table (filters, façade surface, names, search,
// argument checks), in time and allocations per build, and the heap the
// table keeps live (live-MB: what a served listing holds for the
// bridge's life).
func BenchmarkBuildBig(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cfg := config.Server{Name: "big"}
			s := newServer(cfg, zerolog.Nop(), zerolog.Nop(), bootOptions{}, nil)
			var live float64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				listed := bigPages(b, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				t, err := s.build(context.Background(), nil, listed, &cfg, nil, false)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				listed = nil
				runtime.GC()
				runtime.ReadMemStats(&after)
				live = float64(after.HeapAlloc) - float64(before.HeapAlloc)
				runtime.KeepAlive(t)
				b.StartTimer()
			}
			// The listing's own bytes are counted too: before the build
			// they were the decoded pages, after it what the table keeps.
			b.ReportMetric(live/(1<<20), "live-MB")
		})
	}
}
