package codegen

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// The type plan: a language-neutral reading of JSON Schema (draft-07 and
// 2020-12, as MCP servers write them) into records, enums, unions, lists,
// maps and scalars. The emitters (emit_*.go) turn it into declarations;
// nothing here knows a target language. Planning is total and bounded: an
// unreadable or oversized part of a schema becomes an untyped value with a
// reason, and only that part.

// Bounds on planning one schema.
const (
	maxSchemaBytes = 1 << 20 // one tool's inputSchema or outputSchema
	maxSchemaDepth = 64      // JSON nesting of one schema
	maxSchemaNodes = 1 << 16 // JSON values in one schema
	maxFields      = 128     // properties of one record
	maxTypeDepth   = 24      // nested types below a tool's arguments
	maxDefs        = 256     // named types planned for one schema
	maxRefHops     = 16      // $ref indirections followed in a row
	maxEnumValues  = 256     // values of one enum
	maxVariants    = 16      // variants of one union
	maxNoteRunes   = 60      // a default, pattern or format note
	maxPlanSteps   = 1 << 14 // schemas visited while planning one schema
)

// kind is the shape of a type.
type kind uint8

const (
	kAny     kind = iota // any JSON value; typ.reason says why
	kString              // a string
	kInteger             // an integer; typ.unsigned when it may exceed int64
	kNumber              // a number
	kBoolean             // true or false
	kList                // a JSON array of typ.elem
	kMap                 // a JSON object whose values are typ.elem
	kNamed               // typ.def: a record, enum or union
)

// typ is one use of a type.
type typ struct {
	kind     kind
	elem     *typ     // kList, kMap
	def      *typeDef // kNamed
	nullable bool     // null is also a value
	unsigned bool     // kInteger: values beyond int64 occur (minimum ≥ 0, maximum or enum past 2^63−1)
	reason   string   // kAny: why the value is untyped
}

// defKind is what a named type is.
type defKind uint8

const (
	dRecord defKind = iota // an object with known properties
	dEnum                  // a closed set of string or integer values
	dUnion                 // one of several variants
)

// typeDef is a named type. Its name is the emitter's choice, built from
// hint: the words of the path from the tool to the type (property names,
// "item", a $defs key), which keeps names stable and readable.
type typeDef struct {
	kind defKind
	hint []string
	doc  string // the schema's description, raw server text
	// dRecord
	fields []field
	// dEnum: base is kString or kInteger
	base     kind
	unsigned bool
	values   []enumValue
	// dUnion
	variants []variant
	// discriminator is the wire name of the property whose constant tells
	// the record variants apart, or "" when there is none.
	discriminator string
	// decidable says a decoder can tell the variants apart: by the
	// discriminator, or because their JSON kinds differ.
	decidable bool
}

// field is one property of a record.
type field struct {
	wire     string // sent verbatim
	typ      typ
	required bool
	doc      string   // raw server text
	notes    []string // default, range, format and pattern, each raw server text
}

// enumValue is one value of an enum: its JSON literal and, for strings,
// the string.
type enumValue struct {
	lit string // JSON text: "\"open\"", "42"
	str string // the decoded string, for a string enum
}

// variant is one alternative of a union.
type variant struct {
	typ typ
	tag string // the discriminator's JSON literal, or ""
}

// toolPlan is the plan of one tool. args is nil when the input schema
// cannot be read as an object with properties; whole then says why, and
// the tool takes its arguments as one untyped object, which optional
// says a call may leave out (the schema declares and requires nothing).
type toolPlan struct {
	tool     *Tool
	args     *typeDef
	whole    string
	optional bool
	output   *typ // nil: no output schema
	defs     []*typeDef
}

// planner plans the schemas of one tool.
type planner struct {
	root  *node
	defs  []*typeDef
	byRef map[*node]*typeDef // planned $ref targets, the cycle guard
	busy  map[*node]bool     // $ref targets being planned that are not records
	steps int                // plan calls so far, against maxPlanSteps
}

