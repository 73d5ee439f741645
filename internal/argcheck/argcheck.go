// Package argcheck implements the check of a tool call's arguments, as
// MessagePack, against the part of JSON Schema it can judge exactly:
// types, required properties, enums and constants, numeric ranges,
// string lengths, item counts, items and additionalProperties. A schema
// that uses anything else (patterns, combinators, references, …) is not
// compiled at all, so a tool is either checked exactly or not checked.
//
// Compile runs once per listed tool (for a big listing, on the tool's
// first call); Check runs on every call and is built for that: no
// allocation unless it finds a fault, maps looked up by the key's bytes,
// values the schema says nothing about skipped.
package argcheck

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/msgpk"
	"github.com/capbridge/capbridge/internal/pointer"
)

// Bounds on what Compile accepts; a schema beyond them is not checked.
const (
	maxSchemaDepth = 32  // nested schemas, counted from the root
	maxRequired    = 64  // required properties of one object (a bit each)
	maxEnum        = 256 // values of one enum
	maxNodes       = 4096
)

// JSON types, as bits.
const (
	tNull uint8 = 1 << iota
	tBool
	tInteger // a number with no fractional part
	tNumber  // any number (integers included)
	tString
	tArray
	tObject
)

var typeBits = map[string]uint8{"null": tNull, "boolean": tBool, "integer": tInteger, "number": tNumber | tInteger, "string": tString, "array": tArray, "object": tObject}

// Schema is a compiled input schema. Its zero value is not usable; a nil
// *Schema checks nothing. Safe for concurrent use: Check only reads it.
type Schema struct{ root *node }

// node is one compiled (sub)schema.
type node struct {
	never    bool  // the schema false: no value fits
	types    uint8 // allowed types; 0: any
	enum     []scalar
	hasConst bool
	// numbers
	min, max       float64
	hasMin, hasMax bool
	exMin, exMax   bool // the bound itself is excluded
	// strings, in code points; arrays, in items; -1: none
	minLen, maxLen     int
	minItems, maxItems int
	items              *node
	// objects
	props    map[string]prop
	required []string
	closed   bool  // additionalProperties false
	extra    *node // additionalProperties as a schema; nil: anything
}

// prop is a declared property: its schema (nil: anything) and its bit
// among the required ones (-1: optional).
type prop struct {
	n   *node
	bit int
}

// scalar is an enum or const value: JSON null, a boolean, a number or a
// string.
type scalar struct {
	kind uint8 // tNull, tBool, tNumber, tString
	b    bool
	f    float64
	s    string
}

// annotations are the keywords that assert nothing (JSON Schema 2020-12
// "Meta-Data", format as an annotation, definitions no reference uses).
var annotations = map[string]bool{
	"$schema": true, "$id": true, "id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "format": true, "deprecated": true, "readOnly": true,
	"writeOnly": true, "contentMediaType": true, "contentEncoding": true, "$defs": true, "definitions": true,
}

// errUnsupported is why a schema is not compiled.
var errUnsupported = errors.New("argcheck: schema uses what argcheck cannot check exactly")

// Compile compiles an input schema (JSON). It returns nil and the reason
// when the schema is one argcheck cannot check exactly: then the tool's
// arguments go to the server unchecked, as before.
func Compile(schema []byte) (*Schema, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("argcheck: %w", err)
	}
	c := compiler{}
	n, err := c.compile(root, 0)
	if err != nil {
		return nil, err
	}
	if n.types != tObject && n.types != 0 || n.never {
		return nil, fmt.Errorf("%w: the root is not an object schema", errUnsupported)
	}
	return &Schema{root: n}, nil
}

type compiler struct{ nodes int }

func unsupported(what string) error { return fmt.Errorf("%w: %s", errUnsupported, what) }

