package codegen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The Go emitter. It turns the plans into one source file that imports only
// goImports and declares, per tool, one function taking one arguments
// struct (so arguments are named and cannot be swapped), the records, enums
// and unions of its schemas, and, when the tool declares an output schema,
// its output type and a typed accessor.

// capwireImport is the package every façade calls (the capwire client
// contract: capwire.Shared, (*capwire.Client).Call, (*capwire.Result).Decode).
const capwireImport = "github.com/capbridge/capbridge/capwire"

// goImports is the import allowlist verification enforces.
var goImports = []string{"context", capwireImport}

// goPkgReserved are the names a package must never be: Go's keywords and
// predeclared identifiers, the packages a façade or the preamble's calls
// import (context, capwire, errors), the ones the language treats
// specially (init cannot be imported; unsafe and builtin), and the path
// elements the go command treats specially.
var goPkgReserved = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Fields(`
		break case chan const continue default defer else fallthrough for func go goto if import
		interface map package range return select struct switch type var
		any bool byte comparable complex64 complex128 error float32 float64 int int8 int16 int32
		int64 rune string uint uint8 uint16 uint32 uint64 uintptr true false iota nil
		append cap clear close complex copy delete imag len make max min new panic print println
		real recover
		context capwire errors init unsafe builtin main vendor internal testdata`) {
		m[s] = true
	}
	return m
}()

func isPkgReserved(s string) bool { return goPkgReserved[s] }

func notReserved(string) bool { return false }

// goFunc is one tool bound to Go names.
type goFunc struct {
	tp     *toolPlan
	name   string // the exported function
	args   string // the arguments type; "" when the tool takes none or whole
	decode string // the output accessor; "" without an output schema
	out    string // the output's Go type
}

// goFile is the binding of a whole listing to Go names.
type goFile struct {
	server, pkg, digest string
	funcs               []*goFunc
	types               map[*typeDef]string   // every named type
	fields              map[*typeDef][]string // record field identifiers, parallel to fields
	consts              map[*typeDef][]string // enum constant identifiers, parallel to values
	wrappers            map[*typeDef][]string // union: per variant, its wrapper type, or ""
	opaque              map[*typeDef]string   // record that cannot be a struct, and why
	output              map[*typeDef]bool     // declared by an output schema
	cyclic              map[*typeDef]bool     // record reachable from itself through value fields
	taken               map[string]bool       // every top-level identifier
	order               []*typeDef            // declaration order
	shapes              map[string]*typeDef   // declared nested types by shapeSig
	alias               map[*typeDef]*typeDef // a type declared as an earlier one of the same shape
	sigs                map[*typeDef]string   // memoised shapeSig
	sigIDs              map[string]int        // a number per distinct signature
	owner               map[*typeDef]*goFunc
}

// goOutput is what the emitter hands back to Generate.
type goOutput struct {
	pkg    string
	source []byte
	file   *goFile
}

// emitGo binds names and, with source, writes the source and verifies it.
// The source is written as gofmt prints it, so it is not formatted again.
func emitGo(server, digest string, plans []toolPlan, source bool) (*goOutput, error) {
	f := newGoFile(server, digest)
	if err := f.bind(plans); err != nil {
		return nil, err
	}
	if !source {
		return &goOutput{pkg: f.pkg, file: f}, nil
	}
	src := f.write()
	if err := verifyGo(src, f.intent()); err != nil {
		return nil, err
	}
	return &goOutput{pkg: f.pkg, source: src, file: f}, nil
}

func newGoFile(server, digest string) *goFile {
	pkgs, _, _ := mangleAll([]string{server}, pkg, isPkgReserved, "mcp")
	return &goFile{server: server, pkg: pkgs[0], digest: digest,
		types: map[*typeDef]string{}, fields: map[*typeDef][]string{}, consts: map[*typeDef][]string{},
		wrappers: map[*typeDef][]string{}, opaque: map[*typeDef]string{}, output: map[*typeDef]bool{},
		cyclic: map[*typeDef]bool{}, taken: map[string]bool{}, owner: map[*typeDef]*goFunc{},
		shapes: map[string]*typeDef{}, alias: map[*typeDef]*typeDef{}, sigs: map[*typeDef]string{}, sigIDs: map[string]int{}}
}

