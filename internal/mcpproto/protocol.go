package mcpproto

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/jsonlex"
)

// Implementation is the serverInfo of an initialize result.
type Implementation struct {
	Name, Version, Title string
}

// InitializeResult is the decoded answer to initialize. Capabilities is
// the raw capabilities object; ToolsListChanged is read out of it.
type InitializeResult struct {
	ProtocolVersion  string
	Capabilities     []byte
	HasTools         bool // capabilities.tools present
	ToolsListChanged bool // capabilities.tools.listChanged
	ServerInfo       Implementation
	Instructions     string
}

// ToolAnnotations are a tool's behaviour hints (2025-03-26+). They are
// untrusted hints; a nil pointer means the hint is absent and its
// spec default applies.
type ToolAnnotations struct {
	Title           string
	ReadOnlyHint    *bool
	DestructiveHint *bool
	IdempotentHint  *bool
	OpenWorldHint   *bool
	// Raw is the annotations object as the server sent it, keys this
	// client does not know included (what a lock records).
	Raw []byte
}

// Tool is one tools/list entry. Schemas, icons, _meta and execution stay
// raw JSON and are untrusted data.
type Tool struct {
	Name         string
	Title        string
	Description  string
	InputSchema  []byte
	OutputSchema []byte // nil when absent; an object or a boolean (any JSON Schema 2020-12 value)
	Annotations  *ToolAnnotations
	Icons        []byte // raw array, nil when absent
	Meta         []byte // raw _meta object, nil when absent
	Execution    []byte // raw execution object (2025-11-25), nil when absent
	TaskSupport  string // execution.taskSupport, "" when absent
}

// ToolsPage is one tools/list result page.
type ToolsPage struct {
	Tools      []Tool
	NextCursor string
	HasNext    bool // nextCursor present (an empty string is a cursor too)
	// TTLMs and CacheScope (2026-07-28) say how long the listing may be
	// reused; 0 and "" when absent, as legacy servers send them.
	TTLMs      int64
	CacheScope string
}

// ContentBlock is one block of a tool result. Type is the block's "type"
// verbatim (text, image, audio, resource_link, resource, or anything a
// newer server invents); Text is set for text blocks only; Raw is the
// whole block as JSON for every block. Raw is a string, immutable, so a
// result decoded from an owned Value shares one copy among Raw and Text.
type ContentBlock struct {
	Type string
	Text string
	Raw  string
}

// CallToolResult is a decoded tools/call result. StructuredContent and
// Meta are raw JSON, nil when absent.
//
// A result decoded from a leased Value (jsonlex.Value.Lease) has its
// texts in that lease, which Release gives back; see Release.
type CallToolResult struct {
	Content           []ContentBlock
	StructuredContent []byte
	IsError           bool
	Meta              []byte

	mem jsonlex.Value // the lease the strings of Content share, if any
}

// Release gives back the leased memory the strings of r's Content share,
// if there is any, and empties r. It is optional (an unreleased result is
// collected like any other) and must be the last use of r and of every
// string taken from it: the memory, zeroed, is another result's next.
// Calling it again does nothing. It is not safe for concurrent use.
func (r *CallToolResult) Release() {
	mem := r.mem
	*r = CallToolResult{}
	mem.Release()
}

// maxEntries is the most entries one page or result may hold: no
// listing capbridge reads holds more tools (bound.MaxTools), and a page
// of minimal entries that a 16 MiB line allows would otherwise be decoded
// whole, hundreds of megabytes of them, before any count was checked.
const maxEntries = bound.MaxTools

// tooMany is the fault of an array with an entry at index i = maxEntries.
func tooMany(what, path string, i int) *ProtocolFault {
	return pfault(what, path+"/"+strconv.Itoa(i), i, "more than "+strconv.Itoa(maxEntries)+" entries: over the limit")
}

// pfault builds a ProtocolFault.
func pfault(what, path string, index int, reason string) *ProtocolFault {
	return &ProtocolFault{What: what, Path: path, Index: index, Reason: reason}
}