func (c *compiler) compile(s any, depth int) (*node, error) {
	c.nodes++
	if depth > maxSchemaDepth || c.nodes > maxNodes {
		return nil, unsupported("too large or too deep")
	}
	n := &node{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	switch v := s.(type) {
	case bool:
		n.never = !v
		return n, nil
	case map[string]any:
		return n, c.fill(n, v, depth)
	}
	return nil, unsupported("a schema that is not an object or a boolean")
}

func (c *compiler) fill(n *node, m map[string]any, depth int) error {
	var err error
	for k, v := range m {
		switch {
		case annotations[k] || strings.HasPrefix(k, "x-"):
		case k == "exclusiveMinimum", k == "exclusiveMaximum": // below, beside minimum and maximum
		case k == "type":
			err = n.setTypes(v)
		case k == "enum":
			err = n.setEnum(v)
		case k == "const":
			n.hasConst = true
			err = n.setEnum([]any{v})
		case k == "minimum":
			n.min, n.hasMin, err = num(v)
		case k == "maximum":
			n.max, n.hasMax, err = num(v)
		case k == "minLength", k == "maxLength", k == "minItems", k == "maxItems":
			var x int
			if x, err = count(v); err == nil {
				*map[string]*int{"minLength": &n.minLen, "maxLength": &n.maxLen, "minItems": &n.minItems, "maxItems": &n.maxItems}[k] = x
			}
		case k == "items":
			if _, tuple := v.([]any); tuple {
				return unsupported("items as a tuple")
			}
			n.items, err = c.compile(v, depth+1)
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return unsupported("properties is not an object")
			}
			if n.props == nil {
				n.props = make(map[string]prop, len(props))
			}
			for name, ps := range props {
				sub, err := c.compile(ps, depth+1)
				if err != nil {
					return err
				}
				n.props[name] = prop{n: sub, bit: -1}
			}
		case k == "required":
			list, ok := v.([]any)
			if !ok || len(list) > maxRequired {
				return unsupported("required is not a short list")
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return unsupported("required names a non-string")
				}
				n.required = append(n.required, name)
			}
		case k == "additionalProperties":
			if b, ok := v.(bool); ok {
				n.closed = !b
				break
			}
			n.extra, err = c.compile(v, depth+1)
		default:
			// Everything else either asserts what argcheck does not
			// judge (pattern, oneOf, $ref, multipleOf, uniqueItems, …) or
			// is a keyword of a draft it does not know: either way the
			// schema cannot be checked exactly.
			return unsupported("keyword " + strconv.Quote(k))
		}
		if err != nil {
			return err
		}
	}
	// exclusiveMinimum and exclusiveMaximum: a number (2019+) or, beside
	// minimum and maximum, a boolean (draft 4).
	for _, ex := range []struct {
		key  string
		val  *float64
		has  *bool
		excl *bool
	}{{"exclusiveMinimum", &n.min, &n.hasMin, &n.exMin}, {"exclusiveMaximum", &n.max, &n.hasMax, &n.exMax}} {
		v, ok := m[ex.key]
		if !ok {
			continue
		}
		if b, isBool := v.(bool); isBool {
			*ex.excl = b && *ex.has
			continue
		}
		f, _, err := num(v)
		if err != nil {
			return err
		}
		if *ex.has && *ex.val != f {
			return unsupported("both an inclusive and an exclusive bound")
		}
		*ex.val, *ex.has, *ex.excl = f, true, true
	}
	// Each required property gets a bit, in the order listed, so the
	// first missing one is reported the same way every time.
	var unique []string
	for _, name := range n.required {
		if slices.Contains(unique, name) {
			continue
		}
		if n.props == nil {
			n.props = map[string]prop{}
		}
		p, ok := n.props[name]
		if !ok {
			p = prop{}
		}
		p.bit = len(unique)
		n.props[name] = p
		unique = append(unique, name)
	}
	n.required = unique
	return nil
}

func (n *node) setTypes(v any) error {
	switch t := v.(type) {
	case string:
		b, ok := typeBits[t]
		if !ok {
			return unsupported("type " + strconv.Quote(t))
		}
		n.types = b
		return nil
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok || typeBits[s] == 0 {
				return unsupported("a type list with an unknown type")
			}
			n.types |= typeBits[s]
		}
		return nil
	}
	return unsupported("type is not a string or a list")
}