// intent is what the file means to declare.
func (f *goFile) intent() intent {
	in := intent{pkg: f.pkg, funcs: map[string]bool{}, types: map[string]bool{}, consts: map[string]bool{}, methods: map[string]bool{}}
	for _, fn := range f.funcs {
		in.funcs[fn.name] = true
		if fn.decode != "" {
			in.funcs[fn.decode] = true
		}
	}
	for _, d := range f.order {
		in.types[f.types[d]] = true
		for _, c := range f.consts[d] {
			in.consts[c] = true
		}
		if d.kind == dUnion && !f.output[d] {
			for i, v := range d.variants {
				recv := f.wrappers[d][i]
				if recv == "" {
					recv = f.types[v.typ.def]
				}
				in.methods[recv+"."+marker(f.types[d])] = true
				if w := f.wrappers[d][i]; w != "" {
					in.types[w] = true
				}
			}
		}
	}
	return in
}

// marker is the unexported method that seals union type u.
func marker(u string) string { return "is" + u }

// bind names functions first, so that no helper type can take a tool's
// name, then every type of every tool in listing order.
func (f *goFile) bind(plans []toolPlan) error {
	wires := make([]string, len(plans))
	for i := range plans {
		wires[i] = plans[i].tool.Name
	}
	names, a, b := mangleAll(wires, exported, notReserved, "Tool")
	if a >= 0 {
		return &CollisionError{Ident: names[b], A: wires[a], B: wires[b]}
	}
	for i := range plans {
		fn := &goFunc{tp: &plans[i], name: names[i]}
		f.funcs = append(f.funcs, fn)
		f.taken[fn.name] = true
	}
	for _, fn := range f.funcs {
		tp := fn.tp
		stem, suffix := splitSuffix(fn.name)
		nIn := len(tp.defs)
		if tp.output != nil {
			nIn = slices.IndexFunc(tp.defs, func(d *typeDef) bool { return len(d.hint) > 0 && d.hint[0] == "output" })
			if nIn < 0 {
				nIn = len(tp.defs)
			}
		}
		for i, d := range tp.defs {
			if d == tp.args && len(d.fields) == 0 {
				continue // a tool without arguments has no arguments type
			}
			f.output[d] = i >= nIn
			// A nested type with the shape and documentation of one
			// declared before, by this tool or another, is that type: a
			// model passes one tool's results to the next, and the surface
			// declares each shape once.
			root := d == tp.args || tp.output != nil && tp.output.kind == kNamed && tp.output.def == d
			sig := ""
			if !root {
				sig = f.shapeSig(d)
			}
			if prev := f.shapes[sig]; prev != nil && sig != "" {
				f.types[d] = f.types[prev]
				f.alias[d] = prev
				continue
			}
			if sig != "" {
				f.shapes[sig] = d
			}
			if err := f.nameType(fn, d, stem, suffix); err != nil {
				return err
			}
		}
		if tp.args != nil && len(tp.args.fields) > 0 && f.opaque[tp.args] == "" {
			fn.args = f.types[tp.args]
		} else if tp.args != nil && f.opaque[tp.args] != "" {
			tp.whole, tp.args = f.opaque[tp.args], nil
		}
		if tp.output != nil {
			fn.out = f.expr(*tp.output, true)
			id, err := claim(f.taken, "Decode"+stem+suffix, tp.tool.Name+"\x00decode")
			if err != nil {
				return err
			}
			fn.decode = id
		}
	}
	for _, d := range f.order {
		if d.kind == dRecord {
			f.cyclic[d] = f.reaches(d, d, map[*typeDef]bool{})
		}
	}
	return nil
}

// canon is the declared type d stands for.
func (f *goFile) canon(d *typeDef) *typeDef {
	if a := f.alias[d]; a != nil {
		return a
	}
	return d
}