// planTool plans a tool's input and output schemas.
func planTool(t *Tool) toolPlan {
	tp := toolPlan{tool: t}
	in := &planner{byRef: map[*node]*typeDef{}, busy: map[*node]bool{}}
	tp.args, tp.whole, tp.optional = in.planArgs(t.InputSchema)
	tp.defs = in.defs
	if len(t.OutputSchema) > 0 {
		out := &planner{byRef: map[*node]*typeDef{}, busy: map[*node]bool{}}
		o := out.planRoot(t.OutputSchema, "output")
		tp.output = &o
		tp.defs = append(tp.defs, out.defs...)
	}
	return tp
}

// readRoot parses a schema within the bounds.
func readRoot(raw json.RawMessage) (*node, string) {
	if len(raw) > maxSchemaBytes {
		return nil, fmt.Sprintf("schema is larger than %d bytes", maxSchemaBytes)
	}
	root, err := parseTree(raw, maxSchemaDepth, maxSchemaNodes)
	if err != nil {
		return nil, "schema is unreadable: " + err.Error()
	}
	return root, ""
}

// planArgs plans an inputSchema as the record of a tool's arguments, or
// says why it takes them whole and whether they may be left out.
//
// A schema that declares no properties and requires none is two things
// in practice. Closed (additionalProperties false), or with properties
// declared empty, it is a tool without arguments: an empty record, so
// the function takes none. Otherwise ({"type": "object"}, or a schema
// for undeclared keys) it constrains nothing a signature could say: the
// arguments are taken whole, and may be left out, so the call with none
// needs no placeholder.
func (p *planner) planArgs(raw json.RawMessage) (*typeDef, string, bool) {
	root, why := readRoot(raw)
	if why != "" {
		return nil, "input " + why, false
	}
	p.root = root
	if root.kind != kindObject {
		return nil, "input schema is not a JSON object", false
	}
	if t := root.get("type"); t != nil && !(t.kind == kindString && t.str == "object") {
		return nil, `input schema's type is not "object"`, false
	}
	s := root
	if all := root.get("allOf"); all != nil {
		merged, why := p.mergeAllOf(root)
		if why != "" {
			return nil, "input schema's allOf: " + why, false
		}
		s = merged
	}
	for _, k := range []string{"$ref", "anyOf", "oneOf", "not", "if"} {
		if root.get(k) != nil {
			return nil, "input schema uses " + k + " at the top level", false
		}
	}
	r := s.get("required")
	if r != nil && !stringArray(r) {
		return nil, "input schema's required is not an array of strings", false
	}
	requires := r != nil && len(r.elems) > 0
	props := s.get("properties")
	ap := s.get("additionalProperties")
	closed := ap != nil && ap.kind == kindBool && !ap.b
	undeclared := ap != nil && ap.kind == kindObject || s.get("patternProperties") != nil
	switch {
	case props == nil && closed && !requires:
		props = &node{kind: kindObject}
	case props == nil:
		return nil, "input schema declares no properties", !requires
	case props.kind != kindObject:
		return nil, "input schema's properties is not an object", false
	case len(props.keys) == 0 && undeclared && !requires:
		return nil, "input schema declares no properties", true
	}
	if len(props.keys) > maxFields {
		return nil, fmt.Sprintf("input schema declares more than %d properties", maxFields), false
	}
	d := &typeDef{kind: dRecord, hint: []string{"args"}}
	p.defs = append(p.defs, d)
	p.fillRecord(d, s, nil, 0)
	return d, "", false
}

// planRoot plans a whole schema (an outputSchema) as one type.
func (p *planner) planRoot(raw json.RawMessage, hint string) typ {
	root, why := readRoot(raw)
	if why != "" {
		return anyType(why)
	}
	p.root = root
	return p.plan(root, []string{hint}, 0)
}

func anyType(reason string) typ { return typ{kind: kAny, reason: reason} }

func stringArray(n *node) bool {
	if n.kind != kindArray {
		return false
	}
	for _, e := range n.elems {
		if e.kind != kindString {
			return false
		}
	}
	return true
}

