package bridge

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/telemetry"
	"github.com/capbridge/capbridge/internal/testkit/otlprecv"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// BenchmarkBridgeCallTraced is BenchmarkBridgeCall's 64-byte call, one in
// flight, to the raw echo server, with traces on: what a call costs with
// its two spans exported over OTLP/HTTP to a receiver in this process
// (which decodes them, on the same two CPUs), with the program's
// traceparent and without. sampled=off is the sampler recording nothing:
// the spans' ids are still made and propagated. Compare with
// BenchmarkBridgeCall/rawecho/bridge/inflight=1 in the same run.
func BenchmarkBridgeCallTraced(b *testing.B) {
	argv, env := rawecho.Command()
	for _, tc := range []struct {
		name, sampler string
		traceparent   string
	}{
		{"sampled=on/parent=none", "always_on", ""},
		{"sampled=on/parent=program", "parentbased_always_on", programTP},
		{"sampled=off", "always_off", ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			recv := otlprecv.Start(b)
			tr, err := telemetry.New(telemetry.Config{Endpoint: recv.URL, Sampler: tc.sampler}, noEnv, "bench", func(error) {})
			if err != nil {
				b.Fatal(err)
			}
			br, token := benchBridgeOpts(b, Options{Log: zerolog.Nop(), Audit: zerolog.Nop(), Tracer: tr}, argv, env)
			benchEcho(b, br, token, 1, func(ctx context.Context) context.Context {
				if tc.traceparent != "" {
					ctx = capwire.WithTraceparent(ctx, tc.traceparent)
				}
				return ctx
			})
		})
	}
}