// shapeSig is the structure and documentation of a record or enum as a
// string: wire names, required-ness, types, descriptions and notes,
// recursively. It is "" — never shared — for anything holding a union
// (whose Go type differs between inputs and outputs) or a cycle. Results
// are memoised in f.sigs, so shared subtypes cost linear time.
func (f *goFile) shapeSig(d *typeDef) string {
	if s, ok := f.sigs[d]; ok {
		return s
	}
	f.sigs[d] = "" // while in progress: a cycle back to d is not shared
	var b strings.Builder
	switch d.kind {
	case dEnum:
		fmt.Fprintf(&b, "enum%d%v%q(", d.base, d.unsigned, d.doc)
		for _, v := range d.values {
			b.WriteString(strconv.Quote(v.lit) + ",")
		}
	case dRecord:
		fmt.Fprintf(&b, "record%q(", d.doc)
		for _, fl := range d.fields {
			t := f.typeSig(fl.typ)
			if t == "" {
				return ""
			}
			fmt.Fprintf(&b, "%q %v %s %q %q,", fl.wire, fl.required, t, fl.doc, fl.notes)
		}
	default:
		return ""
	}
	s := b.String() + ")"
	f.sigs[d] = s
	return s
}

func (f *goFile) typeSig(t typ) string {
	s := fmt.Sprintf("%d%v%v", t.kind, t.nullable, t.unsigned)
	switch t.kind {
	case kList, kMap:
		e := f.typeSig(*t.elem)
		if e == "" {
			return ""
		}
		return s + "[" + e + "]"
	case kNamed:
		d := f.shapeSig(t.def)
		if d == "" {
			return ""
		}
		// A subtype is named by the number of its signature, so a
		// signature's length is linear in its own fields, not in the
		// size of the tree of types below it.
		id, ok := f.sigIDs[d]
		if !ok {
			id = len(f.sigIDs)
			f.sigIDs[d] = id
		}
		return s + "#" + strconv.Itoa(id)
	}
	return s
}

// splitSuffix splits a digest suffix off an identifier, so helper types
// read CreateIssueArgs_1a2b3c4d rather than CreateIssue_1a2b3c4dArgs.
func splitSuffix(id string) (string, string) {
	if i := strings.LastIndexByte(id, '_'); i >= 0 {
		return id[:i], id[i:]
	}
	return id, ""
}

// nameType names d, its fields, constants and union wrappers.
func (f *goFile) nameType(fn *goFunc, d *typeDef, stem, suffix string) error {
	words := stem
	lost := false
	for _, h := range d.hint {
		w, l := spell(h, exported)
		if w == "" {
			w = "X"
		}
		words += w
		lost = lost || l
	}
	if len(words) > maxIdentBase+len(stem) {
		words, lost = words[:maxIdentBase+len(stem)], true
	}
	key := fn.tp.tool.Name + "\x00" + strings.Join(d.hint, "\x00")
	want := words + suffix
	if lost {
		want = words + suffix + "_" + digest8(key)
	}
	id, err := claim(f.taken, want, key)
	if err != nil {
		return err
	}
	f.types[d] = id
	f.owner[d] = fn
	f.order = append(f.order, d)
	tstem, tsuffix := id, ""
	if suffix != "" || lost {
		tstem, tsuffix = splitSuffix(id)
	}
	switch d.kind {
	case dRecord:
		wires := make([]string, len(d.fields))
		for i, fl := range d.fields {
			wires[i] = fl.wire
			if !tagSafe(fl.wire) {
				f.opaque[d] = "property name " + quoteNote(fl.wire) + " cannot be a Go struct tag"
			}
		}
		ids, a, b := mangleAll(wires, exported, notReserved, "Field")
		if a >= 0 {
			f.opaque[d] = "property names " + quoteNote(wires[a]) + " and " + quoteNote(wires[b]) + " collide"
		}
		f.fields[d] = ids
	case dEnum:
		vals := make([]string, len(d.values))
		for i, v := range d.values {
			vals[i] = v.str
			if d.base == kInteger {
				vals[i] = strings.Replace(v.lit, "-", "neg", 1)
			}
		}
		ids, _, _ := mangleAll(vals, exported, notReserved, "V")
		for i, c := range ids {
			id, err := claim(f.taken, tstem+c+tsuffix, key+"\x00"+d.values[i].lit)
			if err != nil {
				return err
			}
			f.consts[d] = append(f.consts[d], id)
		}
	case dUnion:
		for _, v := range d.variants {
			if v.typ.kind == kNamed && v.typ.def.kind != dUnion && !v.typ.nullable {
				f.wrappers[d] = append(f.wrappers[d], "")
				continue
			}
			shape := strings.ToUpper(shapeOf(v.typ)[:1]) + shapeOf(v.typ)[1:]
			if v.typ.kind == kInteger {
				shape = "Integer"
			}
			id, err := claim(f.taken, tstem+shape+tsuffix, key+"\x00"+shape)
			if err != nil {
				return err
			}
			f.wrappers[d] = append(f.wrappers[d], id)
		}
	}
	return nil
}