// fillRecord plans the properties of object schema s into d. Required
// properties come first in property order, then those required but not
// declared (still required, so still fields), then the optional ones.
// Its fields' types are named under base.
func (p *planner) fillRecord(d *typeDef, s *node, base []string, depth int) {
	if desc := s.get("description"); desc != nil && desc.kind == kindString && d.doc == "" {
		d.doc = desc.str
	}
	var required []string
	if r := s.get("required"); r != nil && stringArray(r) {
		for _, e := range r.elems {
			if !slices.Contains(required, e.str) && len(required) < maxFields {
				required = append(required, e.str)
			}
		}
	}
	props := s.get("properties")
	if props == nil || props.kind != kindObject {
		props = &node{kind: kindObject}
	}
	add := func(name string, prop *node, req bool) {
		f := field{wire: name, required: req}
		if prop == nil {
			f.typ = anyType("required but not declared in properties")
		} else {
			target, _ := p.deref(prop)
			f.doc, f.notes = describeSchema(prop, target)
			f.typ = p.plan(prop, append(slices.Clip(base), name), depth+1)
		}
		d.fields = append(d.fields, f)
	}
	for i, name := range props.keys {
		if slices.Contains(required, name) {
			add(name, props.vals[i], true)
		}
	}
	for _, name := range required {
		if props.get(name) == nil {
			add(name, nil, true)
		}
	}
	for i, name := range props.keys {
		if !slices.Contains(required, name) {
			add(name, props.vals[i], false)
		}
	}
}

// describeSchema reads a property's description and its notes: default,
// range, length, format and pattern, as documentation. The description of
// the property itself wins over its $ref target's.
func describeSchema(prop, target *node) (string, []string) {
	var doc string
	for _, s := range []*node{prop, target} {
		if d := s.get("description"); d != nil && d.kind == kindString && doc == "" {
			doc = d.str
		}
	}
	var notes []string
	note := func(label, key string) {
		for _, s := range []*node{prop, target} {
			if v := s.get(key); v != nil {
				if v.kind == kindNumber && (v.str == "9007199254740991" || v.str == "-9007199254740991") {
					return // JavaScript's safe-integer bound, which schema libraries add to every integer
				}
				notes = append(notes, label+" "+cleanText(literal(v), maxNoteRunes))
				return
			}
		}
	}
	note("default", "default")
	note("minimum", "minimum")
	note("maximum", "maximum")
	note("exclusive minimum", "exclusiveMinimum")
	note("exclusive maximum", "exclusiveMaximum")
	note("min length", "minLength")
	note("max length", "maxLength")
	note("min items", "minItems")
	note("max items", "maxItems")
	note("format", "format")
	note("pattern", "pattern")
	return doc, notes
}

// literal is the compact JSON text of n.
func literal(n *node) string {
	var b strings.Builder
	writeLiteral(&b, n, 0)
	return b.String()
}

func writeLiteral(b *strings.Builder, n *node, depth int) {
	if b.Len() > 4*maxNoteRunes || depth > 8 {
		b.WriteString("…")
		return
	}
	switch n.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		fmt.Fprint(b, n.b)
	case kindNumber:
		b.WriteString(n.str)
	case kindString:
		s, _ := json.Marshal(n.str)
		b.Write(s)
	case kindArray:
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			writeLiteral(b, e, depth+1)
		}
		b.WriteByte(']')
	case kindObject:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			s, _ := json.Marshal(k)
			b.Write(s)
			b.WriteByte(':')
			writeLiteral(b, n.vals[i], depth+1)
		}
		b.WriteByte('}')
	}
}

