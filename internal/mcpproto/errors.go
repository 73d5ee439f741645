package mcpproto

import (
	"errors"
	"strconv"
)

// ErrProtocol: the server broke the stdio framing, the JSON-RPC envelope
// or the MCP schema. Every *MessageFault, *ProtocolFault and
// *FramingFault matches it; mcpwire.ErrProtocol is this value.
var ErrProtocol = errors.New("mcpwire: protocol violation")

// MessageFault is a JSON-RPC envelope that could not be decoded: invalid
// JSON, wrong "jsonrpc", a null or fractional id, both or neither of
// "result"/"error", and so on. Offset is the byte offset in the line.
type MessageFault struct {
	Offset int
	Reason string
	// JSON reports whether the line was syntactically valid JSON (an
	// envelope fault) rather than not JSON at all (stray output).
	JSON bool
}

func (e *MessageFault) Error() string {
	return "mcpwire: bad JSON-RPC message at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// Is makes every MessageFault match ErrProtocol.
func (e *MessageFault) Is(target error) bool { return target == ErrProtocol }

// ProtocolFault is an MCP result that does not fit its schema. Path is
// an RFC 6901 JSON Pointer into the result ("/tools/3/name"); Index is
// the offending list position where the fault is about one entry of a
// list (tools, content), else -1.
type ProtocolFault struct {
	What   string // which result: "initialize", "tools/list", "tools/call"
	Path   string
	Index  int
	Reason string
}

func (e *ProtocolFault) Error() string {
	return "mcpwire: bad " + e.What + " result at " + strconv.Quote(e.Path) + ": " + e.Reason
}

// Is makes every ProtocolFault match ErrProtocol.
func (e *ProtocolFault) Is(target error) bool { return target == ErrProtocol }

// FramingFault is one stdout line that breaks the stdio rule: longer
// than the cap, or holding bytes that are not UTF-8. It costs that line
// (and the call it answers, when its id can be read), never the stream.
type FramingFault struct {
	Kind   FramingKind
	Limit  int // the line cap, for LineTooLong
	Offset int // bytes into the line: the first bad byte, or the cap for LineTooLong
	Length int // for LineTooLong, the line's bytes before its '\n' (a '\r' included)
}

// FramingKind classifies a FramingFault.
type FramingKind uint8

const (
	// LineTooLong: a line exceeded the cap.
	LineTooLong FramingKind = iota + 1
	// InvalidUTF8: a line held bytes that are not UTF-8.
	InvalidUTF8
)

func (e *FramingFault) Error() string {
	if e.Kind == LineTooLong {
		return "mcpwire: stdout line of " + strconv.Itoa(e.Length) + " bytes is longer than " + strconv.Itoa(e.Limit)
	}
	return "mcpwire: invalid UTF-8 on stdout at byte " + strconv.Itoa(e.Offset) + " of a line"
}

// Is makes every FramingFault match ErrProtocol: the server broke the
// stdio rule that every line is one UTF-8 JSON-RPC message.
func (e *FramingFault) Is(target error) bool { return target == ErrProtocol }

// RPCError is a JSON-RPC error response from the server: a protocol
// failure of one request, not of the connection. Data is raw JSON (nil
// when absent).
type RPCError struct {
	Code    int64
	Message string
	Data    []byte
}

func (e *RPCError) Error() string {
	return "mcpwire: server error " + strconv.FormatInt(e.Code, 10) + ": " + e.Message
}

// Is matches another *RPCError with the same code, so callers can test
// errors.Is(err, &mcpwire.RPCError{Code: -32602}).
func (e *RPCError) Is(target error) bool {
	t, ok := target.(*RPCError)
	return ok && t.Code == e.Code
}
