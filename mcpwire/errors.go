package mcpwire

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinels for the conditions callers branch on. Every error this
// package returns for one of them satisfies errors.Is against it.
var (
	// ErrDead: the client is dead (framing fault, write failure, server
	// exit, too much noise, or Close). Returned wrapped in a *DeadError
	// that carries the reason and the tail of the server's stderr.
	ErrDead = errors.New("mcpwire: server connection is dead")
	// ErrClosed is the death reason after the owner called Close.
	ErrClosed = errors.New("mcpwire: client closed")
	// ErrTimeout: a call's idle or maximum timeout expired (the caller's
	// own context deadline yields context.DeadlineExceeded instead).
	ErrTimeout = errors.New("mcpwire: call timed out")
	// ErrProtocol: the server broke the JSON-RPC envelope or the MCP
	// schema. Every *MessageFault and *ProtocolFault matches it.
	ErrProtocol = errors.New("mcpwire: protocol violation")
	// ErrVersion: the server negotiated a protocol revision this client
	// does not speak (a *VersionError names both sides).
	ErrVersion = errors.New("mcpwire: unsupported protocol version")
	// ErrBusy: the per-client bound on calls in flight is reached.
	ErrBusy = errors.New("mcpwire: too many calls in flight")
	// ErrInvalidArgument: the caller's own input cannot be sent
	// (arguments not a JSON object, a name that is not valid UTF-8).
	ErrInvalidArgument = errors.New("mcpwire: invalid argument")
	// ErrTooManyPages: tools/list did not end within the page bound, or
	// repeated a cursor.
	ErrTooManyPages = errors.New("mcpwire: tools/list pagination did not end")
	// ErrTooManyTools: tools/list named more tools than the bound.
	ErrTooManyTools = errors.New("mcpwire: too many tools")
	// ErrUnconfirmed: shutdown could not observe the server's exit within
	// its bounded waits (see Exit).
	ErrUnconfirmed = errors.New("mcpwire: server exit not confirmed")
	// ErrNoise: the server wrote more non-JSON-RPC lines (or bytes) to
	// stdout than the configured bound; it is declared dead.
	ErrNoise = errors.New("mcpwire: too much noise on server stdout")
)

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

// FramingFault is a broken stdout stream: a line over the cap or bytes
// that are not UTF-8. It is always fatal to the connection.
type FramingFault struct {
	Kind   FramingKind
	Limit  int // the line cap, for LineTooLong
	Offset int // bytes into the offending line
}

// FramingKind classifies a FramingFault.
type FramingKind uint8

const (
	// LineTooLong: a complete or still pending line exceeded the cap.
	LineTooLong FramingKind = iota + 1
	// InvalidUTF8: a line held bytes that are not UTF-8.
	InvalidUTF8
)

func (e *FramingFault) Error() string {
	if e.Kind == LineTooLong {
		return "mcpwire: stdout line longer than " + strconv.Itoa(e.Limit) + " bytes"
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

// VersionError refuses a negotiated protocol revision outside
// SupportedVersions, naming what we asked for and what we were offered.
type VersionError struct {
	Requested, Offered string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("mcpwire: server chose protocol version %q; requested %q, supported %v", e.Offered, e.Requested, SupportedVersions)
}

// Is makes every VersionError match ErrVersion.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

// DeadError is returned by every call that was in flight when the client
// died, and by every call after that. It matches ErrDead and its Reason.
type DeadError struct {
	Reason error
	// Stderr is the tail of the server's stderr at the time of death
	// (bounded by Config.StderrTailBytes; may be empty).
	Stderr []byte
}

func (e *DeadError) Error() string {
	s := "mcpwire: server connection is dead: " + e.Reason.Error()
	if len(e.Stderr) > 0 {
		s += "; stderr tail: " + strconv.Quote(string(e.Stderr))
	}
	return s
}

// Unwrap exposes ErrDead and the reason to errors.Is / errors.As.
func (e *DeadError) Unwrap() []error { return []error{ErrDead, e.Reason} }