// deref follows local $refs from s and returns the schema reached, or why
// it cannot be followed.
func (p *planner) deref(s *node) (*node, string) {
	for range maxRefHops {
		if s.kind != kindObject {
			return s, ""
		}
		ref := s.get("$ref")
		if ref == nil {
			return s, ""
		}
		if ref.kind != kindString || !strings.HasPrefix(ref.str, "#") {
			return s, "$ref is not local"
		}
		target := pointer(p.root, ref.str[1:])
		if target == nil {
			return s, "$ref points nowhere"
		}
		s = target
	}
	return s, fmt.Sprintf("$ref chain longer than %d", maxRefHops)
}

// plan plans the schema s used at the path hint.
func (p *planner) plan(s *node, hint []string, depth int) typ {
	// References to non-record schemas are planned at each use, so a
	// schema can fan out exponentially; a step budget bounds the work.
	p.steps++
	if p.steps > maxPlanSteps {
		return anyType("schema too complex to plan")
	}
	if depth > maxTypeDepth {
		return anyType(fmt.Sprintf("nested more than %d types deep", maxTypeDepth))
	}
	if len(p.defs) >= maxDefs {
		return anyType(fmt.Sprintf("more than %d named types in one schema", maxDefs))
	}
	switch s.kind {
	case kindBool:
		if s.b {
			return anyType("schema accepts any value")
		}
		return anyType("schema accepts no value")
	case kindObject:
	default:
		return anyType("schema is not an object")
	}
	if ref := s.get("$ref"); ref != nil {
		return p.planRef(s, hint, depth)
	}
	if all := s.get("allOf"); all != nil {
		merged, why := p.mergeAllOf(s)
		if why != "" {
			return anyType("allOf: " + why)
		}
		return p.plan(merged, hint, depth)
	}
	for _, k := range []string{"not", "if", "then", "else", "dependentSchemas", "dependencies"} {
		if s.get(k) != nil {
			return anyType("uses " + k)
		}
	}
	if one := firstOf(s, "oneOf", "anyOf"); one != nil {
		return p.planUnion(s, one, hint, depth)
	}
	if e := s.get("enum"); e != nil {
		return p.planEnum(s, e, hint)
	}
	if c := s.get("const"); c != nil {
		return p.planEnum(s, &node{kind: kindArray, elems: []*node{c}}, hint)
	}
	t := s.get("type")
	if t == nil {
		switch {
		case s.get("properties") != nil:
			return p.planObject(s, hint, depth)
		case s.get("items") != nil:
			return p.planArray(s, hint, depth)
		}
		return anyType("no type")
	}
	if t.kind == kindArray {
		return p.planTypeArray(s, t, hint, depth)
	}
	if t.kind != kindString {
		return anyType("type is not a string")
	}
	return p.planTyped(s, t.str, hint, depth)
}

func firstOf(s *node, keys ...string) *node {
	for _, k := range keys {
		if v := s.get(k); v != nil {
			return v
		}
	}
	return nil
}

// planTyped plans s under one JSON type name.
func (p *planner) planTyped(s *node, name string, hint []string, depth int) typ {
	switch name {
	case "string":
		return typ{kind: kString}
	case "integer":
		return typ{kind: kInteger, unsigned: beyondInt64(s)}
	case "number":
		return typ{kind: kNumber}
	case "boolean":
		return typ{kind: kBoolean}
	case "array":
		return p.planArray(s, hint, depth)
	case "object":
		return p.planObject(s, hint, depth)
	case "null":
		return typ{kind: kAny, nullable: true, reason: "always null"}
	}
	return anyType("unknown type " + quoteNote(name))
}

// beyondInt64 reports an integer schema whose range is non-negative and
// reaches past 2^63−1, which a signed 64-bit integer cannot carry.
func beyondInt64(s *node) bool {
	lo, hi := s.get("minimum"), s.get("maximum")
	if lo == nil || hi == nil || lo.kind != kindNumber || hi.kind != kindNumber {
		return false
	}
	l, okL := new(big.Float).SetString(lo.str)
	h, okH := new(big.Float).SetString(hi.str)
	limit := new(big.Float).SetUint64(1<<63 - 1)
	return okL && okH && l.Sign() >= 0 && h.Cmp(limit) > 0
}