// objectResult validates that raw is one JSON object.
func objectResult(what string, raw []byte) ([]byte, error) {
	start, end, _, serr := jsonlex.Valid(raw, 0)
	if serr != nil {
		return nil, pfault(what, "", -1, "invalid JSON at byte "+strconv.Itoa(serr.Offset)+": "+serr.Reason)
	}
	if raw[start] != '{' {
		return nil, pfault(what, "", -1, "result is not an object")
	}
	// The framer already refuses a line that is not UTF-8, but these
	// decoders are exported and must be total on their own: a string
	// decoded from invalid UTF-8 would carry it on to whoever reads it.
	// utf8.Valid runs at memory speed on the ASCII that results mostly are.
	if !utf8.Valid(raw[start:end]) {
		return nil, pfault(what, "", -1, "result is not valid UTF-8")
	}
	return raw[start:end], nil
}

// DecodePingResult checks the result of ping: one JSON object, whose
// members MCP leaves empty and this client ignores.
func DecodePingResult(raw []byte) error {
	_, err := objectResult("ping", raw)
	return err
}

func kindName(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// str reads a string member or explains the mismatch.
func str(v []byte) (string, string) {
	if v[0] != '"' {
		return "", "expected string, found " + kindName(v)
	}
	return jsonlex.Unquote(v), ""
}

func boolean(v []byte) (bool, string) {
	switch v[0] {
	case 't':
		return true, ""
	case 'f':
		return false, ""
	}
	return false, "expected boolean, found " + kindName(v)
}

// schemaValue accepts a JSON Schema 2020-12 value: an object or a
// boolean.
func schemaValue(v []byte) ([]byte, string) {
	if v[0] != '{' && v[0] != 't' && v[0] != 'f' {
		return nil, "expected a schema (object or boolean), found " + kindName(v)
	}
	return v, ""
}

func object(v []byte) ([]byte, string) {
	if v[0] != '{' {
		return nil, "expected object, found " + kindName(v)
	}
	return v, ""
}

// DecodeInitializeResult decodes the result of initialize. It does not
// judge the version; the client does.
func DecodeInitializeResult(raw []byte) (*InitializeResult, error) {
	obj, err := objectResult("initialize", raw)
	if err != nil {
		return nil, err
	}
	r := &InitializeResult{}
	var have struct{ version, caps, info bool }
	var fault error
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		var why, at string
		switch {
		case jsonlex.KeyIs(key, "protocolVersion"):
			r.ProtocolVersion, why = str(v)
			have.version, at = true, "/protocolVersion"
		case jsonlex.KeyIs(key, "capabilities"):
			r.Capabilities, why = object(v)
			have.caps, at = true, "/capabilities"
			if why == "" {
				why, at = decodeServerCaps(v, r)
			}
		case jsonlex.KeyIs(key, "serverInfo"):
			have.info, at = true, "/serverInfo"
			why, at = decodeImplementation(v, &r.ServerInfo, at)
		case jsonlex.KeyIs(key, "instructions"):
			r.Instructions, why = str(v)
			at = "/instructions"
		}
		if why != "" {
			fault = pfault("initialize", at, -1, why)
			return fault
		}
		return nil
	})
	switch {
	case fault != nil:
		return nil, fault
	case !have.version:
		return nil, pfault("initialize", "/protocolVersion", -1, "missing")
	case !have.caps:
		return nil, pfault("initialize", "/capabilities", -1, "missing")
	case !have.info:
		return nil, pfault("initialize", "/serverInfo", -1, "missing")
	}
	return r, nil
}

func decodeServerCaps(caps []byte, r *InitializeResult) (why, at string) {
	_ = jsonlex.EachMember(caps, func(key, v []byte) error {
		if !jsonlex.KeyIs(key, "tools") {
			return nil
		}
		at = "/capabilities/tools"
		if _, why = object(v); why != "" {
			return errStop
		}
		r.HasTools = true
		return jsonlex.EachMember(v, func(k, lv []byte) error {
			if jsonlex.KeyIs(k, "listChanged") {
				at = "/capabilities/tools/listChanged"
				if r.ToolsListChanged, why = boolean(lv); why != "" {
					return errStop
				}
			}
			return nil
		})
	})
	return why, at
}

