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
)

// VersionError refuses a negotiated protocol revision outside the ones
// this client speaks, naming what we asked for and what we were offered.
type VersionError struct {
	Requested, Offered string
}

func (e *VersionError) Error() string {
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
