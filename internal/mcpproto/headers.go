package mcpproto

import (
	"encoding/json"
	"strconv"
	"strings"
)

// HeaderFault reports why t's x-mcp-header declarations (2026-07-28:
// a top-level property of the input schema mirrored into an
// Mcp-Param-{name} HTTP header) are invalid, or "" when they are valid or
// absent. A value must be a non-empty string of visible ASCII other than
// ':', unique among the tool's declarations case-insensitively, on a
// property whose type is one primitive (string, number, integer,
// boolean). A tool with an invalid declaration cannot be called as the
// revision requires, so it is not served.
func (t Tool) HeaderFault() string {
	if !strings.Contains(string(t.InputSchema), "x-mcp-header") {
		return "" // the common case, without decoding the schema
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(t.InputSchema, &s) != nil {
		return ""
	}
	seen := map[string]string{}
	for name, raw := range s.Properties {
		var p map[string]json.RawMessage
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		h, ok := p["x-mcp-header"]
		if !ok {
			continue
		}
		var v string
		if json.Unmarshal(h, &v) != nil || v == "" {
			return "property " + strconv.Quote(name) + ": x-mcp-header is not a non-empty string"
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= ' ' || c >= 0x7f || c == ':' {
				return "property " + strconv.Quote(name) + ": x-mcp-header " + strconv.QuoteToASCII(v) + " is not visible ASCII without ':'"
			}
		}
		if other, dup := seen[strings.ToLower(v)]; dup {
			return "properties " + strconv.Quote(other) + " and " + strconv.Quote(name) + " declare the same x-mcp-header " + strconv.Quote(v)
		}
		seen[strings.ToLower(v)] = name
		var typ string
		if json.Unmarshal(p["type"], &typ) != nil || typ != "string" && typ != "number" && typ != "integer" && typ != "boolean" {
			return "property " + strconv.Quote(name) + ": x-mcp-header on a value that is not one primitive type"
		}
	}
	return ""
}