func decodeImplementation(v []byte, impl *Implementation, at string) (string, string) {
	if _, why := object(v); why != "" {
		return why, at
	}
	var why, where string
	var haveName, haveVersion bool
	_ = jsonlex.EachMember(v, func(key, mv []byte) error {
		switch {
		case jsonlex.KeyIs(key, "name"):
			impl.Name, why = str(mv)
			haveName, where = true, at+"/name"
		case jsonlex.KeyIs(key, "version"):
			impl.Version, why = str(mv)
			haveVersion, where = true, at+"/version"
		case jsonlex.KeyIs(key, "title"):
			impl.Title, why = str(mv)
			where = at + "/title"
		}
		if why != "" {
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return why, where
	case !haveName:
		return "missing", at + "/name"
	case !haveVersion:
		return "missing", at + "/version"
	}
	return "", ""
}

// DecodeToolsPage decodes one tools/list result. One lying tool (not an
// object, an empty or missing name, a missing or non-object inputSchema,
// a field of the wrong type) fails the whole page with a fault naming
// its index: a server that lies about one tool is not half-trusted.
func DecodeToolsPage(raw []byte) (*ToolsPage, error) {
	obj, err := objectResult("tools/list", raw)
	if err != nil {
		return nil, err
	}
	p := &ToolsPage{}
	var haveTools bool
	var fault error
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		switch {
		case jsonlex.KeyIs(key, "tools"):
			haveTools = true
			if v[0] != '[' {
				fault = pfault("tools/list", "/tools", -1, "expected array, found "+kindName(v))
				return fault
			}
			p.Tools = p.Tools[:0]
			return jsonlex.EachElement(v, func(i int, tv []byte) error {
				if i == maxEntries {
					fault = tooMany("tools/list", "/tools", i)
					return fault
				}
				t, why, at := decodeTool(tv)
				if why != "" {
					fault = pfault("tools/list", "/tools/"+strconv.Itoa(i)+at, i, why)
					return fault
				}
				p.Tools = append(p.Tools, t)
				return nil
			})
		case jsonlex.KeyIs(key, "nextCursor"):
			var why string
			if p.NextCursor, why = str(v); why != "" {
				fault = pfault("tools/list", "/nextCursor", -1, why)
				return fault
			}
			p.HasNext = true
		case jsonlex.KeyIs(key, "ttlMs"):
			var why string
			if p.TTLMs, why = nonNegative(v); why != "" {
				fault = pfault("tools/list", "/ttlMs", -1, why)
				return fault
			}
		case jsonlex.KeyIs(key, "cacheScope"):
			var why string
			if p.CacheScope, why = cacheScope(v); why != "" {
				fault = pfault("tools/list", "/cacheScope", -1, why)
				return fault
			}
		}
		return nil
	})
	if fault != nil {
		return nil, fault
	}
	if !haveTools {
		return nil, pfault("tools/list", "/tools", -1, "missing")
	}
	return p, nil
}

// DecodeToolList decodes a saved tools/list listing, as codegen reads
// one: a single result page {"tools":[…]} (nextCursor and other members
// ignored) or a bare array of tools. Each tool is held to exactly
// DecodeToolsPage's rules, so a listing is accepted here if and only if
// the client would accept it from a server; a fault names the tool's
// index.
func DecodeToolList(raw []byte) ([]Tool, error) {
	start, end, _, serr := jsonlex.Valid(raw, 0)
	if serr != nil || raw[start] != '[' {
		p, err := DecodeToolsPage(raw)
		if err != nil {
			return nil, err
		}
		return p.Tools, nil
	}
	arr := raw[start:end]
	if !utf8.Valid(arr) {
		return nil, pfault("tools/list", "", -1, "listing is not valid UTF-8")
	}
	var tools []Tool
	var fault error
	_ = jsonlex.EachElement(arr, func(i int, tv []byte) error {
		if i == maxEntries {
			fault = tooMany("tools/list", "", i)
			return fault
		}
		t, why, at := decodeTool(tv)
		if why != "" {
			fault = pfault("tools/list", "/"+strconv.Itoa(i)+at, i, why)
			return fault
		}
		tools = append(tools, t)
		return nil
	})
	if fault != nil {
		return nil, fault
	}
	return tools, nil
}

// NeedsTasks reports whether t can only be called as an MCP task
// (execution.taskSupport "required", 2025-11-25): called plainly, its
// server answers -32601. The bridge calls such a tool as a task
// (mcpwire.CallToolTask) and follows the task to its result.
func (t Tool) NeedsTasks() bool { return t.TaskSupport == "required" }

