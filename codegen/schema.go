package codegen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Bounds on reading one schema. Past them a schema is not refused; its tool
// is planned in the whole-value form, which accepts anything.
const (
	maxSchemaBytes = 1 << 20 // one tool's inputSchema
	maxSchemaDepth = 64      // JSON nesting of one schema
	maxSchemaNodes = 1 << 16 // JSON values in one schema
	maxParams      = 128     // properties of one tool
	maxRefHops     = 16      // $ref indirections followed for one property
	maxEnumShown   = 32      // enum values listed in a note
)

// kind is the language-neutral type of a parameter (seed 000's three tiers:
// the typed subset, structured, and the whole value).
type kind uint8

const (
	kString kind = iota
	kInteger
	kNumber
	kBoolean
	kAny // structured: any JSON value; reason says why
)

// param is one planned parameter. Required parameters become positional
// arguments, optional ones fields of an options value.
type param struct {
	wire     string // the property name, sent verbatim
	kind     kind
	list     bool     // an array of kind; kind is never kAny when list is set
	enum     []string // the allowed values of a string enum, raw server text
	note     string   // the property's description, raw server text
	reason   string   // why kind is kAny
	required bool
}

// plan is the reading of one inputSchema. If whole is non-empty the tool
// takes its arguments as one whole value and whole says why; otherwise
// params holds every declared property, required ones first.
type plan struct {
	whole  string
	params []param
}

// compositions are the keywords that combine or constrain schemas in ways
// the typed subset cannot express. Any of them on a property makes it
// structured; on the top level they make the whole value.
var compositions = []string{"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"}

// planSchema is total: every input, however hostile, yields a plan, and no
// required parameter is ever dropped (issue 6). Types may come out looser
// than the schema, never stricter: what the typed subset cannot say
// exactly becomes any.
func planSchema(raw json.RawMessage) plan {
	if len(raw) > maxSchemaBytes {
		return plan{whole: fmt.Sprintf("input schema is larger than %d bytes", maxSchemaBytes)}
	}
	root, err := parseTree(raw, maxSchemaDepth, maxSchemaNodes)
	if err != nil {
		return plan{whole: "input schema is unreadable: " + err.Error()}
	}
	if root.kind != kindObject {
		return plan{whole: "input schema is not a JSON object"}
	}
	if t := root.get("type"); t != nil && !(t.kind == kindString && t.str == "object") {
		return plan{whole: "input schema's type is not \"object\""}
	}
	for _, k := range compositions {
		if root.get(k) != nil {
			return plan{whole: "input schema uses " + k + " at the top level"}
		}
	}
	props := root.get("properties")
	if props == nil {
		return plan{whole: "input schema declares no properties"}
	}
	if props.kind != kindObject {
		return plan{whole: "input schema's properties is not an object"}
	}
	if len(props.keys) > maxParams {
		return plan{whole: fmt.Sprintf("input schema declares more than %d properties", maxParams)}
	}
	var required []string
	if r := root.get("required"); r != nil {
		if r.kind != kindArray {
			return plan{whole: "input schema's required is not an array"}
		}
		for _, e := range r.elems {
			if e.kind != kindString {
				return plan{whole: "input schema's required holds a non-string"}
			}
			if !slices.Contains(required, e.str) {
				required = append(required, e.str)
			}
		}
		if len(required) > maxParams {
			return plan{whole: fmt.Sprintf("input schema requires more than %d properties", maxParams)}
		}
	}
	var p plan
	// Required parameters come first, in property order; then those the
	// schema requires but never declares (still required, so still
	// parameters); then the optional ones.
	for i, name := range props.keys {
		if slices.Contains(required, name) {
			p.params = append(p.params, typeParam(root, name, props.vals[i], true))
		}
	}
	for _, name := range required {
		if props.get(name) == nil {
			p.params = append(p.params, param{wire: name, kind: kAny, required: true,
				reason: "required but not declared in properties"})
		}
	}
	for i, name := range props.keys {
		if !slices.Contains(required, name) {
			p.params = append(p.params, typeParam(root, name, props.vals[i], false))
		}
	}
	return p
}

// typeParam plans one property whose schema is s.
func typeParam(root *node, name string, s *node, required bool) param {
	p := param{wire: name, required: required}
	s, reason := deref(root, s)
	if d := s.get("description"); d != nil && d.kind == kindString {
		p.note = d.str
	}
	if reason != "" {
		p.kind, p.reason = kAny, reason
		return p
	}
	p.kind, p.enum, p.reason = simpleType(s)
	if p.reason != reasonArray {
		return p
	}
	// An array of a simple type is in the typed subset; arrays of anything
	// else are structured.
	items := s.get("items")
	if items == nil {
		p.reason = "array items are unconstrained"
		return p
	}
	items, reason = deref(root, items)
	if reason != "" {
		p.reason = "array items: " + reason
		return p
	}
	if k, _, why := simpleType(items); k != kAny {
		p.kind, p.list, p.reason = k, true, ""
	} else {
		p.reason = "array items: " + why
	}
	return p
}

