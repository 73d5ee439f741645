package capwire

import (
	"errors"
	"strconv"
	"strings"
)

// ErrClosed is wrapped by every error a Client returns once its connection
// is closed or broken: by Close, by the peer hanging up, by a fatal frame or
// by a failed write. errors.Is(err, ErrClosed) tells "the connection is
// gone; dial again" from a per-call denial.
var ErrClosed = errors.New("capwire: connection closed")

// WireError is a fault found while reading a frame or decoding an envelope;
// the bridge's server turns it into a denial or a fatal frame.
// Fatal says whether the connection must end: framing faults (bad_frame,
// frame_too_large) and hello faults (bad_hello) are fatal; a malformed call
// is a bad_request that the peer is told about with a denial naming ID, and
// the connection lives on (docs/capwire.md, "Faults").
type WireError struct {
	Code   string // a code from codes.go: bad_frame, frame_too_large, bad_hello or bad_request
	Fatal  bool   // the connection cannot continue
	Path   string // RFC 6901 pointer into the envelope ("/args", "/content/2/text"); "" for the frame
	Offset int    // byte offset in the frame payload where the fault was found; -1 if unknown
	Type   string // the envelope's "t" when it was a valid string, else ""
	ID     uint64 // the call id, when HasID
	HasID  bool   // the frame carried a usable id, so a denial can name the call
	Msg    string // what is wrong, for people
	Err    error  // an underlying cause (io.ErrUnexpectedEOF for a truncated frame), or nil
}

func (e *WireError) Error() string {
	var b strings.Builder
	b.WriteString("capwire: ")
	b.WriteString(e.Code)
	if e.Path != "" {
		b.WriteString(" at ")
		b.WriteString(e.Path)
	}
	if e.Offset >= 0 {
		b.WriteString(" (offset ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(")")
	}
	if e.HasID {
		b.WriteString(" in call ")
		b.WriteString(strconv.FormatUint(e.ID, 10))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *WireError) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel (or another code-carrying
// error) for e.Code, so errors.Is(err, ErrBadFrame) works.
func (e *WireError) Is(target error) bool { return isCode(e.Code, target) }

// Denial is the `denied` frame that answers the faulty call e describes:
// code bad_request, e's message and path, and e's id when it had one. The
// bridge sends it for a non-fatal fault.
func (e *WireError) Denial() *DeniedMsg {
	return &DeniedMsg{ID: e.ID, NoID: !e.HasID, Denial: Denied{Code: CodeBadRequest, Message: e.Msg, Path: e.Path}}
}

// Denied is a call that capbridge refused or could not complete: the
// content of a `denied` frame, returned by Client.Call as the error.
// errors.Is(err, ErrTimeout) etc. compare Code; errors.As(err, &d) with
// d *Denied gives the details.
type Denied struct {
	Code    string // one of the denial codes in codes.go (an unknown code from a newer peer is carried as is)
	Message string // for people; never parse it
	Path    string // RFC 6901 pointer into args (bad_arguments) or into the result (result_malformed), or ""
	RPCCode int    // the MCP server's JSON-RPC error code, for server_error
	// Quota names the quota a quota_exceeded denial hit, as
	// "[scope:]kind": "rate", "github:calls", "github/create_issue:bytes_out".
	Quota string
	// RetryMS is, for a quota_exceeded denial of a rate, the milliseconds
	// until the next call is allowed; 0 when the quota is a total that
	// does not refill for the grant.
	RetryMS uint64
}

func (d *Denied) Error() string {
	s := "capwire: denied: " + d.Code
	if d.Path != "" {
		s += " at " + d.Path
	}
	if d.Code == CodeServerError {
		s += " (rpc code " + strconv.Itoa(d.RPCCode) + ")"
	}
	if d.Quota != "" {
		s += " (quota " + d.Quota
		if d.RetryMS > 0 {
			s += ", retry in " + strconv.FormatUint(d.RetryMS, 10) + " ms"
		}
		s += ")"
	}
	if d.Message != "" {
		s += ": " + d.Message
	}
	return s
}

// Is compares Code with target's code (a sentinel such as ErrTimeout or
// another code-carrying error).
func (d *Denied) Is(target error) bool { return isCode(d.Code, target) }