// tagSafe reports a property name that survives as a struct tag name in
// both encoding/json and msgpack: letters, digits and _-.$@.
func tagSafe(s string) bool {
	if s == "" || s == "-" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-.$@", c) >= 0) {
			return false
		}
	}
	return true
}

// reaches reports whether target is reachable from d through fields that
// are stored by value (required, not nullable records).
func (f *goFile) reaches(d, target *typeDef, seen map[*typeDef]bool) bool {
	for _, fl := range d.fields {
		t := fl.typ
		if t.kind != kNamed || t.def.kind != dRecord || !fl.required || t.nullable {
			continue
		}
		next := f.canon(t.def)
		if next == target {
			return true
		}
		if !seen[next] {
			seen[next] = true
			if f.reaches(next, target, seen) {
				return true
			}
		}
	}
	return false
}

// expr spells the Go type of t. In an output, unions are any: a decoder
// cannot fill an interface.
func (f *goFile) expr(t typ, output bool) string {
	var e string
	switch t.kind {
	case kAny:
		return "any"
	case kString:
		e = "string"
	case kInteger:
		e = "int64"
		if t.unsigned {
			e = "uint64"
		}
	case kNumber:
		e = "float64"
	case kBoolean:
		e = "bool"
	case kList:
		return "[]" + f.expr(*t.elem, output)
	case kMap:
		return "map[string]" + f.expr(*t.elem, output)
	case kNamed:
		if t.def.kind == dUnion {
			if output || f.output[t.def] {
				return "any"
			}
			return f.types[t.def]
		}
		e = f.types[t.def]
		if t.def.kind == dRecord && f.opaque[f.canon(t.def)] != "" {
			return e // a map type
		}
	}
	if t.nullable {
		return "*" + e
	}
	return e
}

// nilable reports a Go type whose zero value is nil.
func nilable(e string) bool {
	return strings.HasPrefix(e, "*") || strings.HasPrefix(e, "[]") || strings.HasPrefix(e, "map[") || e == "any"
}

// fieldType is the Go type of field fl of record d, and whether the field
// is omitted when unset.
func (f *goFile) fieldType(d *typeDef, fl field) (string, bool) {
	e := f.expr(fl.typ, f.output[d])
	isIface := fl.typ.kind == kNamed && fl.typ.def.kind == dUnion && !strings.HasPrefix(e, "any")
	isOpaque := fl.typ.kind == kNamed && fl.typ.def.kind == dRecord && f.opaque[f.canon(fl.typ.def)] != ""
	needPtr := !fl.required || (fl.typ.kind == kNamed && fl.typ.def.kind == dRecord && f.cyclic[f.canon(fl.typ.def)])
	if needPtr && !nilable(e) && !isIface && !isOpaque {
		e = "*" + e
	}
	return e, !fl.required
}

// enumBase is the Go type of enum d's constants.
func enumBase(d *typeDef) string {
	switch {
	case d.base != kInteger:
		return "string"
	case d.unsigned:
		return "uint64"
	}
	return "int64"
}

// requiredFacts are what a field's Go type leaves unsaid: that it is
// required although nil can be written, and what nil then sends.
func (f *goFile) requiredFacts(d *typeDef, fl field) []string {
	e, _ := f.fieldType(d, fl)
	switch {
	case fl.required && fl.typ.nullable:
		return []string{"required, nil sends null"}
	case fl.required && nilable(e):
		return []string{"required"}
	}
	return nil
}

// goLit is the Go string literal of s: total escaping to printable ASCII,
// so server text inside it is inert and the file stays ASCII whatever the
// bytes (invalid UTF-8 survives as \x escapes, verbatim on the wire).
func goLit(s string) string { return strconv.QuoteToASCII(s) }

