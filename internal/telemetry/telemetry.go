// Package telemetry implements capbridge's OpenTelemetry traces: a span
// per capwire call with a child per MCP request, and spans for a server's
// boot, restart, re-listing and lock drift, exported over OTLP (HTTP or
// gRPC).
//
// Traces are off unless configured, and off is a nil *Tracer: every
// method of a nil *Tracer, *Call and *Op returns at once, building no
// SDK object and allocating nothing, so the call path pays one pointer
// test when traces are off.
//
// Spans carry names, ids, codes and counts only: never argument or
// result values, and never text a server wrote (which may quote a
// secret) unless the caller redacted it.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/capbridge/capbridge/internal/truncate"
)

// Bounds of what one span and the export queue hold.
const (
	// maxAttrValue cuts an attribute's string value (a redacted boot
	// error is the longest).
	maxAttrValue = 1024
	// maxQueue is how many ended spans wait for export; beyond it the
	// batcher drops spans rather than grow (the SDK's default).
	maxQueue = 2048
	// exportTimeout bounds one export request.
	exportTimeout = 10 * time.Second
	// maxName cuts what a program or a server chose in a span's name (a
	// capability, a tool), which the attribute limit does not reach.
	maxName = 128
)

// Tracer makes capbridge's spans and exports them. A nil *Tracer is off.
// Its methods may be called concurrently; Shutdown once, after the last
// span ended.
type Tracer struct {
	tp      *sdktrace.TracerProvider
	tr      trace.Tracer
	timeout time.Duration
}

// New returns the Tracer cfg and the environment (getenv, os.Getenv in
// production) configure, or nil when they configure none. An invalid
// setting in the environment is an error naming the variable; the
// [telemetry] table's own values were checked by the config reader.
// version is the service.version resource attribute. onError, when not
// nil, is told of each failed export (the SDK's errors are otherwise
// written to stderr); it becomes the process's OpenTelemetry error
// handler.
func New(cfg Config, getenv func(string) string, version string, onError func(error)) (*Tracer, error) {
	s, err := resolve(cfg, getenv)
	if errors.Is(err, errDisabled) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if onError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(onError))
	}
	var exp *otlptrace.Exporter
	ctx := context.Background() // the exporters connect lazily: nothing waits here
	switch s.protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(s.url.String()), otlptracegrpc.WithTimeout(exportTimeout))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.url.String()), otlptracehttp.WithTimeout(exportTimeout))
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(s.service), semconv.ServiceVersion(version)))
	if err != nil {
		// Only a schema URL conflict fails a merge: keep ours alone.
		res = resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(s.service), semconv.ServiceVersion(version))
	}
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = maxAttrValue
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(maxQueue), sdktrace.WithExportTimeout(exportTimeout)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(s.sampler, s.ratio)),
		sdktrace.WithRawSpanLimits(limits),
	)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/capbridge/capbridge", trace.WithInstrumentationVersion(version)), timeout: s.timeout}, nil
}

func sampler(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	default:
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
}

// Shutdown exports the spans still queued and stops the exporter, within
// the configured shutdown timeout: spans not sent by then are lost.
func (t *Tracer) Shutdown() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flushing traces: %w", err)
	}
	return nil
}

// Call is the span of one capwire call and of its MCP request. A nil
// *Call is off. One goroutine uses a Call, from StartCall to End.
type Call struct {
	t    *Tracer
	ctx  context.Context // carries the call's span
	span trace.Span
	req  trace.Span
}

