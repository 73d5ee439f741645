package telemetry

import (
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"

	"github.com/capbridge/capbridge/internal/w3ctrace"
)

// Valid reports whether tp is a valid version-00 traceparent (W3C Trace
// Context §3.2): lowercase hex fields of the right lengths, neither the
// trace id nor the parent id all zeros. It allocates nothing, so the
// call path may check a program's traceparent with traces off, to pass
// it on to the server unchanged.
func Valid(tp string) bool {
	return w3ctrace.Shape(tp) && tp[0] == '0' && tp[1] == '0' && !zeros(tp[3:35]) && !zeros(tp[36:52])
}

func zeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// Parse decodes a valid traceparent into the remote span context it
// names; ok is false for anything Valid refuses.
func Parse(tp string) (sc trace.SpanContext, ok bool) {
	if !Valid(tp) {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	// Valid checked every digit, so the decodes cannot fail.
	_, _ = hex.Decode(tid[:], []byte(tp[3:35]))
	_, _ = hex.Decode(sid[:], []byte(tp[36:52]))
	_, _ = hex.Decode(flags[:], []byte(tp[53:55]))
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true,
	}), true
}

// Format renders sc as a version-00 traceparent, "" when sc is not
// valid. Only the sampled flag is carried, as version 00 defines no
// other.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
}
