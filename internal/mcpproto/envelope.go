package mcpproto

import (
	"bytes"
	"strconv"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// Kind classifies an inbound JSON-RPC message the way JSON-RPC does.
type Kind uint8

const (
	// KindResponse: no "method"; carries "result" or "error" for an id
	// we minted.
	KindResponse Kind = iota + 1
	// KindRequest: a "method" and an "id": the server asks us something.
	KindRequest
	// KindNotification: a "method" and no "id".
	KindNotification
)

// ID is a JSON-RPC request id as it appeared on the wire. We mint
// integers; a peer may use strings for its own requests. Raw is the
// exact JSON token (echoed verbatim in our responses).
type ID struct {
	Raw []byte
	// Int is the value of an integer id that fits int64; IsInt says
	// whether Int is meaningful. A string id never equals an integer
	// id, even "5" and 5.
	Int   int64
	IsInt bool
}

// Message is one decoded inbound JSON-RPC message. Every []byte field,
// and Result, aliases the decoded line: copy (Result.Clone) what must
// outlive it.
type Message struct {
	Kind   Kind
	ID     ID     // requests and responses; also set on a fault if readable
	HasID  bool   // whether ID was read (possibly on a faulty envelope)
	Method []byte // requests and notifications
	Params []byte // raw; nil when absent
	// Result is the response's result, validated (UTF-8 included) by
	// the same pass that read the envelope, so a result decoder given it
	// does not check it again; zero when absent.
	Result jsonlex.Value
	Error  *RPCError
}

func (m *Message) reset() {
	*m = Message{}
}

// DecodeMessage decodes one JSON-RPC message from a single line into m,
// reusing m. It is total: any input yields either a classified message
// or a *MessageFault. Unknown members are ignored; params, result and
// error data stay raw. Rules, from JSON-RPC 2.0 and the MCP base
// protocol: "jsonrpc" must be exactly "2.0"; an id must be a string or
// an integer (never null, never fractional); a response has exactly one
// of "result" and "error"; duplicate envelope members are refused. A
// line that is not JSON, or whose strings are not UTF-8, is a fault
// with JSON unset.
//
// The line is read in one pass that validates it and hands out the
// envelope members as it goes; a fault of the envelope itself counts
// only once the whole line has proved to be JSON, so the verdict is the
// same as validating first.
//
// On a fault the id is still reported in m (HasID) when it was read
// from a line that is JSON, so a client can fail the one call a broken
// response was meant for.
func DecodeMessage(line []byte, m *Message) error {
	m.reset()
	start := jsonlex.SkipSpace(line, 0)
	if start < len(line) && line[start] != '{' {
		if _, _, _, serr := jsonlex.Valid(line, jsonlex.CheckUTF8); serr != nil {
			return &MessageFault{Offset: serr.Offset, Reason: serr.Reason}
		}
		return &MessageFault{Offset: start, Reason: "message is not a JSON object", JSON: true}
	}
	d := envelope{m: m, start: start}
	end, serr := jsonlex.ScanObject(line, start, 0, 0, d.member)
	if serr == nil {
		if rest := jsonlex.SkipSpace(line, end); rest != len(line) {
			serr = &jsonlex.Fault{Kind: jsonlex.FaultTrailing, Offset: rest, Reason: "trailing data after JSON value"}
		}
	}
	if serr != nil {
		m.reset()
		return &MessageFault{Offset: serr.Offset, Reason: serr.Reason}
	}
	return d.finish()
}

// envelope member bits, for duplicate detection.
const (
	seenJSONRPC = 1 << iota
	seenID
	seenMethod
	seenParams
	seenResult
	seenError
)

// envelope is DecodeMessage's state while the line's members come in.
type envelope struct {
	m         *Message
	start     int
	seen      int
	versionOK bool
	fault     *MessageFault
}

// member takes one top-level member; it asks for no more once the
// envelope is at fault (the scan still validates the rest of the line).
func (d *envelope) member(key []byte, v jsonlex.Value, off int) bool {
	m, val := d.m, v.Bytes()
	bit, name := memberBit(key)
	if bit == 0 {
		return true
	}
	if d.seen&bit != 0 {
		d.fault = &MessageFault{Offset: off, Reason: "duplicate member " + strconv.Quote(name), JSON: true}
		return false
	}
	d.seen |= bit
	switch bit {
	case seenJSONRPC:
		d.versionOK = string(val) == `"2.0"`
	case seenID:
		id, reason := decodeID(val)
		if reason != "" {
			d.fault = &MessageFault{Offset: off, Reason: reason, JSON: true}
			return false
		}
		m.ID, m.HasID = id, true
	case seenMethod:
		if val[0] != '"' {
			d.fault = &MessageFault{Offset: off, Reason: `"method" is not a string`, JSON: true}
			return false
		}
		m.Method = val[1 : len(val)-1]
		if bytes.IndexByte(m.Method, '\\') >= 0 {
			m.Method = jsonlex.AppendUnescaped(nil, m.Method)
		}
	case seenParams:
		m.Params = val
	case seenResult:
		m.Result = v
	case seenError:
		e, reason := decodeRPCError(val)
		if reason != "" {
			d.fault = &MessageFault{Offset: off, Reason: reason, JSON: true}
			return false
		}
		m.Error = e
	}
	return true
}

// finish classifies a message whose line is JSON.
func (d *envelope) finish() error {
	m, start, seen := d.m, d.start, d.seen
	if d.fault != nil {
		return d.fault
	}
	if !d.versionOK {
		return &MessageFault{Offset: start, Reason: `"jsonrpc" is not "2.0"`, JSON: true}
	}
	switch {
	case seen&seenMethod != 0:
		if seen&(seenResult|seenError) != 0 {
			return &MessageFault{Offset: start, Reason: `request carries "result" or "error"`, JSON: true}
		}
		if m.Params != nil && m.Params[0] != '{' && m.Params[0] != '[' {
			return &MessageFault{Offset: start, Reason: `"params" is neither object nor array`, JSON: true}
		}
		if m.HasID {
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
	case !m.HasID:
		return &MessageFault{Offset: start, Reason: `response without "id"`, JSON: true}
	case seen&seenResult != 0 && seen&seenError != 0:
		return &MessageFault{Offset: start, Reason: `response carries both "result" and "error"`, JSON: true}
	case seen&(seenResult|seenError) == 0:
		return &MessageFault{Offset: start, Reason: `response carries neither "result" nor "error"`, JSON: true}
	default:
		m.Kind = KindResponse
	}
	return nil
}

func memberBit(key []byte) (int, string) {
	for _, k := range [...]struct {
		bit  int
		name string
	}{{seenJSONRPC, "jsonrpc"}, {seenID, "id"}, {seenMethod, "method"}, {seenParams, "params"}, {seenResult, "result"}, {seenError, "error"}} {
		if jsonlex.KeyIs(key, k.name) {
			return k.bit, k.name
		}
	}
	return 0, ""
}

// decodeID reads a validated JSON value as a request id.
func decodeID(val []byte) (ID, string) {
	switch c := val[0]; {
	case c == '"':
		return ID{Raw: val}, ""
	case c == '-' || (c >= '0' && c <= '9'):
		num, _ := jsonlex.ScanNumber(val, 0)
		if num.Float {
			return ID{}, "id is not an integer"
		}
		// An integer id beyond int64 is still a valid id; it just can
		// never be one we minted.
		n, ok := num.Int64()
		return ID{Raw: val, Int: n, IsInt: ok}, ""
	case c == 'n':
		return ID{}, "id is null"
	}
	return ID{}, "id is neither string nor integer"
}

// decodeRPCError reads a JSON-RPC error object strictly: integer "code",
// string "message", optional raw "data".
func decodeRPCError(val []byte) (*RPCError, string) {
	if len(val) == 0 || val[0] != '{' {
		return nil, `"error" is not an object`
	}
	e := &RPCError{}
	var haveCode, haveMsg bool
	var reason string
	_ = jsonlex.EachMember(val, func(key, v []byte) error {
		switch {
		case jsonlex.KeyIs(key, "code"):
			if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
				reason = "error code is not a number"
				return errStop
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				reason = "error code is not an integer"
				return errStop
			}
			e.Code, haveCode = n, true
		case jsonlex.KeyIs(key, "message"):
			if v[0] != '"' {
				reason = "error message is not a string"
				return errStop
			}
			e.Message, haveMsg = jsonlex.Unquote(v), true
		case jsonlex.KeyIs(key, "data"):
			e.Data = v
		}
		return nil
	})
	switch {
	case reason != "":
		return nil, reason
	case !haveCode:
		return nil, "error without code"
	case !haveMsg:
		return nil, "error without message"
	}
	return e, ""
}

// errStop ends a jsonlex.EachMember walk early; the walker's caller holds the
// real reason.
var errStop = &MessageFault{Reason: "stop"}

// SplitBatch splits a JSON-RPC batch line (a JSON array, accepted only
// when protocol revision 2025-03-26 is negotiated, which requires
// receivers to support batches) into its element spans. An empty batch
// or a non-object element is a fault.
func SplitBatch(line []byte) ([][]byte, error) {
	start, _, _, serr := jsonlex.Valid(line, 0)
	if serr != nil {
		return nil, &MessageFault{Offset: serr.Offset, Reason: serr.Reason}
	}
	if line[start] != '[' {
		return nil, &MessageFault{Offset: start, Reason: "batch is not a JSON array", JSON: true}
	}
	var elems [][]byte
	var fault error
	_ = jsonlex.EachElement(line[start:], func(i int, v []byte) error {
		if v[0] != '{' {
			fault = &MessageFault{Offset: start, Reason: "batch element " + strconv.Itoa(i) + " is not an object", JSON: true}
			return fault
		}
		elems = append(elems, v)
		return nil
	})
	if fault != nil {
		return nil, fault
	}
	if len(elems) == 0 {
		return nil, &MessageFault{Offset: start, Reason: "empty batch", JSON: true}
	}
	return elems, nil
}
