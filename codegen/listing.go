package codegen

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/truncate"
)

// Tool is one entry of a server's tools/list result, as the generator needs
// it. Everything in it is untrusted server text. The bridge adapts its own
// protocol type to this one, so codegen does not depend on mcpwire.
type Tool struct {
	Name        string // the wire name, sent verbatim in every call
	Title       string // the tool's title, or annotations.title; may be empty
	Description string
	// InputSchema and OutputSchema are carried raw; planning reads them
	// totally. OutputSchema is nil when the tool declares none.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Hints        Hints
	// Task marks a tool the server runs only as an MCP task
	// (execution.taskSupport "required", 2025-11-25; the tasks extension
	// of 2026-07-28): the bridge follows the task, so a call waits for its
	// result however long the server works, and the surface says so.
	Task bool
}

// ToolOf is the generator's view of a tool the MCP client read: the
// bridge's live listing and ParseListing's saved one become the same
// Tool.
func ToolOf(t mcpproto.Tool) Tool {
	ct := Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Task: t.NeedsTasks()}
	if a := t.Annotations; a != nil {
		if ct.Title == "" {
			ct.Title = a.Title
		}
		ct.Hints = Hints{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint, Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint}
	}
	return ct
}

// Hints are the tool annotations of the MCP specification (2025-06-18,
// "Tool annotations"). A nil hint was absent. They are the server's claims,
// unverified; the generator only repeats them in comments.
type Hints struct {
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// ListingError reports why ParseListing refused a listing; Index is the
// tool's position, or -1 for the listing as a whole.
type ListingError struct {
	Index  int
	Reason string
}

func (e *ListingError) Error() string {
	if e.Index < 0 {
		return "codegen: listing: " + e.Reason
	}
	return fmt.Sprintf("codegen: listing: tool %d: %s", e.Index, e.Reason)
}

// Is makes every ListingError match ErrBadListing.
func (e *ListingError) Is(target error) bool { return target == ErrBadListing }

// ParseListing reads a saved tools/list result: either the result object
// {"tools":[…]} (other members such as nextCursor are ignored) or a bare
// array of tools. It is total: hostile bytes give a *ListingError, whose
// Index names the offending tool.
//
// It reads a listing by the very rules the bridge's MCP client reads a
// live server's (internal/mcpproto), and each tool as the bridge does
// (ToolOf): a listing is refused here exactly when the bridge would
// refuse it from the server, so every function generated from a listing
// is one the bridge serves, as the bridge describes it.
func ParseListing(data []byte) ([]Tool, error) {
	if len(data) > MaxListingBytes {
		return nil, &ListingError{-1, fmt.Sprintf("%d bytes is over the %d-byte limit", len(data), MaxListingBytes)}
	}
	listed, err := mcpproto.DecodeToolList(data)
	if err != nil {
		var pf *mcpproto.ProtocolFault
		if !errors.As(err, &pf) {
			return nil, &ListingError{-1, err.Error()}
		}
		reason := pf.Reason
		if pf.Path != "" {
			reason += " at " + strconv.Quote(pf.Path)
		}
		return nil, &ListingError{pf.Index, truncate.Ellipsis(reason, 200)}
	}
	if len(listed) > MaxTools {
		return nil, &ListingError{-1, fmt.Sprintf("%d tools is over the limit of %d", len(listed), MaxTools)}
	}
	tools := make([]Tool, 0, len(listed))
	for _, t := range listed {
		tools = append(tools, ToolOf(t))
	}
	return tools, nil
}

// listingDigest is the hex SHA-256 of the canonical form of tools: for every
// tool in order, each field as an 8-byte big-endian length and its bytes
// (name, title, description, input schema, output schema — schemas
// compacted when they are valid JSON, raw otherwise — then one byte per
// hint: 0 absent, 1 false, 2 true; then one byte, 1 when it runs as a
// task). Framing by length makes the form unambiguous; compaction makes
// it independent of whitespace but not of member order, which the
// generated parameter order depends on.
func listingDigest(tools []Tool) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var buf bytes.Buffer
	var lex []byte
	compact := func(raw json.RawMessage) []byte {
		// jsonlex reads as encoding/json does, and most schemas come
		// compact already: those are hashed as they are. One it refuses
		// (nested past its bound, or not JSON) goes to json.Compact,
		// which decides, as it always did.
		if start, end, ws, f := jsonlex.Valid(raw, 0); f == nil {
			if !ws && start == 0 && end == len(raw) {
				return raw
			}
			lex = jsonlex.AppendCompact(lex[:0], raw[start:end])
			return lex
		}
		buf.Reset()
		if json.Compact(&buf, raw) != nil {
			return raw
		}
		return buf.Bytes()
	}
	hint := func(p *bool) byte {
		switch {
		case p == nil:
			return 0
		case *p:
			return 2
		}
		return 1
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(tools)))
	h.Write(n[:])
	for _, t := range tools {
		field([]byte(t.Name))
		field([]byte(t.Title))
		field([]byte(t.Description))
		field(compact(t.InputSchema))
		field(compact(t.OutputSchema))
		var task byte
		if t.Task {
			task = 1
		}
		h.Write([]byte{hint(t.Hints.ReadOnly), hint(t.Hints.Destructive), hint(t.Hints.Idempotent), hint(t.Hints.OpenWorld), task})
	}
	return hex.EncodeToString(h.Sum(nil))
}
