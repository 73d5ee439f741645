package mcpwire

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/capbridge/capbridge/internal/mcpproto"
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
	// ErrProtocol: the server broke the stdio framing, the JSON-RPC
	// envelope or the MCP schema. Every *ProtocolFault matches it, and so
	// does every framing and envelope fault the message layer
	// (internal/mcpproto) reports.
	ErrProtocol = mcpproto.ErrProtocol
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
	// ErrMalformed: the response line for a call could not be used (see
	// MalformedResultError); the call failed, the connection lives on.
	ErrMalformed = errors.New("mcpwire: malformed response")
)

// MalformedResultError fails the one call whose response line was
// unusable: its id was readable but the line was not (invalid JSON,
// NaN, nesting past the depth bound, bytes that are not UTF-8, a line
// over the cap, or a faulty envelope). It matches ErrMalformed and, via
// the fault it wraps, ErrProtocol.
type MalformedResultError struct {
	ID     int64  // the call's request id
	Offset int    // byte offset in the line where it went wrong
	Reason string // what was wrong, in a few words
	// Err is the fault: a *mcpproto.FramingFault or *mcpproto.MessageFault.
	Err error
}

func (e *MalformedResultError) Error() string {
	return "mcpwire: malformed response to request " + strconv.FormatInt(e.ID, 10) + " at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// Is makes every MalformedResultError match ErrMalformed.
func (e *MalformedResultError) Is(target error) bool { return target == ErrMalformed }

// Unwrap exposes the fault (and so ErrProtocol).
func (e *MalformedResultError) Unwrap() error { return e.Err }

// malformed builds the error for call id from the fault that made its
// line unusable.
func malformed(id int64, fault error) *MalformedResultError {
	e := &MalformedResultError{ID: id, Err: fault}
	var ff *mcpproto.FramingFault
	var mf *mcpproto.MessageFault
	switch {
	case errors.As(fault, &ff):
		e.Offset = ff.Offset
		if ff.Kind == mcpproto.LineTooLong {
			e.Reason = "line of " + strconv.Itoa(ff.Length) + " bytes is longer than " + strconv.Itoa(ff.Limit)
		} else {
			e.Reason = "invalid UTF-8"
		}
	case errors.As(fault, &mf):
		e.Offset, e.Reason = mf.Offset, mf.Reason
	default:
		e.Reason = fault.Error()
	}
	return e
}

// VersionError refuses a negotiated protocol revision outside the ones
// this client speaks, naming what we asked for and what we were offered.
// A modern server that speaks none of our revisions has no one offer:
// Supported then lists what it named (in its discover answer or its
// -32022 data) and Offered is empty.
type VersionError struct {
	Requested, Offered string
	Supported          []string
}

func (e *VersionError) Error() string {
	if e.Offered == "" && e.Supported != nil {
		return fmt.Sprintf("mcpwire: server supports protocol versions %q; requested %q, this client speaks %v and %s", e.Supported, e.Requested, supportedVersions, modernVersion)
	}
	return fmt.Sprintf("mcpwire: server chose protocol version %q; requested %q, supported %v", e.Offered, e.Requested, supportedVersions)
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

// RPCError is a JSON-RPC error response from the server (the bridge
// reports its code and message to the caller).
type RPCError = mcpproto.RPCError

// ProtocolFault is an MCP result that does not fit its schema (the bridge
// tells it apart from a dead server).
type ProtocolFault = mcpproto.ProtocolFault
