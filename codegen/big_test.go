package codegen

import (
	"fmt"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/bigtools"
)

// bigListing is n generated tools (internal/testkit/bigtools) read as the
// bridge reads a live server's.
func bigListing(tb testing.TB, n int) []Tool {
	tb.Helper()
	tools, err := ParseListing(bigtools.Page(nil, 0, n, n, ""))
	if err != nil {
		tb.Fatal(err)
	}
	return tools
}

// BenchmarkGenerateBig measures a façade's generation as a listing grows
// from 100 to 10 000 tools, in each language: time per tool should stay
// flat.
func BenchmarkGenerateBig(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		tools := bigListing(b, n)
		for _, lang := range []Lang{Go, TypeScript, Python} {
			b.Run(fmt.Sprintf("%s/%d", lang, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Generate("big", tools, Options{Lang: lang}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tool")
			})
		}
	}
}