func (n *node) setEnum(v any) error {
	list, ok := v.([]any)
	if !ok || len(list) == 0 || len(list) > maxEnum {
		return unsupported("enum is not a short, non-empty list")
	}
	n.enum = n.enum[:0]
	for _, x := range list {
		var s scalar
		switch y := x.(type) {
		case nil:
			s.kind = tNull
		case bool:
			s.kind, s.b = tBool, y
		case string:
			s.kind, s.s = tString, y
		case json.Number:
			f, err := y.Float64()
			if err != nil || math.Abs(f) > 1<<53 {
				return unsupported("an enum number beyond 2^53")
			}
			s.kind, s.f = tNumber, f
		default:
			return unsupported("an enum of objects or arrays")
		}
		n.enum = append(n.enum, s)
	}
	return nil
}

func num(v any) (float64, bool, error) {
	x, ok := v.(json.Number)
	if !ok {
		return 0, false, unsupported("a bound that is not a number")
	}
	f, err := x.Float64()
	if err != nil {
		return 0, false, unsupported("a bound out of range")
	}
	return f, true, nil
}

func count(v any) (int, error) {
	f, _, err := num(v)
	if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, unsupported("a length that is not a small non-negative integer")
	}
	return int(f), nil
}

// Fault is an argument that does not fit the schema: Path is the RFC 6901
// pointer of the first value that does not (of the missing property, for
// a required one), Want what the schema asks there, Got what was there.
type Fault struct {
	Path, Want, Got string
}

func (f *Fault) Error() string {
	return "argcheck: at " + strconv.Quote(f.Path) + ": want " + f.Want + ", got " + f.Got
}

// Check judges args, one MessagePack map already converted to JSON
// without fault, and returns the first value that does not fit, in
// document order, or nil. A nil Schema accepts everything.
func (s *Schema) Check(args []byte) *Fault {
	if s == nil {
		return nil
	}
	var w walker
	w.b = args
	if _, f := w.value(s.root, 0, 0); f != nil {
		return f
	}
	return nil
}

// walker holds the value being checked and the path to where it is, as
// offsets of keys (or indexes) kept only to name a fault.
type walker struct {
	b    []byte
	path [bound.MaxDepth + 1]step
}

type step struct {
	key   int // offset of the key's string header; -1: an index
	index int
}

// value checks the value at offset i against n at depth d and returns
// where the next value starts.
func (w *walker) value(n *node, i, d int) (int, *Fault) {
	h, err := msgpk.ReadHead(w.b, i)
	if err != nil {
		return 0, w.fault(d, "a value", "malformed MessagePack")
	}
	if n == nil {
		end, err := msgpk.Skip(w.b, i, d)
		if err != nil {
			return 0, w.fault(d, "a value", "malformed MessagePack")
		}
		return end, nil
	}
	if n.never {
		return 0, w.fault(d, "no value (the schema is false)", w.describe(h))
	}
	kind := w.kindOf(h)
	if n.types != 0 && n.types&kind == 0 {
		return 0, w.fault(d, typeNames(n.types), w.describe(h))
	}
	if n.enum != nil && !w.inEnum(n.enum, h, kind) {
		return 0, w.fault(d, n.enumText(), w.describe(h))
	}
	switch kind {
	case tInteger, tNumber:
		if f := w.checkNumber(n, h, d); f != nil {
			return 0, f
		}
		return h.End(), nil
	case tString:
		if n.minLen >= 0 || n.maxLen >= 0 {
			c := utf8.RuneCount(w.b[h.Off:h.End()])
			if n.minLen >= 0 && c < n.minLen || n.maxLen >= 0 && c > n.maxLen {
				return 0, w.fault(d, "a string of "+span(n.minLen, n.maxLen)+" characters", strconv.Itoa(c)+" characters")
			}
		}
		return h.End(), nil
	case tArray:
		if n.minItems >= 0 && int(h.V) < n.minItems || n.maxItems >= 0 && int(h.V) > n.maxItems {
			return 0, w.fault(d, "an array of "+span(n.minItems, n.maxItems)+" items", strconv.FormatUint(h.V, 10)+" items")
		}
		j := h.Off
		for k := 0; k < int(h.V); k++ {
			if d+1 > bound.MaxDepth {
				return 0, w.fault(d, "a value", "nesting too deep")
			}
			w.path[d+1] = step{key: -1, index: k}
			var f *Fault
			if j, f = w.value(n.items, j, d+1); f != nil {
				return 0, f
			}
		}
		return j, nil
	case tObject:
		return w.object(n, h, d)
	}
	return h.End(), nil
}