func decodeTool(v []byte) (t Tool, why, at string) {
	if v[0] != '{' {
		return t, "tool is not an object (found " + kindName(v) + ")", ""
	}
	var haveName, haveInput bool
	_ = jsonlex.EachMember(v, func(key, mv []byte) error {
		switch {
		case jsonlex.KeyIs(key, "name"):
			t.Name, why = str(mv)
			haveName, at = true, "/name"
		case jsonlex.KeyIs(key, "title"):
			t.Title, why = str(mv)
			at = "/title"
		case jsonlex.KeyIs(key, "description"):
			t.Description, why = str(mv)
			at = "/description"
		case jsonlex.KeyIs(key, "inputSchema"):
			t.InputSchema, why = object(mv)
			haveInput, at = true, "/inputSchema"
		case jsonlex.KeyIs(key, "outputSchema"):
			// 2026-07-28 allows any JSON Schema 2020-12 value, and a
			// schema is an object or a boolean (true accepts anything).
			t.OutputSchema, why = schemaValue(mv)
			at = "/outputSchema"
		case jsonlex.KeyIs(key, "annotations"):
			t.Annotations, why, at = decodeAnnotations(mv)
		case jsonlex.KeyIs(key, "icons"):
			at = "/icons"
			if mv[0] != '[' {
				why = "expected array, found " + kindName(mv)
			}
			t.Icons = mv
		case jsonlex.KeyIs(key, "_meta"):
			t.Meta, why = object(mv)
			at = "/_meta"
		case jsonlex.KeyIs(key, "execution"):
			at = "/execution"
			if t.Execution, why = object(mv); why == "" {
				_ = jsonlex.EachMember(mv, func(k, ev []byte) error {
					if jsonlex.KeyIs(k, "taskSupport") {
						at = "/execution/taskSupport"
						t.TaskSupport, why = str(ev)
					}
					return nil
				})
			}
		}
		if why != "" {
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return t, why, at
	case !haveName:
		return t, "missing", "/name"
	case t.Name == "":
		return t, "empty", "/name"
	case !haveInput:
		return t, "missing", "/inputSchema"
	}
	return t, "", ""
}

func decodeAnnotations(v []byte) (*ToolAnnotations, string, string) {
	if v[0] != '{' {
		return nil, "expected object, found " + kindName(v), "/annotations"
	}
	// The annotations and their hints are one allocation, not five: a
	// listing of thousands of tools keeps them all.
	block := &struct {
		ToolAnnotations
		hints [4]bool
	}{ToolAnnotations: ToolAnnotations{Raw: v}}
	a := &block.ToolAnnotations
	var why, at string
	hint := func(dst **bool, i int, mv []byte, name string) {
		b, w := boolean(mv)
		if w != "" {
			why, at = w, "/annotations/"+name
			return
		}
		block.hints[i] = b
		*dst = &block.hints[i]
	}
	_ = jsonlex.EachMember(v, func(key, mv []byte) error {
		switch {
		case jsonlex.KeyIs(key, "title"):
			if a.Title, why = str(mv); why != "" {
				at = "/annotations/title"
			}
		case jsonlex.KeyIs(key, "readOnlyHint"):
			hint(&a.ReadOnlyHint, 0, mv, "readOnlyHint")
		case jsonlex.KeyIs(key, "destructiveHint"):
			hint(&a.DestructiveHint, 1, mv, "destructiveHint")
		case jsonlex.KeyIs(key, "idempotentHint"):
			hint(&a.IdempotentHint, 2, mv, "idempotentHint")
		case jsonlex.KeyIs(key, "openWorldHint"):
			hint(&a.OpenWorldHint, 3, mv, "openWorldHint")
		}
		if why != "" {
			return errStop
		}
		return nil
	})
	if why != "" {
		return nil, why, at
	}
	return a, "", ""
}

// DecodeCallToolResult decodes a tools/call result. The returned value
// aliases raw (Raw, StructuredContent, Meta), so raw must not be reused
// while the result lives. Every block needs a string "type"; a text
// block needs a string "text"; other kinds are kept raw without further
// checks (tolerant content: the bridge reduces them to their kind).
func DecodeCallToolResult(raw []byte) (*CallToolResult, error) {
	obj, err := objectResult("tools/call", raw)
	if err != nil {
		return nil, err
	}
	return decodeCallToolResult(jsonlex.Value{}, obj)
}

// DecodeCallToolResultValue is DecodeCallToolResult for a result that
// arrived validated (Message.Result): it is walked, not checked again.
// From an owned Value (jsonlex.Value.Own) the texts and Raw share its
// one copy and StructuredContent and Meta are copies of their own, so
// the result aliases nothing that can be written; from a leased one
// (jsonlex.Value.Lease) the same holds until the result's Release, which
// gives the lease back; otherwise the result aliases v's bytes as
// DecodeCallToolResult's aliases raw.
func DecodeCallToolResultValue(v jsonlex.Value) (*CallToolResult, error) {
	obj := v.Bytes()
	switch {
	case v.IsZero():
		return nil, pfault("tools/call", "", -1, "missing result")
	case obj[0] != '{':
		return nil, pfault("tools/call", "", -1, "result is not an object")
	}
	return decodeCallToolResult(v, obj)
}

// decodeCallToolResult decodes the validated object obj, which is own's
// bytes when own is not zero: its strings are then cut from own.
func decodeCallToolResult(own jsonlex.Value, obj []byte) (*CallToolResult, error) {
	// The result and its content, when that is one block (what most
	// tools answer), are one allocation.
	one := &struct {
		r   CallToolResult
		blk [1]ContentBlock
	}{}
	r := &one.r
	var haveContent bool
	var fault error
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		var why, at string
		switch {
		case jsonlex.KeyIs(key, "content"):
			haveContent, at = true, "/content"
			if v[0] != '[' {
				why = "expected array, found " + kindName(v)
				break
			}
			// Most results hold one block; more grow the slice.
			r.Content = one.blk[:0]
			return jsonlex.EachElement(v, func(i int, bv []byte) error {
				b, why, at := decodeBlock(own, bv)
				if why != "" {
					fault = pfault("tools/call", "/content/"+strconv.Itoa(i)+at, i, why)
					return fault
				}
				r.Content = append(r.Content, b)
				return nil
			})
		case jsonlex.KeyIs(key, "structuredContent"):
			// Kept raw whatever its kind: 2026-07-28 allows any JSON
			// value, and the bridge converts it totally either way.
			r.StructuredContent = raw(own, v)
		case jsonlex.KeyIs(key, "isError"):
			r.IsError, why = boolean(v)
			at = "/isError"
		case jsonlex.KeyIs(key, "_meta"):
			_, why = object(v)
			r.Meta, at = raw(own, v), "/_meta"
		}
		if why != "" {
			fault = pfault("tools/call", at, -1, why)
			return fault
		}
		return nil
	})
	if fault != nil {
		return nil, fault
	}
	if !haveContent {
		return nil, pfault("tools/call", "/content", -1, "missing")
	}
	if own.Leased() {
		r.mem = own
	}
	return r, nil
}

