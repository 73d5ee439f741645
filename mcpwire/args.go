package mcpwire

import (
	"github.com/capbridge/capbridge/interchange"
)

// Args is the arguments object of a tools/call together with where its
// bytes came from, which decides whether they are checked before they
// are sent: JSON from any source is validated and compacted; JSON that
// interchange has just written from MessagePack is valid, compact,
// single-line UTF-8 by construction and is sent as it is. The two are
// told apart by how the Args was made, never by a flag a caller sets:
// only ConvertArgs, which runs the converter itself, makes the second
// kind. The zero Args sends no arguments.
type Args struct {
	json []byte
	// converted: written by interchange in ConvertArgs, and so one
	// compact JSON object known valid; sent unchecked.
	converted bool
}

// JSONArgs returns args given as raw JSON from any source: nil, empty or
// null sends none; anything else must be one JSON object, and is
// validated (UTF-8 included) and compacted when the call is sent.
func JSONArgs(json []byte) Args { return Args{json: json} }

// ConvertArgs converts the MessagePack map msgpack into the arguments
// object, appending its JSON to dst with interchange.AppendJSON. What
// the converter writes needs no second check, so CallTool sends it
// unchecked; the returned Args aliases the appended bytes, which must not
// be modified until the call has been sent. A value that is not a map,
// or that cannot be converted, is an error (an *interchange.Fault for
// the latter).
func ConvertArgs(dst, msgpack []byte) (Args, error) {
	start := len(dst)
	out, err := interchange.AppendJSON(dst, msgpack)
	if err != nil {
		return Args{}, err
	}
	if len(out) == start || out[start] != '{' {
		return Args{}, errInvalid("arguments are not a map")
	}
	return Args{json: out[start:], converted: true}, nil
}

// JSON returns the arguments' JSON text as given (for ConvertArgs, what
// is sent). The caller must not modify it.
func (a Args) JSON() []byte { return a.json }
