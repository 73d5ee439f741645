package telemetry

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestValidAndParse(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := Parse(tp)
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("Parse(%q) = %v, %v", tp, sc, ok)
	}
	if got := Format(sc); got != tp {
		t.Errorf("Format = %q, want %q", got, tp)
	}
	for _, bad := range []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",      // short
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     // not version 00
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",     // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",     // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",     // zero span id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",     // separator
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz", // long
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",     // not hex
	} {
		if Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	if Format(trace.SpanContext{}) != "" {
		t.Error("an invalid span context was formatted")
	}
	var accepted bool
	if n := testing.AllocsPerRun(100, func() { accepted = Valid(tp) }); n != 0 || !accepted {
		t.Errorf("Valid allocates %v times", n)
	}
}

func FuzzValid(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
	f.Fuzz(func(t *testing.T, tp string) {
		sc, ok := Parse(tp)
		if ok != Valid(tp) {
			t.Fatalf("Parse and Valid disagree on %q", tp)
		}
		if ok && Format(sc) != tp[:53]+map[bool]string{true: "01", false: "00"}[sc.IsSampled()] {
			t.Fatalf("%q round-trips as %q", tp, Format(sc))
		}
	})
}

// Which settings win: the table's, then the environment's, then the
// defaults; bad environment values are errors naming the variable.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		env  map[string]string
		url  string // "" when off
		prot string
		svc  string
		smp  string
		rat  float64
		err  string
	}{
		{name: "nothing configured is off"},
		{name: "an empty table is off", cfg: Config{ServiceName: "x"}},
		{name: "general endpoint gets the signal path", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, url: "http://c:4318/v1/traces", prot: ProtocolHTTP, svc: "capbridge", smp: "parentbased_always_on", rat: 1},
		{name: "signal endpoint used as it is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t:443/custom"}, url: "https://t:443/custom", prot: ProtocolHTTP, svc: "capbridge", smp: "parentbased_always_on", rat: 1},
		{name: "grpc leaves the path", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, url: "http://c:4317", prot: ProtocolGRPC, svc: "capbridge", smp: "parentbased_always_on", rat: 1},
		{name: "table wins over environment",
			cfg: Config{Endpoint: "http://table:4318/base/", Protocol: ProtocolHTTP, ServiceName: "tbl", Sampler: "traceidratio", SamplerArg: 0.5, SamplerArgSet: true},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "env", "OTEL_TRACES_SAMPLER": "always_off", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
			url: "http://table:4318/base/v1/traces", prot: ProtocolHTTP, svc: "tbl", smp: "traceidratio", rat: 0.5},
		{name: "environment fills in", cfg: Config{Endpoint: "http://c:4318"},
			env: map[string]string{"OTEL_SERVICE_NAME": "env", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
			url: "http://c:4318/v1/traces", prot: ProtocolHTTP, svc: "env", smp: "parentbased_traceidratio", rat: 0.25},
		{name: "SDK disabled", cfg: Config{Endpoint: "http://c:4318"}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", cfg: Config{Endpoint: "http://c:4318"}, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "other exporter", cfg: Config{Endpoint: "http://c:4318"}, env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "bad protocol", cfg: Config{Endpoint: "http://c:4318"}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "bad sampler", cfg: Config{Endpoint: "http://c:4318"}, env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "bad ratio", cfg: Config{Endpoint: "http://c:4318"}, env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "bad endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := resolve(tc.cfg, envOf(tc.env))
			tr, nerr := New(tc.cfg, envOf(tc.env), "test", nil)
			defer tr.Shutdown()
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) || nerr == nil {
					t.Fatalf("err = %v (New: %v), want one naming %s", err, nerr, tc.err)
				}
			case tc.url == "":
				if !errors.Is(err, errDisabled) || tr != nil || nerr != nil {
					t.Fatalf("on: %+v, %v", s, nerr)
				}
			default:
				if err != nil || nerr != nil || tr == nil {
					t.Fatalf("resolve: %v; New: %v", err, nerr)
				}
				if s.url.String() != tc.url || s.protocol != tc.prot || s.service != tc.svc || s.sampler != tc.smp || s.ratio != tc.rat || s.timeout != DefaultShutdownTimeout {
					t.Errorf("got %s %s %s %s %v %v", s.url, s.protocol, s.service, s.sampler, s.ratio, s.timeout)
				}
			}
		})
	}
}