func (w *walker) object(n *node, h msgpk.Head, d int) (int, *Fault) {
	var have uint64
	j := h.Off
	for k := 0; k < int(h.V); k++ {
		kh, err := msgpk.ReadHead(w.b, j)
		if err != nil || kh.Kind != msgpk.Str {
			return 0, w.fault(d, "an object", "a map whose keys are not all strings")
		}
		if d+1 > bound.MaxDepth {
			return 0, w.fault(d, "a value", "nesting too deep")
		}
		w.path[d+1] = step{key: j}
		key := w.b[kh.Off:kh.End()]
		sub := n.extra
		p, declared := n.props[string(key)]
		switch {
		case declared:
			sub = p.n
			if p.bit >= 0 {
				have |= 1 << p.bit
			}
		case n.closed:
			return 0, w.fault(d+1, "no such property (the schema allows only "+n.propList()+")", "a value")
		}
		var f *Fault
		if j, f = w.value(sub, kh.End(), d+1); f != nil {
			return 0, f
		}
	}
	if want := uint64(1)<<len(n.required) - 1; have != want {
		for bit, name := range n.required {
			if have&(1<<bit) == 0 {
				return 0, w.missing(d, name)
			}
		}
	}
	return j, nil
}

// kindOf is the JSON type of a value, as a bit; a float with no fraction
// is an integer too (JSON Schema counts 1.0 as an integer).
func (w *walker) kindOf(h msgpk.Head) uint8 {
	switch h.Kind {
	case msgpk.Nil:
		return tNull
	case msgpk.True, msgpk.False:
		return tBool
	case msgpk.Uint, msgpk.NegInt:
		return tInteger
	case msgpk.Float32, msgpk.Float64:
		if f := floatOf(h); f == math.Trunc(f) {
			return tInteger
		}
		return tNumber
	case msgpk.Str:
		return tString
	case msgpk.Array:
		return tArray
	case msgpk.Map:
		return tObject
	}
	return 0
}

func floatOf(h msgpk.Head) float64 {
	if h.Kind == msgpk.Float32 {
		return float64(math.Float32frombits(uint32(h.V)))
	}
	return math.Float64frombits(h.V)
}

// compare compares the number of h with f: -1, 0 or 1, exactly for integers
// beyond 2^53 too.
func compare(h msgpk.Head, f float64) int {
	switch h.Kind {
	case msgpk.Uint:
		if f < 0 {
			return 1
		}
		if f >= 1<<64 {
			return -1
		}
		if f == math.Trunc(f) {
			return cmp.Compare(h.V, uint64(f))
		}
		if x := float64(h.V); x < f {
			return -1
		}
		return 1
	case msgpk.NegInt:
		v := int64(h.V)
		if f >= 0 {
			return -1
		}
		if f < -(1 << 63) {
			return 1
		}
		if f == math.Trunc(f) {
			return cmp.Compare(v, int64(f))
		}
		if float64(v) < f {
			return -1
		}
		return 1
	}
	x := floatOf(h)
	switch {
	case x < f:
		return -1
	case x > f:
		return 1
	}
	return 0
}