// raw returns v, a part of own's bytes, for a result to keep: a copy when
// own is owned (its memory must never be written), v itself otherwise.
func raw(own jsonlex.Value, v []byte) []byte {
	if own.Owned() {
		return bytes.Clone(v)
	}
	return v
}

// blockType reads a content block's type. The types the spec defines
// are returned as constants: a result's every block has one, and the
// copy would be the only allocation its text block costs.
func blockType(v []byte) (string, string) {
	if v[0] == '"' {
		switch string(v[1 : len(v)-1]) {
		case "text":
			return "text", ""
		case "image":
			return "image", ""
		case "audio":
			return "audio", ""
		case "resource":
			return "resource", ""
		case "resource_link":
			return "resource_link", ""
		}
	}
	return str(v)
}

func decodeBlock(own jsonlex.Value, v []byte) (b ContentBlock, why, at string) {
	if v[0] != '{' {
		return b, "content block is not an object (found " + kindName(v) + ")", ""
	}
	b.Raw = own.Str(v)
	var haveType, haveText bool
	var text []byte
	_ = jsonlex.EachMember(v, func(key, mv []byte) error {
		switch {
		case jsonlex.KeyIs(key, "type"):
			haveType, at = true, "/type"
			b.Type, why = blockType(mv)
		case jsonlex.KeyIs(key, "text"):
			haveText, text = true, mv
		}
		if why != "" {
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return b, why, at
	case !haveType:
		return b, "missing", "/type"
	case b.Type == "text":
		if !haveText {
			return b, "missing", "/text"
		}
		if text[0] != '"' {
			return b, "expected string, found " + kindName(text), "/text"
		}
		if body := text[1 : len(text)-1]; bytes.IndexByte(body, '\\') < 0 {
			b.Text = own.Str(body)
		} else {
			b.Text = string(jsonlex.AppendUnescaped(make([]byte, 0, len(body)), body))
		}
	}
	return b, "", ""
}