// TestEndpointErrorsHideCredentials: an endpoint refused for its user,
// query or fragment (or for anything else) is quoted in the error with
// its password, query values and fragment replaced (the user too when
// it is the only credential), so the mistake shows and the collector's
// password or key does not; as the table sets it or the environment
// does, and when it does not parse as a URL at all.
func TestEndpointErrorsHideCredentials(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		hidden []string
		shown  string
	}{
		{"https://ingest:otlp-pass-5566@collector.example:4318", []string{"otlp-pass-5566"}, `"https://ingest:xxxxx@collector.example:4318": an OTLP endpoint has no user, query or fragment`},
		{"https://collector.example:4318/?api_key=otlp-key-7788&region=eu", []string{"otlp-key-7788"}, `"https://collector.example:4318/?api_key=xxxxx&region=xxxxx"`},
		{"https://otlp-token-9911@collector.example", []string{"otlp-token-9911"}, `"https://xxxxx@collector.example"`},
		{"https://collector.example/#otlp-frag-3344", []string{"otlp-frag-3344"}, `"https://collector.example/#xxxxx"`},
		{"ftp://ingest:otlp-pass-5566@collector.example/?k=otlp-key-7788", []string{"otlp-pass-5566", "otlp-key-7788"}, "write an http:// or https:// URL"},
		{"https://ingest:otlp%zzpass@collector.example/?k=otlp-key-7788", []string{"otlp%zzpass", "otlp-key-7788"}, `"https://xxxxx@collector.example/?xxxxx" is not a URL`},
		{"https://ingest:otlp-pass-5566@[::1/?k=otlp-key-7788", []string{"otlp-pass-5566", "otlp-key-7788"}, "is not a URL"},
		{"ingest:otlp-pass-5566@collector.example:4318", []string{"otlp-pass-5566"}, `"ingest:xxxxx@collector.example:4318": write an http:// or https:// URL`},
	} {
		for _, where := range []struct {
			cfg Config
			env map[string]string
		}{{cfg: Config{Endpoint: tc.raw}}, {env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": tc.raw}}} {
			tr, err := New(where.cfg, envOf(where.env), "test", nil)
			if err == nil {
				tr.Shutdown()
				t.Fatalf("%s: accepted", tc.raw)
			}
			if !strings.Contains(err.Error(), tc.shown) {
				t.Errorf("%s: the error does not show the endpoint so: %v", tc.raw, err)
			}
			for _, h := range tc.hidden {
				if strings.Contains(err.Error(), h) {
					t.Errorf("%s: the error holds %q: %v", tc.raw, h, err)
				}
			}
		}
	}
}

// Off is a nil *Tracer, and everything on it is a no-op that allocates
// nothing: the call path's whole cost when traces are off.
func TestOffCostsNothing(t *testing.T) {
	var tr *Tracer
	n := testing.AllocsPerRun(100, func() {
		c := tr.StartCall("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "mcp.s")
		_ = c.StartRequest("s", "t", "stdio")
		c.EndRequest("timeout")
		c.End(Outcome{Server: "s"})
		ctx, op := tr.StartOp(context.Background(), OpBoot, "s")
		op.End(1, "")
		Drift(ctx, "s", "t", "description_changed", "withheld")
	})
	if n != 0 {
		t.Errorf("a nil Tracer allocates %v times per call", n)
	}
	if err := tr.Shutdown(); err != nil {
		t.Error(err)
	}
}

// Shutdown is bounded by the configured timeout even when the collector
// accepts the connection and never answers: the spans are lost, the
// service stops.
func TestShutdownBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepting := make(chan struct{})
	var held []net.Conn
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	defer func() {
		l.Close()
		<-accepting
		for _, c := range held {
			c.Close()
		}
	}()
	tr, err := New(Config{Endpoint: "http://" + l.Addr().String(), ShutdownTimeout: 100 * time.Millisecond}, envOf(nil), "test", func(error) {})
	if err != nil || tr == nil {
		t.Fatal(tr, err)
	}
	tr.StartCall("", "mcp.s").End(Outcome{})
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Shutdown reports success though the collector never answered")
		}
	case <-time.After(time.Minute): // a backstop: the bound is 100 ms
		t.Fatal("Shutdown did not return within its bound")
	}
}

// recorded is a Tracer whose spans a test reads as they end, with the
// limits New sets.
func recorded() (*Tracer, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = maxAttrValue
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithRawSpanLimits(limits))
	return &Tracer{tp: tp, tr: tp.Tracer("test"), timeout: time.Second}, sr
}

// What a program chose (a capability, a tool) is bounded in a span, in
// its name and in its attributes, however long it was: a hostile program
// cannot make the export queue hold megabytes per span.
func TestSpanBounds(t *testing.T) {
	tr, sr := recorded()
	long := strings.Repeat("x", 1<<20)
	c := tr.StartCall("", "mcp."+long)
	_ = c.StartRequest(long, long, "stdio")
	c.EndRequest("server_error")
	c.End(Outcome{Grant: "g", Server: long, Tool: long, Result: "denied", Code: "unknown_tool"})
	spans := sr.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	for _, s := range spans {
		if len(s.Name()) > maxName+32 {
			t.Errorf("a span name of %d bytes", len(s.Name()))
		}
		for _, kv := range s.Attributes() {
			if n := len(kv.Value.String()); n > maxAttrValue {
				t.Errorf("attribute %s of %d bytes", kv.Key, n)
			}
		}
	}
	if req, call := spans[0], spans[1]; req.Parent().SpanID() != call.SpanContext().SpanID() || req.SpanKind() != trace.SpanKindClient || call.SpanKind() != trace.SpanKindServer {
		t.Errorf("request %v under %v, kinds %v and %v", req.Parent(), call.SpanContext(), req.SpanKind(), call.SpanKind())
	}
	if call := spans[1]; call.Status().Code != codes.Error || call.Status().Description != "unknown_tool" {
		t.Errorf("call status %+v", call.Status())
	}
}