// planTypeArray plans "type": [...]: "null" makes the type nullable; one
// other name is that type; several are a union of them.
func (p *planner) planTypeArray(s, t *node, hint []string, depth int) typ {
	var names []string
	nullable := false
	for _, e := range t.elems {
		if e.kind != kindString {
			return anyType("type array holds a non-string")
		}
		if e.str == "null" {
			nullable = true
		} else if !slices.Contains(names, e.str) {
			names = append(names, e.str)
		}
	}
	var out typ
	switch len(names) {
	case 0:
		return typ{kind: kAny, nullable: true, reason: "always null"}
	case 1:
		out = p.planTyped(s, names[0], hint, depth)
	default:
		if len(names) > maxVariants {
			return anyType("too many types")
		}
		d := &typeDef{kind: dUnion, hint: hint}
		p.defs = append(p.defs, d)
		for _, n := range names {
			d.variants = append(d.variants, variant{typ: p.planTyped(s, n, append(slices.Clip(hint), n), depth+1)})
		}
		d.decidable = true // distinct JSON type names are distinct kinds
		out = typ{kind: kNamed, def: d}
	}
	out.nullable = out.nullable || nullable
	return out
}

// planRef plans a local $ref. A record target is planned once per schema
// and shared, which is also how recursive types work: the record is
// registered before its fields are planned.
func (p *planner) planRef(s *node, hint []string, depth int) typ {
	ref := s.get("$ref")
	if ref.kind != kindString || !strings.HasPrefix(ref.str, "#") {
		return anyType("$ref is not local")
	}
	target := pointer(p.root, ref.str[1:])
	if target == nil {
		return anyType("$ref points nowhere")
	}
	if d, ok := p.byRef[target]; ok {
		return typ{kind: kNamed, def: d}
	}
	if p.busy[target] {
		return anyType("$ref cycle through a non-object schema")
	}
	refHint := hint
	if i := strings.LastIndexByte(ref.str, '/'); i >= 0 && i+1 < len(ref.str) {
		refHint = []string{unescapeToken(ref.str[i+1:])}
	}
	if target.kind == kindObject && isRecordSchema(target) {
		d := &typeDef{kind: dRecord, hint: refHint}
		p.defs = append(p.defs, d)
		p.byRef[target] = d
		p.fillRecord(d, target, refHint, depth)
		return typ{kind: kNamed, def: d}
	}
	p.busy[target] = true
	t := p.plan(target, refHint, depth+1)
	delete(p.busy, target)
	if t.kind == kNamed && t.def.kind != dRecord {
		p.byRef[target] = t.def
	}
	return t
}

