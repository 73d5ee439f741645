package bridge

import (
	"context"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/telemetry"
)

// The call path's tracing hooks. With traces off (b.tracer nil) each is a
// pointer test: no span, no context, no allocation. What a span records
// is names, ids, codes and sizes, never argument or result values, and
// never a server's own words unredacted.

// startCallTrace starts the span of a capwire call to capability cap
// under the program's traceparent (nil when traces are off), and returns
// the traceparent its MCP request is to carry with traces off: the
// program's own, when it is valid, passed on unchanged, so a program's
// trace reaches the server through an untraced capbridge.
func (b *Bridge) startCallTrace(traceparent, cap string) (string, *telemetry.Call) {
	if b.tracer != nil {
		return "", b.tracer.StartCall(traceparent, cap)
	}
	if traceparent != "" && telemetry.Valid(traceparent) {
		return traceparent, nil
	}
	return "", nil
}

// requestTrace starts the MCP request's span when the call has one
// (span), and returns the traceparent the request carries: that span's,
// else the program's passed through (tp). It takes no pointer into the
// call's frame, so nothing there escapes to the heap with traces off.
func requestTrace(span *telemetry.Call, tp, server, tool string, t *table) string {
	if span == nil {
		return tp
	}
	return span.StartRequest(server, tool, t.client.Transport())
}

// endRequestTrace ends the MCP request's span with what the request came
// to: a denial, or a result (isError or not).
func endRequestTrace(span *telemetry.Call, d *capwire.Denied, r *capwire.Result) {
	if span == nil {
		return
	}
	failure := ""
	switch {
	case d != nil:
		failure = d.Code
	case r != nil && r.IsError:
		failure = "tool_error"
	}
	span.EndRequest(failure)
}

// endCallTrace ends the capwire call's span with the outcome the program
// was sent.
func endCallTrace(sp *telemetry.Call, g *Grant, server, tool string, o *outcome) {
	if sp == nil {
		return
	}
	out := telemetry.Outcome{Server: server, Tool: tool, Result: "ok", BytesIn: o.argBytes, BytesOut: o.resultBytes}
	if g != nil {
		out.Grant = g.ID
	}
	switch {
	case o.denial != nil:
		out.Result, out.Code = "denied", o.denial.Code
	case o.result != nil && o.result.IsError:
		out.Result = "tool_error"
	}
	sp.End(out)
}

// startOp starts the span of a server operation (telemetry.OpBoot,
// OpRestart, OpRelist), returning ctx with it for the drift found
// meanwhile.
func (s *server) startOp(ctx context.Context, name string) (context.Context, *telemetry.Op) {
	return s.opts.tracer.StartOp(ctx, name, s.cfg().Name)
}

// endOp ends a server operation's span with the table it published, or
// why it failed, redacted of the server's secrets.
func (s *server) endOp(op *telemetry.Op, t *table, err error) {
	if op == nil {
		return
	}
	if err != nil {
		op.End(0, s.redactor().Cut(withoutTail(err), 1024))
		return
	}
	op.End(len(t.tools), "")
}

// bootOp names a supervisor's boot attempt: the first is the boot, each
// after it a restart.
func bootOp(attempt int) string {
	if attempt == 0 {
		return telemetry.OpBoot
	}
	return telemetry.OpRestart
}

// relistOp names a re-listing after tools/list_changed.
const relistOp = telemetry.OpRelist
