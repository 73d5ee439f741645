package codegen

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
// array of tools. It is total: hostile bytes give a *ListingError.
//
// Strict envelope, tolerant content: a tool that is not an object, has no
// non-empty string name, or has no inputSchema fails the whole listing (a
// server lying about one tool is not one to half-trust); a title or
// description of the wrong type, or a non-boolean hint, is ignored.
func ParseListing(data []byte) ([]Tool, error) {
	if len(data) > MaxListingBytes {
		return nil, &ListingError{-1, fmt.Sprintf("%d bytes is over the %d-byte limit", len(data), MaxListingBytes)}
	}
	data = bytes.TrimSpace(data)
	var entries []json.RawMessage
	switch {
	case len(data) > 0 && data[0] == '[':
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, &ListingError{-1, "not a JSON array of tools: " + clip(err.Error(), 120)}
		}
	case len(data) > 0 && data[0] == '{':
		var res struct {
			Tools *[]json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, &ListingError{-1, "not a tools/list result: " + clip(err.Error(), 120)}
		}
		if res.Tools == nil {
			return nil, &ListingError{-1, `object has no "tools" array`}
		}
		entries = *res.Tools
	default:
		return nil, &ListingError{-1, `want {"tools":[…]} or a JSON array`}
	}
	if len(entries) > MaxTools {
		return nil, &ListingError{-1, fmt.Sprintf("%d tools is over the limit of %d", len(entries), MaxTools)}
	}
	tools := make([]Tool, 0, len(entries))
	for i, raw := range entries {
		t, reason := parseTool(raw)
		if reason != "" {
			return nil, &ListingError{i, reason}
		}
		tools = append(tools, t)
	}
	return tools, nil
}

func parseTool(raw json.RawMessage) (Tool, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return Tool{}, "not a JSON object"
	}
	var t Tool
	if err := json.Unmarshal(m["name"], &t.Name); err != nil || t.Name == "" {
		return Tool{}, `no non-empty string "name"`
	}
	schema, ok := m["inputSchema"]
	if !ok || string(schema) == "null" {
		return Tool{}, fmt.Sprintf("tool %q has no inputSchema", clip(t.Name, 60))
	}
	t.InputSchema = schema
	if out, ok := m["outputSchema"]; ok && string(out) != "null" {
		t.OutputSchema = out
	}
	t.Description = optString(m["description"])
	var ann map[string]json.RawMessage
	if json.Unmarshal(m["annotations"], &ann) != nil {
		ann = nil
	}
	t.Title = optString(m["title"])
	if t.Title == "" {
		t.Title = optString(ann["title"])
	}
	t.Hints = Hints{
		ReadOnly:    optBool(ann["readOnlyHint"]),
		Destructive: optBool(ann["destructiveHint"]),
		Idempotent:  optBool(ann["idempotentHint"]),
		OpenWorld:   optBool(ann["openWorldHint"]),
	}
	return t, ""
}

func optString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func optBool(raw json.RawMessage) *bool {
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return nil
	}
	return &b
}

// listingDigest is the hex SHA-256 of the canonical form of tools: for every
// tool in order, each field as an 8-byte big-endian length and its bytes
// (name, title, description, input schema, output schema — schemas
// compacted when they are valid JSON, raw otherwise — then one byte per hint:
// 0 absent, 1 false, 2 true). Framing by length makes the form unambiguous;
// compaction makes it independent of whitespace but not of member order,
// which the generated parameter order depends on.
func listingDigest(tools []Tool) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var buf bytes.Buffer
	compact := func(raw json.RawMessage) []byte {
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
		h.Write([]byte{hint(t.Hints.ReadOnly), hint(t.Hints.Destructive), hint(t.Hints.Idempotent), hint(t.Hints.OpenWorld)})
	}
	return hex.EncodeToString(h.Sum(nil))
}
