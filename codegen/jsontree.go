package codegen

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/truncate"
)

// node is one JSON value of a schema, with object members kept in document
// order: parameter order in the generated signature follows the order the
// server wrote its properties in, and encoding/json's maps would lose it.
type node struct {
	kind  nodeKind
	str   string   // kindString; kindNumber holds the literal text
	b     bool     // kindBool
	keys  []string // kindObject, in document order, unique
	vals  []*node  // kindObject, parallel to keys
	elems []*node  // kindArray
	// index places each key of an object of more than indexFrom keys.
	// A schema is looked up a dozen keys at a time at every visit, and a
	// $ref's target is visited at every use: scanning a 30 000-key
	// object 10 000 times took 6.6 s of one schema's planning. Only the
	// parser sets it: a node built by code has none, and is scanned.
	index map[string]int
}

// indexFrom is how many keys an object may have before it is indexed:
// most schema objects have a handful, and a scan of them is cheaper
// than a map.
const indexFrom = 16

type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// get returns the member named key of an object, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	if n.index != nil {
		if i, ok := n.index[key]; ok {
			return n.vals[i]
		}
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// errTree is the reason a schema could not be read as a tree; it becomes the
// reason of a whole-value plan, never a failure of generation.
type errTree struct{ reason string }

func (e *errTree) Error() string { return e.reason }

// parseTree decodes raw into an ordered tree. It is total and bounded:
// its recursion is cut at maxDepth levels, it stops past maxNodes values,
// and it refuses duplicate object keys — JSON leaves their meaning to
// the parser, and a server whose parser took the other copy would see a
// different schema than the one we typed. Strings are read as
// encoding/json reads them: a lone surrogate escape and each byte that is
// not UTF-8 become U+FFFD. It reads the bytes once, with the lexer every
// other reader of MCP JSON in capbridge uses, and allocates the tree's
// nodes in blocks: a listing of thousands of tools is planned at boot,
// so this is on the path to ready.
func parseTree(raw []byte, maxDepth, maxNodes int) (*node, error) {
	p := treeParser{b: raw, maxDepth: maxDepth, maxNodes: maxNodes}
	i := jsonlex.SkipSpace(raw, 0)
	if i == len(raw) {
		return nil, &errTree{"empty input"}
	}
	root, i, err := p.value(i, 0, nil)
	if err != nil {
		return nil, err
	}
	if jsonlex.SkipSpace(raw, i) != len(raw) {
		return nil, &errTree{"trailing data after the JSON value"}
	}
	return root, nil
}

// treeParser is the state of one parseTree: the input, the bounds, the
// block nodes are cut from, and the members of the objects being read,
// which each object copies out at its end, at its size.
type treeParser struct {
	b                  []byte
	maxDepth, maxNodes int
	count              int
	block              []node
	keys               []string
	vals               []*node
}

// member is the key a value is read for, and where its object's keys
// start in treeParser.keys, with their index once there are more than
// indexFrom; nil for an array's element or the root.
type member struct {
	key   string
	base  int
	index map[string]int
}

// duplicate reports whether m's key is already one of its object's.
func (m *member) duplicate(keys []string) bool {
	if m.index != nil {
		_, dup := m.index[m.key]
		return dup
	}
	return slices.Contains(keys[m.base:], m.key)
}

// newNode counts one more value, refuses it if its key is a duplicate,
// and returns a node for it. The checks come in the order a streaming
// reader meets them, so a schema breaking two bounds is refused for the
// first.
func (p *treeParser) newNode(k nodeKind, m *member) (*node, error) {
	p.count++
	if p.count > p.maxNodes {
		return nil, &errTree{fmt.Sprintf("more than %d JSON values", p.maxNodes)}
	}
	if m != nil && m.duplicate(p.keys) {
		return nil, &errTree{fmt.Sprintf("duplicate object key %q", truncate.Ellipsis(m.key, 40))}
	}
	if len(p.block) == 0 {
		p.block = make([]node, min(max(16, p.count), 256))
	}
	n := &p.block[0]
	p.block = p.block[1:]
	n.kind = k
	return n, nil
}

// syntax is the error for a lexical fault.
func syntax(f *jsonlex.Fault) error {
	return &errTree{fmt.Sprintf("not valid JSON: %s at byte %d", f.Reason, f.Offset)}
}

// value reads the value at b[i] (not whitespace), inside depth
// containers, for member m, and returns it and the offset just past it.
func (p *treeParser) value(i, depth int, m *member) (*node, int, error) {
	b := p.b
	if i >= len(b) {
		return nil, i, syntax(&jsonlex.Fault{Offset: i, Reason: "unexpected end of input"})
	}
	switch c := b[i]; {
	case c == '{':
		return p.object(i, depth, m)
	case c == '[':
		return p.array(i, depth, m)
	case c == '"':
		end, s, err := p.str(i)
		if err != nil {
			return nil, end, err
		}
		n, err := p.newNode(kindString, m)
		if err != nil {
			return nil, end, err
		}
		n.str = s
		return n, end, nil
	case c == '-' || c >= '0' && c <= '9':
		num, f := jsonlex.ScanNumber(b, i)
		if f != nil {
			return nil, num.End, syntax(f)
		}
		n, err := p.newNode(kindNumber, m)
		if err != nil {
			return nil, num.End, err
		}
		n.str = string(b[i:num.End])
		return n, num.End, nil
	}
	k, lit := kindNull, "null"
	switch b[i] {
	case 't':
		k, lit = kindBool, "true"
	case 'f':
		k, lit = kindBool, "false"
	case 'n':
	default:
		return nil, i, syntax(&jsonlex.Fault{Offset: i, Reason: "invalid character " + strconv.QuoteRune(rune(b[i])) + " looking for a value"})
	}
	end, f := jsonlex.ScanLiteral(b, i, lit)
	if f != nil {
		return nil, end, syntax(f)
	}
	n, err := p.newNode(k, m)
	if err != nil {
		return nil, end, err
	}
	n.b = lit == "true"
	return n, end, nil
}

