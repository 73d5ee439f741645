// Package w3ctrace checks the shape of W3C Trace Context traceparent
// values (W3C Trace Context §3.2), for the packages that pass one on:
// mcpwire, which writes it into a request, and telemetry, which parses it.
package w3ctrace

// Len is a version-00 traceparent's length: "00-" 32 hex "-" 16 hex "-"
// 2 hex.
const Len = 55

// Shape reports whether tp is Len bytes of lowercase hex with dashes
// where a version-00 traceparent has them: safe to write into JSON and a
// header as it is. Its version and whether its ids are zeros are the
// caller's concern. It allocates nothing.
func Shape(tp string) bool {
	if len(tp) != Len {
		return false
	}
	for i := 0; i < len(tp); i++ {
		c := tp[i]
		switch i {
		case 2, 35, 52:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
