package mcpwire

import (
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/w3ctrace"
)

// Outgoing lines are built by appending bytes: no reflection, no
// intermediate values. Every function here emits compact single-line
// JSON followed by exactly one '\n' (the stdio transport rule: "Messages
// are delimited by newlines, and MUST NOT contain embedded newlines").
// Strings go through appendQuoted and raw JSON through appendCompact or
// is produced by this package, so no raw newline can slip in.

const jsonrpcHead = `{"jsonrpc":"2.0",`

// appendRequest appends a request whose params are JSON produced by this
// package (already compact); params may be nil.
func appendRequest(dst []byte, id int64, method string, params []byte) []byte {
	dst = append(dst, jsonrpcHead...)
	dst = append(dst, `"id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = jsonlex.AppendQuoted(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}', '\n')
}

// appendNotification appends a notification; params as for appendRequest.
func appendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, jsonrpcHead...)
	dst = append(dst, `"method":`...)
	dst = jsonlex.AppendQuoted(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}', '\n')
}

// appendCallTool appends a tools/call request. The id doubles as the
// progress token, which the spec requires to be unique across active
// requests; ids are never reused, so it is. Raw JSON args (JSONArgs):
// empty or "null" omits "arguments", anything else must be one JSON
// object and is validated and compacted here; converted args
// (ConvertArgs) are one compact object already and are copied as they
// are. meta, when not nil, is more _meta members (the modern era's
// reserved keys) rendered without braces. traceparent, when not "", is
// added to _meta; it must have a version-00 traceparent's shape (W3C
// Trace Context §3.2), which leaves nothing to escape.
func appendCallTool(dst []byte, id int64, name string, a Args, meta, task []byte, traceparent string) ([]byte, error) {
	if name == "" || !utf8.ValidString(name) {
		return dst, errInvalid("tool name must be non-empty UTF-8")
	}
	if traceparent != "" && !w3ctrace.Shape(traceparent) {
		return dst, errInvalid("traceparent is not a version-00 traceparent")
	}
	var span []byte
	var ws bool
	switch args := a.json; {
	case a.converted:
		span = args
	case len(args) > 0:
		start, end, w, serr := jsonlex.Valid(args, jsonlex.CheckUTF8)
		if serr != nil {
			if serr.Kind == jsonlex.FaultInvalidUTF8 {
				return dst, errInvalid("arguments are not valid UTF-8")
			}
			return dst, errInvalid("arguments are not valid JSON at byte " + strconv.Itoa(serr.Offset) + ": " + serr.Reason)
		}
		switch args[start] {
		case '{':
			span, ws = args[start:end], w
		case 'n':
		default:
			return dst, errInvalid("arguments are not a JSON object")
		}
	}
	dst = append(dst, jsonrpcHead...)
	dst = append(dst, `"id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":"tools/call","params":{"_meta":{"progressToken":`...)
	dst = strconv.AppendInt(dst, id, 10)
	if meta != nil {
		dst = append(dst, ',')
		dst = append(dst, meta...)
	}
	if traceparent != "" {
		dst = append(dst, `,"traceparent":"`...)
		dst = append(dst, traceparent...)
		dst = append(dst, '"')
	}
	dst = append(dst, `},"name":`...)
	dst = jsonlex.AppendQuoted(dst, name)
	if span != nil {
		dst = append(dst, `,"arguments":`...)
		if ws {
			dst = jsonlex.AppendCompact(dst, span)
		} else {
			dst = append(dst, span...)
		}
	}
	if task != nil {
		dst = append(dst, `,"task":`...)
		dst = append(dst, task...)
	}
	return append(dst, '}', '}', '\n'), nil
}

// appendResult appends a success response echoing the peer's raw id.
func appendResult(dst, id, result []byte) []byte {
	dst = append(dst, jsonrpcHead...)
	dst = append(dst, `"id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}', '\n')
}

// appendErrorResponse appends an error response echoing the peer's id.
func appendErrorResponse(dst, id []byte, code int64, message string) []byte {
	dst = append(dst, jsonrpcHead...)
	dst = append(dst, `"id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, code, 10)
	dst = append(dst, `,"message":`...)
	dst = jsonlex.AppendQuoted(dst, message)
	return append(dst, '}', '}', '\n')
}

type invalidError string

func (e invalidError) Error() string        { return "mcpwire: invalid argument: " + string(e) }
func (e invalidError) Is(target error) bool { return target == ErrInvalidArgument }

func errInvalid(s string) error { return invalidError(s) }
