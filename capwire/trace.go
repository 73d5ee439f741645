package capwire

import "context"

// traceparentKey is the context key WithTraceparent stores under.
type traceparentKey struct{}

// WithTraceparent returns a context whose calls carry traceparent, the
// W3C trace context of the program's span making them
// ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>",
// https://www.w3.org/TR/trace-context/#traceparent-header): capbridge's
// span for each call is then that span's child, and the MCP server's
// request carries capbridge's span as _meta.traceparent
// (docs/capwire.md, "call"). A program instrumented with OpenTelemetry
// passes its current span's context; capwire itself depends on no
// tracing library. "" removes a traceparent set further up.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, traceparent)
}

// traceparentOf is the traceparent WithTraceparent put in ctx, or "".
func traceparentOf(ctx context.Context) string {
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return tp
}