// deref follows local $ref pointers ("#/…") from s, at most maxRefHops
// times, and returns the schema reached or why it cannot be typed.
func deref(root, s *node) (*node, string) {
	for range maxRefHops {
		if s.kind == kindBool {
			if s.b {
				return s, "schema accepts any value"
			}
			return s, "schema accepts no value"
		}
		if s.kind != kindObject {
			return s, "schema is not an object"
		}
		ref := s.get("$ref")
		if ref == nil {
			return s, ""
		}
		if ref.kind != kindString || !strings.HasPrefix(ref.str, "#") {
			return s, "$ref is not local"
		}
		target := pointer(root, ref.str[1:])
		if target == nil {
			return s, "$ref points nowhere"
		}
		s = target
	}
	return s, fmt.Sprintf("$ref chain longer than %d (a cycle?)", maxRefHops)
}

// pointer resolves an RFC 6901 JSON Pointer (the fragment after '#') in root.
func pointer(root *node, ptr string) *node {
	if ptr == "" {
		return root
	}
	if ptr[0] != '/' {
		return nil
	}
	n := root
	for tok := range strings.SplitSeq(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n.kind {
		case kindObject:
			n = n.get(tok)
		case kindArray:
			i := 0
			for _, c := range []byte(tok) {
				if c < '0' || c > '9' || i > len(n.elems) {
					return nil
				}
				i = i*10 + int(c-'0')
			}
			if tok == "" || i >= len(n.elems) {
				return nil
			}
			n = n.elems[i]
		default:
			return nil
		}
		if n == nil {
			return nil
		}
	}
	return n
}

// reasonArray marks an array schema, whose items typeParam reads.
const reasonArray = "array"

// simpleType reads an object schema as one of the typed subset's scalar
// kinds, or kAny with the reason. An array is reported as kAny with reason
// "array" for the caller to look into.
func simpleType(s *node) (kind, []string, string) {
	for _, k := range compositions {
		if s.get(k) != nil {
			return kAny, nil, "uses " + k
		}
	}
	t := s.get("type")
	if e := s.get("enum"); e != nil {
		return enumType(e, t)
	}
	if c := s.get("const"); c != nil {
		if c.kind == kindString && (t == nil || t.kind == kindString && t.str == "string") {
			return kString, []string{c.str}, ""
		}
		return kAny, nil, "non-string const"
	}
	if t == nil {
		return kAny, nil, "no type"
	}
	if t.kind == kindArray {
		for _, e := range t.elems {
			if e.kind == kindString && e.str == "null" {
				return kAny, nil, "type admits null"
			}
		}
		if len(t.elems) == 1 && t.elems[0].kind == kindString {
			t = t.elems[0]
		} else {
			return kAny, nil, "type is a union"
		}
	}
	if t.kind != kindString {
		return kAny, nil, "type is not a string"
	}
	switch t.str {
	case "string":
		return kString, nil, ""
	case "integer":
		return kInteger, nil, ""
	case "number":
		return kNumber, nil, ""
	case "boolean":
		return kBoolean, nil, ""
	case "array":
		return kAny, nil, reasonArray
	case "object":
		return kAny, nil, "object"
	case "null":
		return kAny, nil, "type is null"
	}
	return kAny, nil, "unknown type"
}

// enumType types an enum: all strings (and type absent or "string") is a
// string enum; all integers under type "integer" is an integer. Anything
// else is structured.
func enumType(e, t *node) (kind, []string, string) {
	if e.kind != kindArray || len(e.elems) == 0 {
		return kAny, nil, "enum is not a non-empty array"
	}
	if t != nil && t.kind == kindString && t.str == "integer" {
		for _, v := range e.elems {
			if v.kind != kindNumber || strings.ContainsAny(v.str, ".eE") {
				return kAny, nil, "enum of mixed values"
			}
		}
		return kInteger, nil, ""
	}
	if t != nil && !(t.kind == kindString && t.str == "string") {
		return kAny, nil, "enum of mixed values"
	}
	vals := make([]string, 0, len(e.elems))
	for _, v := range e.elems {
		if v.kind != kindString {
			return kAny, nil, "enum of mixed values"
		}
		vals = append(vals, v.str)
	}
	return kString, vals, ""
}
