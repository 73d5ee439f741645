package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/telemetry"
)

func TestTelemetryTable(t *testing.T) {
	doc := "[telemetry]\nendpoint = \"http://127.0.0.1:4318/base\"\nprotocol = \"grpc\"\nservice_name = \"sandbox-7\"\nsampler = \"traceidratio\"\nsampler_arg = 0.5\nshutdown_timeout = \"2s\"\n"
	cfg, err := Load("capbridge.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := telemetry.Config{Endpoint: "http://127.0.0.1:4318/base", Protocol: "grpc", ServiceName: "sandbox-7", Sampler: "traceidratio", SamplerArg: 0.5, SamplerArgSet: true, ShutdownTimeout: 2 * time.Second}
	if cfg.Telemetry != want {
		t.Errorf("got %+v, want %+v", cfg.Telemetry, want)
	}
	cfg, err = Load("capbridge.toml", nil)
	if err != nil || cfg.Telemetry != (telemetry.Config{}) {
		t.Errorf("no table: %+v, %v; want the zero Config (off unless the environment says otherwise)", cfg.Telemetry, err)
	}
}

// A mistake in [telemetry] names file:line, the key and the fix.
func TestTelemetryErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		key       string
		msg, fix  string
	}{
		{"endpoint without scheme", "[telemetry]\n\nendpoint = \"127.0.0.1:4318\"\n", 3, "telemetry.endpoint", "bad endpoint", "http://127.0.0.1:4318"},
		{"endpoint with a query", "[telemetry]\nendpoint = \"http://c:4318/?k=v\"\n", 2, "telemetry.endpoint", "no user, query or fragment", ""},
		{"endpoint a number", "[telemetry]\nendpoint = 4318\n", 2, "telemetry.endpoint", "must be a string", ""},
		{"bad protocol", "[telemetry]\nprotocol = \"http/json\"\n", 2, "telemetry.protocol", `bad value "http/json"`, "http/protobuf, grpc"},
		{"bad sampler", "[telemetry]\nsampler = \"sometimes\"\n", 2, "telemetry.sampler", "bad value", "parentbased_traceidratio"},
		{"ratio above one", "[telemetry]\nsampler = \"traceidratio\"\nsampler_arg = 2\n", 3, "telemetry.sampler_arg", "bad ratio", "from 0 to 1"},
		{"ratio without its sampler", "[telemetry]\nsampler_arg = 0.5\n", 2, "telemetry.sampler_arg", "not one", `sampler = "parentbased_traceidratio"`},
		{"empty service name", "[telemetry]\nservice_name = \" \"\n", 2, "telemetry.service_name", "empty", ""},
		{"bad timeout", "[telemetry]\nshutdown_timeout = \"soon\"\n", 2, "telemetry.shutdown_timeout", "bad duration", ""},
		{"unknown key", "[telemetry]\nendpiont = \"http://c:4318\"\n", 2, "telemetry.endpiont", "unknown key", `did you mean "endpoint"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("capbridge.toml", []byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Load = %v, want an *Error", err)
			}
			if e.Line != tc.line || e.Key != tc.key || !strings.Contains(e.Msg, tc.msg) || !strings.Contains(e.Fix, tc.fix) {
				t.Errorf("got %v (line %d key %q fix %q), want line %d key %q, message with %q, fix with %q", e, e.Line, e.Key, e.Fix, tc.line, tc.key, tc.msg, tc.fix)
			}
		})
	}
}
