// Package metricslib measures what the two maintained Prometheus
// libraries for Go cost capbridge's call path, in one run: per call, one
// increment of calls_total{server,tool,outcome} and one observation of a
// per-server latency histogram (capbridge's buckets). "handles" resolves
// the series once, as bridge/metrics.go does; "lookup" finds them by
// label values on every call. Each runs serially and on every core. Its
// result chose github.com/VictoriaMetrics/metrics (docs/operating.md,
// "Metrics"); client_golang is required only here, in the bench module.
package metricslib

import (
	"testing"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

var buckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Variables, not constants, so a lookup's name cannot be folded at
// compile time.
var server, tool, outcome = "memory", "read_graph", "result"

// latency spreads observations over the buckets, as real calls do.
func latency(i int) float64 { return float64(i%4096) * 25e-6 }

func BenchmarkCallMetrics(b *testing.B) {
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capbridge_calls_total"}, []string{"server", "tool", "outcome"})
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "capbridge_call_duration_seconds", Buckets: buckets}, []string{"server"})
	prometheus.NewRegistry().MustRegister(calls, hist)
	pc, ph := calls.WithLabelValues(server, tool, outcome), hist.WithLabelValues(server)

	set := vm.NewSet()
	vc := set.NewCounter(`capbridge_calls_total{server="` + server + `",tool="` + tool + `",outcome="` + outcome + `"}`)
	vh := set.NewPrometheusHistogramExt(`capbridge_call_duration_seconds{server="`+server+`"}`, buckets)

	for _, c := range []struct {
		name string
		call func(i int)
	}{
		{"lib=client_golang/handles", func(i int) { pc.Inc(); ph.Observe(latency(i)) }},
		{"lib=victoriametrics/handles", func(i int) { vc.Inc(); vh.Update(latency(i)) }},
		{"lib=client_golang/lookup", func(i int) {
			calls.WithLabelValues(server, tool, outcome).Inc()
			hist.WithLabelValues(server).Observe(latency(i))
		}},
		{"lib=victoriametrics/lookup", func(i int) {
			set.GetOrCreateCounter(`capbridge_calls_total{server="` + server + `",tool="` + tool + `",outcome="` + outcome + `"}`).Inc()
			set.GetOrCreatePrometheusHistogramExt(`capbridge_call_duration_seconds{server="`+server+`"}`, buckets).Update(latency(i))
		}},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.call(i)
				i++
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					c.call(i)
					i++
				}
			})
		})
	}
}
