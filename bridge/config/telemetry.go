package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/capbridge/capbridge/internal/telemetry"
)

// The [telemetry] table: OpenTelemetry traces over OTLP. Each key set here
// wins over its OTEL_* environment variable; a key left out takes the
// variable's value, then the default. Traces are off unless an endpoint
// is set, here or in OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
//
//	[telemetry]
//	endpoint         = "http://127.0.0.1:4318"     # OTLP base URL; over HTTP, traces go to /v1/traces under it
//	protocol         = "http/protobuf"             # or "grpc" (then e.g. "http://127.0.0.1:4317")
//	service_name     = "capbridge"
//	sampler          = "parentbased_traceidratio"
//	sampler_arg      = 0.25
//	shutdown_timeout = "5s"                        # how long shutdown may spend sending the last spans

var telemetrySpec = []keySpec{
	{name: "endpoint", kind: kindURL, doc: `the OTLP collector's base URL, http:// or https://; over HTTP the traces go to its path + "/v1/traces"; default OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as it is), else OTEL_EXPORTER_OTLP_ENDPOINT; traces are off when none is set`},
	{name: "protocol", kind: kindEnum, enum: []string{telemetry.ProtocolHTTP, telemetry.ProtocolGRPC}, doc: `OTLP over HTTP (protobuf) or gRPC; default OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else "http/protobuf"`},
	{name: "service_name", kind: kindString, doc: `the service.name of capbridge's spans; default OTEL_SERVICE_NAME, else "capbridge"`},
	{name: "sampler", kind: kindEnum, enum: telemetry.Samplers, doc: `which traces are recorded; default OTEL_TRACES_SAMPLER, else "parentbased_always_on": a program's sampled span is followed, and a call without one starts a sampled trace`},
	{name: "sampler_arg", kind: kindRatio, doc: "the ratio of traces the traceidratio samplers record, from 0 to 1; default OTEL_TRACES_SAMPLER_ARG, else 1"},
	{name: "shutdown_timeout", kind: kindDuration, doc: `how long shutdown may spend sending the spans still queued; default "5s"`},
}

var telemetryKeys = specNames(telemetrySpec)

// telemetry reads the [telemetry] table.
func (r *reader) telemetry(key string, v any, dst *telemetry.Config) {
	t, ok := r.table(key, v)
	if !ok {
		return
	}
	var c telemetry.Config
	for _, k := range slices.Sorted(maps.Keys(t)) {
		v, k2 := t[k], key+"."+k
		switch k {
		case "endpoint":
			var s string
			if r.str(k2, v, &s) {
				if _, err := telemetry.ParseEndpoint(s); err != nil {
					r.fail(k2, `write the collector's URL, such as "http://127.0.0.1:4318" (OTLP/HTTP) or "http://127.0.0.1:4317" (gRPC)`, "bad endpoint: %v", err)
					continue
				}
				c.Endpoint = s
			}
		case "protocol":
			r.enum(k2, v, []string{telemetry.ProtocolHTTP, telemetry.ProtocolGRPC}, &c.Protocol)
		case "service_name":
			if r.str(k2, v, &c.ServiceName) && strings.TrimSpace(c.ServiceName) == "" {
				r.fail(k2, `name the service, such as "capbridge-sandbox", or remove the key`, "service_name is empty")
			}
		case "sampler":
			r.enum(k2, v, telemetry.Samplers, &c.Sampler)
		case "sampler_arg":
			c.SamplerArgSet = r.ratio(k2, v, &c.SamplerArg)
		case "shutdown_timeout":
			r.duration(k2, v, &c.ShutdownTimeout)
		default:
			r.unknown(k2, k, telemetryKeys)
		}
	}
	if c.SamplerArgSet && !strings.HasSuffix(c.Sampler, "traceidratio") {
		r.fail(key+".sampler_arg", `add sampler = "parentbased_traceidratio" (or "traceidratio"), or remove sampler_arg`, "sampler_arg is the ratio of a traceidratio sampler, and sampler is not one")
	}
	*dst = c
}

// ratio reads a number from 0 to 1.
func (r *reader) ratio(key string, v any, dst *float64) bool {
	f := number(v)
	if !(f >= 0 && f <= 1) {
		r.fail(key, "write a number from 0 to 1, such as 0.25", "bad ratio %s", describe(v))
		return false
	}
	*dst = f
	return true
}