// write writes the source. Every line of it is the generator's own; server
// text enters only through goLit and commentLines.
func (f *goFile) write() []byte {
	var b strings.Builder
	b.WriteString("// Code generated by capbridge; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Listing SHA-256: %s.\n\n", f.digest)
	fmt.Fprintf(&b, "// Package %s calls the tools of MCP server %s through capbridge.\n", f.pkg, commentQuote(f.server))
	b.WriteString("//\n// Each function sends its tool's name and its arguments' wire names to\n")
	b.WriteString("// the server verbatim and returns the tool's result. A tool's failure is\n")
	b.WriteString("// a result with IsError set; a refused call is an error (*capwire.Denied).\n")
	fmt.Fprintf(&b, "package %s\n", f.pkg)
	if len(f.funcs) > 0 {
		fmt.Fprintf(&b, "\nimport (\n\t%q\n\n\t%q\n)\n", goImports[0], goImports[1])
	}
	byOwner := map[*goFunc][]*typeDef{}
	for _, d := range f.order {
		byOwner[f.owner[d]] = append(byOwner[f.owner[d]], d)
	}
	for _, fn := range f.funcs {
		f.writeFunc(&b, fn)
		for _, d := range byOwner[fn] {
			f.writeType(&b, d)
		}
	}
	return []byte(b.String())
}

func (f *goFile) writeFunc(b *strings.Builder, fn *goFunc) {
	t := fn.tp.tool
	fmt.Fprintf(b, "\n// %s calls tool %s of server %s.\n", fn.name, commentQuote(t.Name), commentQuote(f.server))
	commentLines(b, "", toolDescription(t))
	if fn.tp.whole != "" {
		b.WriteString("//\n")
		commentLines(b, "", "Its arguments are passed whole, as a map from wire name to value"+wholeNote(fn.tp, "nil")+cleanText(fn.tp.whole, maxParamNote)+".")
	}
	if t.Task {
		b.WriteString("//\n")
		commentLines(b, "", taskDoc("capwire.Start"))
	}
	if h := hintText(t.Hints); h != "" {
		fmt.Fprintf(b, "//\n// Server hints (unverified): %s.\n", h)
	}
	if fn.decode != "" {
		fmt.Fprintf(b, "//\n// Its structured result decodes with %s.\n", fn.decode)
	}
	fmt.Fprintf(b, "func %s(%s) (*capwire.Result, error) {\n", fn.name, f.params(fn, false))
	b.WriteString("\tc, err := capwire.Shared(ctx)\n\tif err != nil {\n\t\treturn nil, err\n\t}\n")
	arg := "args"
	if fn.tp.whole == "" && fn.args == "" {
		arg = "map[string]any{}"
	}
	fmt.Fprintf(b, "\treturn c.Call(ctx, %s, %s, %s)\n}\n", goLit(f.server), goLit(t.Name), arg)
	if fn.decode != "" {
		fmt.Fprintf(b, "\n// %s decodes the structured result of %s (tool %s).\n", fn.decode, fn.name, commentQuote(t.Name))
		fmt.Fprintf(b, "func %s(r *capwire.Result) (%s, error) {\n\tvar out %s\n\terr := r.Decode(&out)\n\treturn out, err\n}\n", fn.decode, fn.out, fn.out)
	}
}

// params spells the parameter list; short is the surface's form.
func (f *goFile) params(fn *goFunc, short bool) string {
	ctx := "ctx context.Context"
	if short {
		ctx = "ctx"
	}
	switch {
	case fn.tp.whole != "":
		return ctx + ", args map[string]any"
	case fn.args != "":
		return ctx + ", args " + fn.args
	}
	return ctx
}