// open counts the container at b[i] and checks its depth.
func (p *treeParser) open(k nodeKind, depth int, m *member) (*node, error) {
	if depth >= p.maxDepth {
		return nil, &errTree{fmt.Sprintf("nested deeper than %d levels", p.maxDepth)}
	}
	return p.newNode(k, m)
}

func (p *treeParser) object(i, depth int, m *member) (*node, int, error) {
	n, err := p.open(kindObject, depth, m)
	if err != nil {
		return nil, i, err
	}
	b := p.b
	base, vbase := len(p.keys), len(p.vals)
	defer func() { p.keys, p.vals = p.keys[:base], p.vals[:vbase] }()
	i = jsonlex.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return n, i + 1, nil
	}
	var index map[string]int // once there are more than indexFrom keys
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, i, syntax(&jsonlex.Fault{Offset: i, Reason: "expected object key"})
		}
		end, key, err := p.str(i)
		if err != nil {
			return nil, end, err
		}
		i = jsonlex.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, i, syntax(&jsonlex.Fault{Offset: i, Reason: "expected ':' after object key"})
		}
		var v *node
		if v, i, err = p.value(jsonlex.SkipSpace(b, i+1), depth+1, &member{key, base, index}); err != nil {
			return nil, i, err
		}
		p.keys, p.vals = append(p.keys, key), append(p.vals, v)
		// Checking each key against every earlier one is quadratic: a
		// 65 000-key object took 9.9 s to read.
		switch count := len(p.keys) - base; {
		case index != nil:
			index[key] = count - 1
		case count > indexFrom:
			index = make(map[string]int, 2*count)
			for j, k := range p.keys[base:] {
				index[k] = j
			}
		}
		i = jsonlex.SkipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = jsonlex.SkipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			n.keys, n.vals = slices.Clone(p.keys[base:]), slices.Clone(p.vals[vbase:])
			n.index = index
			return n, i + 1, nil
		default:
			return nil, i, syntax(&jsonlex.Fault{Offset: i, Reason: "expected ',' or '}' in object"})
		}
	}
}

func (p *treeParser) array(i, depth int, m *member) (*node, int, error) {
	n, err := p.open(kindArray, depth, m)
	if err != nil {
		return nil, i, err
	}
	b := p.b
	base := len(p.vals)
	defer func() { p.vals = p.vals[:base] }()
	i = jsonlex.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return n, i + 1, nil
	}
	for {
		var v *node
		if v, i, err = p.value(i, depth+1, nil); err != nil {
			return nil, i, err
		}
		p.vals = append(p.vals, v)
		i = jsonlex.SkipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = jsonlex.SkipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			n.elems = slices.Clone(p.vals[base:])
			return n, i + 1, nil
		default:
			return nil, i, syntax(&jsonlex.Fault{Offset: i, Reason: "expected ',' or ']' in array"})
		}
	}
}

// str reads the string at b[i] and returns the offset past it and its
// text, each byte that is not UTF-8 replaced by U+FFFD as encoding/json
// replaces it. The keywords of JSON Schema, most of a schema's strings,
// are not allocated.
func (p *treeParser) str(i int) (int, string, error) {
	end, esc, f := jsonlex.ScanString(p.b, i, 0)
	if f != nil {
		return end, "", syntax(f)
	}
	body := p.b[i+1 : end-1]
	if !esc {
		if s, ok := schemaWords[string(body)]; ok {
			return end, s, nil
		}
	}
	s := jsonlex.Unquote(p.b[i:end])
	if !utf8.ValidString(s) {
		var r []rune
		for _, c := range s { // a byte that is not UTF-8 ranges as U+FFFD
			r = append(r, c)
		}
		s = string(r)
	}
	return end, s, nil
}

// schemaWords are the keys and values most schemas repeat: a string
// equal to one is that one, not a new allocation.
var schemaWords = func() map[string]string {
	m := map[string]string{}
	for _, w := range []string{"type", "properties", "required", "description", "items", "enum", "default", "format",
		"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern", "additionalProperties",
		"oneOf", "anyOf", "allOf", "const", "$ref", "$defs", "definitions", "title", "examples", "nullable",
		"object", "string", "integer", "number", "boolean", "array", "null", "date-time", "date", "uri", "email", "uuid",
		"exclusiveMinimum", "exclusiveMaximum", "uniqueItems", "$schema", "http://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft/2020-12/schema", "contentMediaType", "deprecated", "readOnly", "writeOnly"} {
		m[w] = w
	}
	return m
}()