func unescapeToken(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// isRecordSchema reports a plain object schema with properties.
func isRecordSchema(s *node) bool {
	if s.get("properties") == nil || firstOf(s, "$ref", "allOf", "anyOf", "oneOf", "not", "if", "enum", "const") != nil {
		return false
	}
	t := s.get("type")
	return t == nil || t.kind == kindString && t.str == "object"
}

// planObject plans an object schema: a record when it lists properties,
// a map when it only constrains additionalProperties, an untyped object
// otherwise.
func (p *planner) planObject(s *node, hint []string, depth int) typ {
	props := s.get("properties")
	if props != nil && props.kind == kindObject && len(props.keys) > 0 {
		if len(props.keys) > maxFields {
			return typ{kind: kMap, elem: &typ{kind: kAny, reason: "record too wide"}}
		}
		d := &typeDef{kind: dRecord, hint: hint}
		p.defs = append(p.defs, d)
		p.fillRecord(d, s, hint, depth)
		return typ{kind: kNamed, def: d}
	}
	if ap := s.get("additionalProperties"); ap != nil && ap.kind == kindObject {
		elem := p.plan(ap, append(slices.Clip(hint), "value"), depth+1)
		return typ{kind: kMap, elem: &elem}
	}
	return typ{kind: kMap, elem: &typ{kind: kAny, reason: "open object"}}
}

// planArray plans an array schema: a list of its items' type.
func (p *planner) planArray(s *node, hint []string, depth int) typ {
	items := s.get("items")
	if items == nil {
		if s.get("prefixItems") != nil {
			return anyType("tuple (prefixItems)")
		}
		return typ{kind: kList, elem: &typ{kind: kAny, reason: "array items are unconstrained"}}
	}
	if items.kind == kindArray {
		return anyType("tuple (items is an array)")
	}
	elem := p.plan(items, itemHint(hint), depth+1)
	return typ{kind: kList, elem: &elem}
}

// itemHint names the items of a list after its property: "entities" →
// "entity", "tags" → "tag", otherwise "<name> item".
func itemHint(hint []string) []string {
	last := hint[len(hint)-1]
	sing := singular(last)
	out := slices.Clone(hint[:len(hint)-1])
	if sing == last {
		return append(out, last, "item")
	}
	return append(out, sing)
}

func singular(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// planEnum plans enum (or a const as a one-value enum): all strings is a
// string enum; all integers an integer enum; null among them makes it
// nullable; one boolean value is a boolean. Anything else is untyped,
// with the values listed in the reason.
func (p *planner) planEnum(s, e *node, hint []string) typ {
	if e.kind != kindArray || len(e.elems) == 0 {
		return anyType("enum is not a non-empty array")
	}
	if len(e.elems) > maxEnumValues {
		return anyType(fmt.Sprintf("enum of more than %d values", maxEnumValues))
	}
	d := &typeDef{kind: dEnum, hint: hint}
	if desc := s.get("description"); desc != nil && desc.kind == kindString {
		d.doc = desc.str
	}
	nullable, strs, ints, bools := false, 0, 0, 0
	for _, v := range e.elems {
		switch {
		case v.kind == kindNull:
			nullable = true
			continue
		case v.kind == kindString:
			strs++
		case v.kind == kindNumber && isIntegerLiteral(v.str):
			ints++
		case v.kind == kindBool:
			bools++
		default:
			return anyType("enum of mixed values: " + enumList(e))
		}
		lit := literal(v)
		if slices.ContainsFunc(d.values, func(x enumValue) bool { return x.lit == lit }) {
			continue
		}
		d.values = append(d.values, enumValue{lit: lit, str: v.str})
	}
	n := len(d.values)
	switch {
	case n == 0:
		return typ{kind: kAny, nullable: true, reason: "always null"}
	case strs == n:
		d.base = kString
	case ints == n:
		d.base = kInteger
		for _, v := range d.values {
			if !fitsInt64(v.lit) {
				if !fitsUint64(v.lit) {
					return anyType("integer enum beyond 64 bits: " + enumList(e))
				}
				d.unsigned = true
			}
		}
		if d.unsigned && slices.ContainsFunc(d.values, func(v enumValue) bool { return strings.HasPrefix(v.lit, "-") }) {
			return anyType("integer enum spans more than 64 bits: " + enumList(e))
		}
	case bools == n:
		return typ{kind: kBoolean, nullable: nullable}
	default:
		return anyType("enum of mixed values: " + enumList(e))
	}
	p.defs = append(p.defs, d)
	return typ{kind: kNamed, def: d, nullable: nullable}
}

// isIntegerLiteral reports a JSON number literal without fraction or
// exponent.
func isIntegerLiteral(s string) bool { return !strings.ContainsAny(s, ".eE") }

func fitsInt64(lit string) bool {
	n, ok := new(big.Int).SetString(lit, 10)
	return ok && n.IsInt64()
}

func fitsUint64(lit string) bool {
	n, ok := new(big.Int).SetString(lit, 10)
	return ok && n.IsUint64()
}

func enumList(e *node) string {
	var parts []string
	for i, v := range e.elems {
		if i == 8 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, literal(v))
	}
	return cleanText(strings.Join(parts, ", "), maxParamNote)
}

// planUnion plans oneOf/anyOf. Null variants make the type nullable; one
// remaining variant is that type; otherwise a union whose variants are
// planned in order. It is decidable when every variant is a record with a
// shared property holding a distinct constant (the discriminator), or when
// the variants' JSON kinds differ (string or list, object or array).
func (p *planner) planUnion(s, alts *node, hint []string, depth int) typ {
	if alts.kind != kindArray || len(alts.elems) == 0 {
		return anyType("oneOf/anyOf is not a non-empty array")
	}
	if len(alts.elems) > maxVariants {
		return anyType(fmt.Sprintf("union of more than %d variants", maxVariants))
	}
	var schemas []*node
	nullable := false
	for _, a := range alts.elems {
		target, _ := p.deref(a)
		if t := target.get("type"); t != nil && t.kind == kindString && t.str == "null" {
			nullable = true
			continue
		}
		schemas = append(schemas, a)
	}
	// Sibling keywords (a shared "type" or "properties") are merged into
	// each variant only as far as a shared description goes; the variants
	// carry the structure.
	if len(schemas) == 0 {
		return typ{kind: kAny, nullable: true, reason: "always null"}
	}
	if vals := constValues(p, schemas); vals != nil {
		t := p.planEnum(s, &node{kind: kindArray, elems: vals}, hint)
		t.nullable = t.nullable || nullable
		return t
	}
	if len(schemas) == 1 {
		t := p.plan(schemas[0], hint, depth+1)
		t.nullable = t.nullable || nullable
		return t
	}
	d := &typeDef{kind: dUnion, hint: hint}
	if desc := s.get("description"); desc != nil && desc.kind == kindString {
		d.doc = desc.str
	}
	p.defs = append(p.defs, d)
	disc := discriminator(p, schemas)
	typeNames := map[string]int{}
	for _, a := range schemas {
		target, _ := p.deref(a)
		if t := target.get("type"); t != nil && t.kind == kindString {
			typeNames[t.str]++
		}
	}
	shapes := map[string]bool{}
	for i, a := range schemas {
		v := variant{}
		vh := append(slices.Clip(hint), fmt.Sprintf("variant%d", i+1))
		target, _ := p.deref(a)
		if disc != "" {
			c := constOf(target.get("properties").get(disc))
			v.tag = literal(c)
			if c.kind == kindString {
				vh = append(slices.Clip(hint), c.str)
			}
		} else if t := target.get("type"); t != nil && t.kind == kindString {
			vh = append(slices.Clip(hint), t.str)
			if typeNames[t.str] > 1 {
				vh = append(slices.Clip(hint), fmt.Sprintf("%s%d", t.str, i+1))
			}
		}
		v.typ = p.plan(a, vh, depth+1) // a $ref variant is named by its target
		if v.typ.kind == kAny {
			// One unreadable variant makes the whole value untyped; the
			// variants are still spelled out in its reason.
			p.defs = slices.DeleteFunc(p.defs, func(x *typeDef) bool { return x == d })
			return typ{kind: kAny, nullable: nullable, reason: "union with an untyped variant (" + v.typ.reason + ")"}
		}
		if v.typ.kind == kNamed && v.typ.def.kind == dUnion {
			p.defs = slices.DeleteFunc(p.defs, func(x *typeDef) bool { return x == d })
			return typ{kind: kAny, nullable: nullable, reason: "union nested in a union"}
		}
		if v.typ.kind == kNamed && slices.ContainsFunc(d.variants, func(x variant) bool { return x.typ.def == v.typ.def }) {
			continue // the same type twice is one variant
		}
		shapes[shapeOf(v.typ)] = true
		d.variants = append(d.variants, v)
	}
	d.discriminator = disc
	d.decidable = disc != "" || len(shapes) == len(d.variants)
	return typ{kind: kNamed, def: d, nullable: nullable}
}

// constValues returns the values of a union whose every variant is a
// constant or an enum (the "oneOf of const with titles" idiom), or nil.
func constValues(p *planner, schemas []*node) []*node {
	var vals []*node
	for _, a := range schemas {
		target, _ := p.deref(a)
		if c := target.get("const"); c != nil {
			vals = append(vals, c)
			continue
		}
		e := target.get("enum")
		if e == nil || e.kind != kindArray || target.get("properties") != nil {
			return nil
		}
		vals = append(vals, e.elems...)
	}
	return vals
}

// discriminator finds a property every variant declares with a distinct
// constant (const, or a one-value enum) of the same JSON kind.
func discriminator(p *planner, schemas []*node) string {
	first, _ := p.deref(schemas[0])
	props := first.get("properties")
	if props == nil || props.kind != kindObject {
		return ""
	}
	for _, name := range props.keys {
		seen := map[string]bool{}
		ok := true
		for _, a := range schemas {
			target, _ := p.deref(a)
			c := constOf(target.get("properties").get(name))
			if c == nil || seen[literal(c)] {
				ok = false
				break
			}
			seen[literal(c)] = true
		}
		if ok {
			return name
		}
	}
	return ""
}

func constOf(s *node) *node {
	if c := s.get("const"); c != nil && (c.kind == kindString || c.kind == kindNumber) {
		return c
	}
	if e := s.get("enum"); e != nil && e.kind == kindArray && len(e.elems) == 1 && (e.elems[0].kind == kindString || e.elems[0].kind == kindNumber) {
		return e.elems[0]
	}
	return nil
}

// shapeOf is the JSON kind a value of t arrives as.
func shapeOf(t typ) string {
	switch t.kind {
	case kString:
		return "string"
	case kInteger, kNumber:
		return "number"
	case kBoolean:
		return "boolean"
	case kList:
		return "array"
	case kMap:
		return "object"
	case kNamed:
		switch t.def.kind {
		case dRecord:
			return "object"
		case dEnum:
			if t.def.base == kString {
				return "string"
			}
			return "number"
		}
		return "union"
	}
	return "any"
}

// mergeAllOf merges an allOf of object schemas (and the schema's own
// properties) into one object schema: properties in order, the first
// declaration of a name winning, required the union.
func (p *planner) mergeAllOf(s *node) (*node, string) {
	all := s.get("allOf")
	if all.kind != kindArray {
		return nil, "not an array"
	}
	merged := &node{kind: kindObject}
	props := &node{kind: kindObject}
	req := &node{kind: kindArray}
	parts := append([]*node{s}, all.elems...)
	if len(parts) > maxVariants {
		return nil, "too many members"
	}
	for i, part := range parts {
		target, why := p.deref(part)
		if why != "" {
			return nil, why
		}
		if target.kind != kindObject {
			return nil, "a member is not an object schema"
		}
		if i > 0 {
			if firstOf(target, "allOf", "anyOf", "oneOf", "not", "if", "enum", "const") != nil {
				return nil, "a member is not a plain object schema"
			}
			if t := target.get("type"); t != nil && !(t.kind == kindString && t.str == "object") {
				return nil, "a member is not an object schema"
			}
		}
		if pr := target.get("properties"); pr != nil && pr.kind == kindObject {
			// Full, the merge looks no further: a wide member's keys
			// would each be looked up among maxFields for nothing.
			for j, k := range pr.keys {
				if len(props.keys) == maxFields {
					break
				}
				if props.get(k) == nil {
					props.keys = append(props.keys, k)
					props.vals = append(props.vals, pr.vals[j])
				}
			}
		}
		if r := target.get("required"); r != nil && stringArray(r) {
			req.elems = append(req.elems, r.elems...)
		}
		if d := target.get("description"); d != nil && merged.get("description") == nil {
			merged.keys = append(merged.keys, "description")
			merged.vals = append(merged.vals, d)
		}
	}
	merged.keys = append(merged.keys, "type", "properties", "required")
	merged.vals = append(merged.vals, &node{kind: kindString, str: "object"}, props, req)
	return merged, ""
}

// quoteNote quotes server text for a reason or note.
func quoteNote(s string) string { return fmt.Sprintf("%q", cleanText(s, maxNameNote)) }

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