func (f *goFile) writeType(b *strings.Builder, d *typeDef) {
	name := f.types[d]
	fn := f.owner[d]
	fmt.Fprintf(b, "\n// %s is %s of tool %s.\n", name, f.role(d), commentQuote(fn.tp.tool.Name))
	if doc := cleanText(d.doc, maxToolDesc); doc != "" {
		commentLines(b, "", doc)
	}
	switch d.kind {
	case dRecord:
		if why := f.opaque[d]; why != "" {
			b.WriteString("//\n")
			commentLines(b, "", "It is a map from wire name to value: "+cleanText(why, maxParamNote)+".")
			fmt.Fprintf(b, "type %s map[string]any\n", name)
			return
		}
		fmt.Fprintf(b, "type %s struct {\n", name)
		for i, fl := range d.fields {
			if i > 0 {
				b.WriteByte('\n')
			}
			if note := fieldDoc(fl, f.requiredFacts(d, fl)...); note != "" {
				commentLines(b, "\t", note)
			}
			e, omit := f.fieldType(d, fl)
			tag := fl.wire
			if omit {
				tag += ",omitempty"
			}
			fmt.Fprintf(b, "\t%s %s `json:\"%s\" msgpack:\"%s\"`\n", f.fields[d][i], e, tag, tag)
		}
		b.WriteString("}\n")
	case dEnum:
		fmt.Fprintf(b, "type %s %s\n\n// The values of %s.\nconst (\n", name, enumBase(d), name)
		// gofmt aligns the types of a const block one space past its
		// longest name (the identifiers are ASCII, so bytes are columns).
		width := 0
		for _, c := range f.consts[d] {
			width = max(width, len(c))
		}
		for i, v := range d.values {
			lit := v.lit
			if d.base == kString {
				lit = goLit(v.str)
			}
			c := f.consts[d][i]
			fmt.Fprintf(b, "\t%s%*s%s = %s\n", c, width-len(c)+1, "", name, lit)
		}
		b.WriteString(")\n")
	case dUnion:
		b.WriteString("//\n")
		commentLines(b, "", f.unionNote(d))
		if f.output[d] {
			// Outputs decode unions as any; the variant types remain for
			// decoding by hand, so the union itself declares nothing more.
			fmt.Fprintf(b, "type %s any\n", name)
			return
		}
		m := marker(name)
		fmt.Fprintf(b, "type %s interface{ %s() }\n", name, m)
		sealed := map[string]bool{}
		for i, v := range d.variants {
			if sealed[f.types[v.typ.def]] && f.wrappers[d][i] == "" {
				continue // two variants of one declared shape
			}
			sealed[f.types[v.typ.def]] = true
			if w := f.wrappers[d][i]; w != "" {
				fmt.Fprintf(b, "\n// %s is the %s variant of %s.\ntype %s %s\n", w, shapeOf(v.typ), name, w, f.expr(typ{kind: v.typ.kind, elem: v.typ.elem, def: v.typ.def, unsigned: v.typ.unsigned}, false))
				fmt.Fprintf(b, "\nfunc (%s) %s() {}\n", w, m)
				continue
			}
			fmt.Fprintf(b, "\nfunc (%s) %s() {}\n", f.types[v.typ.def], m)
		}
	}
}

// role says what a named type is, for its doc comment.
func (f *goFile) role(d *typeDef) string {
	switch {
	case len(d.hint) == 1 && d.hint[0] == "args" && f.owner[d].tp.args == d:
		return "the arguments"
	case len(d.hint) == 1 && d.hint[0] == "output":
		return "the structured output"
	}
	what := map[defKind]string{dRecord: "an object", dEnum: "an enumeration", dUnion: "a union"}[d.kind]
	return what + " (" + commentQuote(strings.Join(d.hint, ".")) + ")"
}

// unionNote spells out a union's variants: each variant's type, and for
// a wrapper the type it wraps.
func (f *goFile) unionNote(d *typeDef) string {
	var parts []string
	for i, v := range d.variants {
		n := f.wrappers[d][i]
		if n == "" {
			n = f.types[v.typ.def]
		} else {
			n += "(" + f.expr(typ{kind: v.typ.kind, elem: v.typ.elem, def: v.typ.def, unsigned: v.typ.unsigned}, false) + ")"
		}
		if v.tag != "" {
			n += " (" + f.fields[f.canon(v.typ.def)][slices.IndexFunc(v.typ.def.fields, func(x field) bool { return x.wire == d.discriminator })] + " = " + v.tag + ")"
		}
		parts = append(parts, n)
	}
	how := "told apart by JSON kind"
	switch {
	case d.discriminator != "":
		how = "told apart by " + strconv.Quote(d.discriminator)
	case !d.decidable:
		how = "not decidable from the value alone"
	}
	s := "one of " + strings.Join(parts, ", ") + "; " + how + "."
	if f.output[d] {
		s += " Decoded as any."
	}
	return cleanText(s, 4*maxParamNote)
}
