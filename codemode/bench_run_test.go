package codemode

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRunOverhead measures, per language, a run's overhead from the
// run request to the program's first instruction (the program's first
// statement reads the clock) and to the run's end, for a program that
// makes no call: each run is cold (a fresh jail and runtime; there is no
// pool). It reports the p50 and p99 of each, in milliseconds.
func BenchmarkRunOverhead(b *testing.B) {
	r, srv := newRunner(b, nil)
	defer srv.Close()
	progs := map[string]string{
		TypeScript: "console.log(Date.now());",
		Python:     "import time\nprint(time.time_ns() // 1000000)",
	}
	for _, lang := range r.Languages() {
		b.Run(lang, func(b *testing.B) {
			var first, whole []float64
			for b.Loop() {
				start := time.Now()
				res, err := r.Run(context.Background(), Request{Language: lang, Code: progs[lang], Timeout: 30 * time.Second})
				if err != nil || !res.OK() {
					b.Fatalf("run: %v %+v", err, res)
				}
				ms, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				first = append(first, float64(ms-start.UnixMilli()))
				whole = append(whole, float64(time.Since(start).Microseconds())/1000)
			}
			report(b, "first-instr", first)
			report(b, "whole", whole)
		})
	}
}

func report(b *testing.B, name string, v []float64) {
	slices.Sort(v)
	at := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	b.ReportMetric(at(0.50), name+"-p50-ms")
	b.ReportMetric(at(0.99), name+"-p99-ms")
}