// StartCall starts the span of one capwire call to capability cap,
// child of the program's span when traceparent is a valid one (Valid).
func (t *Tracer) StartCall(traceparent, cap string) *Call {
	if t == nil {
		return nil
	}
	ctx := context.Background()
	if sc, ok := Parse(traceparent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := t.tr.Start(ctx, "capwire "+truncate.Ellipsis(cap, maxName), trace.WithSpanKind(trace.SpanKindServer))
	return &Call{t: t, ctx: ctx, span: span}
}

// StartControlCall starts the span of a call an operator makes through
// the control socket (capbridge call) to capability cap: a root span,
// since no program's trace stands behind it, whose End and MCP request
// are those of a capwire call.
func (t *Tracer) StartControlCall(cap string) *Call {
	if t == nil {
		return nil
	}
	ctx, span := t.tr.Start(context.Background(), "control "+truncate.Ellipsis(cap, maxName), trace.WithSpanKind(trace.SpanKindServer))
	return &Call{t: t, ctx: ctx, span: span}
}

// StartRequest starts the span of the call's MCP request (tools/call of
// tool on server, over transport) and returns the traceparent the request
// carries to the server: that span's.
func (c *Call) StartRequest(server, tool, transport string) string {
	if c == nil {
		return ""
	}
	_, c.req = c.t.tr.Start(c.ctx, "tools/call "+truncate.Ellipsis(tool, maxName), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tool),
		attribute.String("capbridge.server", server),
		attribute.String("capbridge.transport", transport),
	))
	return Format(c.req.SpanContext())
}

// EndRequest ends the MCP request's span; failure, when not "", is why
// the request failed, as a denial code.
func (c *Call) EndRequest(failure string) {
	if c == nil || c.req == nil {
		return
	}
	if failure != "" {
		c.req.SetStatus(codes.Error, failure)
		c.req.SetAttributes(attribute.String("error.type", failure))
	}
	c.req.End()
}

// Outcome is what a capwire call came to, for its span.
type Outcome struct {
	Grant, Server, Tool string
	// Result is "ok", "tool_error" (a result with isError) or "denied".
	Result string
	// Code is the denial's code when Result is "denied".
	Code              string
	BytesIn, BytesOut int
}

// End ends the call's span with its outcome.
func (c *Call) End(o Outcome) {
	if c == nil {
		return
	}
	c.span.SetAttributes(
		attribute.String("capbridge.grant.id", o.Grant),
		attribute.String("capbridge.server", o.Server),
		attribute.String("capbridge.tool", o.Tool),
		attribute.String("capbridge.outcome", o.Result),
		attribute.Int("capbridge.bytes_in", o.BytesIn),
		attribute.Int("capbridge.bytes_out", o.BytesOut),
	)
	if o.Code != "" {
		c.span.SetAttributes(attribute.String("capbridge.denial.code", o.Code))
		c.span.SetStatus(codes.Error, o.Code)
	}
	c.span.End()
}

// Op is the span of a server's boot, restart or re-listing. A nil *Op
// is off. One goroutine uses an Op.
type Op struct {
	span trace.Span
}

// Server operations, the names of their spans.
const (
	OpBoot    = "capbridge.server.boot"
	OpRestart = "capbridge.server.restart"
	OpRelist  = "capbridge.server.relist"
)

// StartOp starts the span of operation name (OpBoot, OpRestart,
// OpRelist) of server, and returns ctx carrying it, so that lock drift
// found meanwhile (Drift) is its child.
func (t *Tracer) StartOp(ctx context.Context, name, server string) (context.Context, *Op) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.tr.Start(ctx, name, trace.WithAttributes(attribute.String("capbridge.server", server)))
	return ctx, &Op{span: span}
}

// End ends the operation's span: tools is how many tools the server
// serves after it; failure, when not "", says why it failed, and must be
// redacted of the server's secrets by the caller.
func (o *Op) End(tools int, failure string) {
	if o == nil {
		return
	}
	if failure != "" {
		o.span.SetStatus(codes.Error, failure)
	} else {
		o.span.SetAttributes(attribute.Int("capbridge.tools", tools))
	}
	o.span.End()
}

// Drift records that tool of server differs from the lock (classes,
// such as "description,input_schema") and what was done (action), as a
// span under the operation in ctx. ctx without a span (traces off, or
// StartOp not called) records nothing.
func Drift(ctx context.Context, server, tool, classes, action string) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	_, span := parent.TracerProvider().Tracer("github.com/capbridge/capbridge").Start(ctx, "capbridge.server.lock_drift", trace.WithAttributes(
		attribute.String("capbridge.server", server),
		attribute.String("capbridge.tool", tool),
		attribute.String("capbridge.drift", classes),
		attribute.String("capbridge.action", action),
	))
	span.End()
}