func (w *walker) checkNumber(n *node, h msgpk.Head, d int) *Fault {
	if n.hasMin {
		if c := compare(h, n.min); c < 0 || c == 0 && n.exMin {
			return w.fault(d, "a number "+map[bool]string{false: ">= ", true: "> "}[n.exMin]+fmtNum(n.min), w.describe(h))
		}
	}
	if n.hasMax {
		if c := compare(h, n.max); c > 0 || c == 0 && n.exMax {
			return w.fault(d, "a number "+map[bool]string{false: "<= ", true: "< "}[n.exMax]+fmtNum(n.max), w.describe(h))
		}
	}
	return nil
}

func (w *walker) inEnum(enum []scalar, h msgpk.Head, kind uint8) bool {
	for _, e := range enum {
		switch {
		case e.kind == tNull && kind == tNull:
			return true
		case e.kind == tBool && kind == tBool && e.b == (h.Kind == msgpk.True):
			return true
		case e.kind == tString && kind == tString && string(w.b[h.Off:h.End()]) == e.s:
			return true
		case e.kind == tNumber && kind&(tInteger|tNumber) != 0 && compare(h, e.f) == 0:
			return true
		}
	}
	return false
}

// fault names the value at depth d.
func (w *walker) fault(d int, want, got string) *Fault {
	return &Fault{Path: w.pointer(d), Want: want, Got: got}
}

// missing names the absent required property name of the object at d.
func (w *walker) missing(d int, name string) *Fault {
	return &Fault{Path: string(pointer.AppendToken([]byte(w.pointer(d)), name)), Want: "a value (the property is required)", Got: "none"}
}

func (w *walker) pointer(d int) string {
	var p []byte
	for k := 1; k <= d; k++ {
		s := w.path[k]
		if s.key < 0 {
			p = pointer.AppendToken(p, strconv.Itoa(s.index))
			continue
		}
		kh, _ := msgpk.ReadHead(w.b, s.key)
		p = pointer.AppendToken(p, string(w.b[kh.Off:kh.End()]))
	}
	return string(p)
}

// describe says what a value is, briefly, for a fault.
func (w *walker) describe(h msgpk.Head) string {
	switch h.Kind {
	case msgpk.Nil:
		return "null"
	case msgpk.True:
		return "true"
	case msgpk.False:
		return "false"
	case msgpk.Uint:
		return strconv.FormatUint(h.V, 10)
	case msgpk.NegInt:
		return strconv.FormatInt(int64(h.V), 10)
	case msgpk.Float32, msgpk.Float64:
		return fmtNum(floatOf(h))
	case msgpk.Str:
		return "a string"
	case msgpk.Array:
		return "an array"
	case msgpk.Map:
		return "an object"
	}
	return "a value"
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func typeNames(t uint8) string {
	var names []string
	for _, x := range []struct {
		bit  uint8
		name string
	}{{tNull, "null"}, {tBool, "a boolean"}, {tNumber, "a number"}, {tString, "a string"}, {tArray, "an array"}, {tObject, "an object"}} {
		if t&x.bit != 0 {
			names = append(names, x.name)
		}
	}
	if t&tNumber == 0 && t&tInteger != 0 {
		names = append(names, "an integer")
	}
	return strings.Join(names, " or ")
}

func (n *node) enumText() string {
	var parts []string
	for i, e := range n.enum {
		if i == 8 {
			parts = append(parts, "…")
			break
		}
		switch e.kind {
		case tNull:
			parts = append(parts, "null")
		case tBool:
			parts = append(parts, strconv.FormatBool(e.b))
		case tNumber:
			parts = append(parts, fmtNum(e.f))
		default:
			parts = append(parts, strconv.Quote(e.s))
		}
	}
	if n.hasConst {
		return "the constant " + parts[0]
	}
	return "one of " + strings.Join(parts, ", ")
}

func (n *node) propList() string {
	var names []string
	for name := range n.props {
		names = append(names, strconv.Quote(name))
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func span(lo, hi int) string {
	switch {
	case lo >= 0 && hi >= 0:
		return strconv.Itoa(lo) + ".." + strconv.Itoa(hi)
	case lo >= 0:
		return "at least " + strconv.Itoa(lo)
	}
	return "at most " + strconv.Itoa(hi)
}
