package codegen

import (
	"fmt"
	"slices"
	"strings"
)

// What the emitters of languages other than Go share: the binding, the
// doc comments and the output shapes (what their surfaces share is in
// surface.go). They take the Go binding's type names, sharing and
// declaration order, so a type is called the same in every language and
// the Go rules for collision suffixes apply unchanged; they name
// functions, decode helpers and (in Python) parameters in their own style,
// against their own reserved words, and rename a type only where the
// language reserves its Go name.

// fFunc is one tool bound to a language's names.
type fFunc struct {
	tp     *toolPlan // the unbound plan: args kept where Go took them whole
	name   string    // the function
	decode string    // the output accessor; "" without an output schema
	params []string  // Python: keyword identifiers, parallel to tp.args.fields
}

// fFile is a listing bound to the names of one language.
type fFile struct {
	lang           Lang
	server, module string
	digest         string
	g              *goFile // the Go binding of the same plans, for type names
	funcs          []*fFunc
	types          map[*typeDef]string // every named type, shared ones included
	byOwner        map[*fFunc][]*typeDef
	variant        map[*typeDef]bool   // declared as a variant of a union
	argsRoot       map[*typeDef]*fFunc // the arguments records, by their tool
	owner          map[*typeDef]*fFunc // the tool that declares a type
	typeNames      map[string]bool     // Python: every type's name
	textOut        map[string]*typeDef // output types the surface leaves out, by tool (goFile.textOutputs)
}

// fLang is what differs between the languages at binding time.
type fLang struct {
	funcStyle    style
	funcFallback string
	decodePrefix string
	module       func(string) bool // reserved module names
	funcs        func(string) bool // reserved function names
	types        func(string) bool // reserved type names
}

// bindForeign binds plans to lang's names. The Go binding runs on a copy
// of the plans, since it takes arguments whose property names cannot be
// Go struct tags whole, which a TypeScript interface or a Python TypedDict
// spells out.
func bindForeign(lang Lang, fl fLang, server, digest string, plans []toolPlan) (*fFile, error) {
	goPlans := slices.Clone(plans)
	g := newGoFile(server, digest)
	if err := g.bind(goPlans); err != nil {
		return nil, err
	}
	mods, _, _ := mangleAll([]string{server}, pkg, fl.module, "mcp")
	f := &fFile{lang: lang, server: server, module: mods[0], digest: digest, g: g,
		types: map[*typeDef]string{}, byOwner: map[*fFunc][]*typeDef{}, variant: map[*typeDef]bool{},
		argsRoot: map[*typeDef]*fFunc{}, owner: map[*typeDef]*fFunc{}}
	wires := make([]string, len(plans))
	for i := range plans {
		wires[i] = plans[i].tool.Name
	}
	names, a, b := mangleAll(wires, fl.funcStyle, fl.funcs, fl.funcFallback)
	if a >= 0 {
		return nil, &CollisionError{Ident: names[b], A: wires[a], B: wires[b]}
	}
	taken := map[string]bool{}
	for i := range plans {
		fn := &fFunc{tp: &plans[i], name: names[i]}
		f.funcs = append(f.funcs, fn)
		taken[fn.name] = true
		if fn.tp.args != nil {
			f.argsRoot[fn.tp.args] = fn
		}
	}
	owner := map[*goFunc]*fFunc{}
	for i, fn := range f.funcs {
		owner[g.funcs[i]] = fn
		if fn.tp.output == nil {
			continue
		}
		var err error
		if fn.decode, err = claim(taken, decodeName(fl, fn.name), fn.tp.tool.Name+"\x00decode"); err != nil {
			return nil, err
		}
	}
	for _, d := range g.order {
		name := g.types[d]
		if fl.types(name) {
			var err error
			if name, err = claim(taken, name+"_"+digest8(g.owner[d].tp.tool.Name+"\x00"+strings.Join(d.hint, "\x00")), name); err != nil {
				return nil, err
			}
		}
		taken[name] = true
		f.types[d] = name
		o := owner[g.owner[d]]
		f.owner[d] = o
		f.byOwner[o] = append(f.byOwner[o], d)
		for _, v := range d.variants {
			if v.typ.kind == kNamed {
				f.variant[g.canon(v.typ.def)] = true
			}
		}
	}
	for d, a := range g.alias {
		f.types[d] = f.types[a]
	}
	return f, nil
}

// decodeName is the decode helper's name for function fn.
func decodeName(fl fLang, fn string) string {
	if fl.funcStyle == snake {
		return fl.decodePrefix + "_" + fn
	}
	return fl.decodePrefix + strings.ToUpper(fn[:1]) + fn[1:]
}

// argsOf is fn's arguments record with fields, or nil when it takes none
// or takes them whole.
func argsOf(fn *fFunc) *typeDef {
	if fn.tp.args == nil || len(fn.tp.args.fields) == 0 {
		return nil
	}
	return fn.tp.args
}

// funcDoc is the doc of a tool's function, in paragraphs: the tool it
// calls and its description, then, where they apply, that its arguments
// are passed whole as one object (the language's word for it), the
// server's hints and the decode helper.
func (f *fFile) funcDoc(fn *fFunc, object string) []string {
	t := fn.tp.tool
	paras := []string{fmt.Sprintf("Calls tool %s of server %s.", commentQuote(t.Name), commentQuote(f.server)), toolDescription(t)}
	if fn.tp.whole != "" {
		paras = append(paras, "Its arguments are passed whole, as "+object+" from wire name to value"+wholeNote(fn.tp, "left out")+cleanText(fn.tp.whole, maxParamNote)+".")
	}
	if t.Task {
		paras = append(paras, taskDoc("capwire.start"))
	}
	if h := hintText(t.Hints); h != "" {
		paras = append(paras, "Server hints (unverified): "+h+".")
	}
	if fn.decode != "" {
		paras = append(paras, "Its structured result decodes with "+fn.decode+".")
	}
	return paras
}

// role says what a named type is, for its doc comment.
func (f *fFile) role(d *typeDef) string {
	switch {
	case len(d.hint) == 1 && d.hint[0] == "args":
		return "the arguments"
	case len(d.hint) == 1 && d.hint[0] == "output":
		return "the structured output"
	}
	what := map[defKind]string{dRecord: "an object", dEnum: "an enumeration", dUnion: "a union"}[d.kind]
	return what + " (" + commentQuote(strings.Join(d.hint, ".")) + ")"
}

// unionHow says what tells a union's variants apart.
func unionHow(d *typeDef) string {
	switch {
	case d.discriminator != "":
		return "told apart by " + commentQuote(d.discriminator)
	case !d.decidable:
		return "not decidable from the value alone"
	}
	return "told apart by JSON kind"
}

// Checked outputs. A decode helper hands the structured content to
// capwire's decodeStructured (decode_structured) with its output type
// described as a shape, and the module's named output types as a table of
// shapes; the client library does the checking, the same for every
// façade, so a module adds only data: one line per output type, its
// strings written by the language's literal function (server text enters
// nowhere else). The notation is capwire's (capwire/ts/src/shape.ts):
// "string", "integer", "number", "boolean", "any", a type's name,
// ["list"|"map"|"nullable", T], ["record", [[key, T]...], [[key, T]...]]
// (required, then optional), ["enum", [values]], ["union", [T...]]; it is
// the same text in TypeScript and Python.

// outputDefs are the named types the tools' outputs reach, canonical and
// in declaration order.
func (f *fFile) outputDefs() []*typeDef {
	seen := map[*typeDef]bool{}
	var walk func(t typ)
	walk = func(t typ) {
		for t.kind == kList || t.kind == kMap {
			t = *t.elem
		}
		if t.kind != kNamed {
			return
		}
		d := f.g.canon(t.def)
		if seen[d] {
			return
		}
		seen[d] = true
		for _, fl := range d.fields {
			walk(fl.typ)
		}
		for _, v := range d.variants {
			walk(v.typ)
		}
	}
	for _, fn := range f.funcs {
		if fn.decode != "" {
			walk(*fn.tp.output)
		}
	}
	var out []*typeDef
	for _, d := range f.g.order {
		if seen[d] {
			out = append(out, d)
		}
	}
	return out
}

// shapeOfType is t's shape.
func (f *fFile) shapeOfType(t typ, lit func(string) string) string {
	var s string
	switch t.kind {
	case kAny:
		return lit("any")
	case kString:
		s = lit("string")
	case kInteger:
		s = lit("integer")
	case kNumber:
		s = lit("number")
	case kBoolean:
		s = lit("boolean")
	case kList:
		s = "[" + lit("list") + ", " + f.shapeOfType(*t.elem, lit) + "]"
	case kMap:
		s = "[" + lit("map") + ", " + f.shapeOfType(*t.elem, lit) + "]"
	case kNamed:
		s = lit(f.types[t.def])
	}
	if t.nullable {
		s = "[" + lit("nullable") + ", " + s + "]"
	}
	return s
}

// shapeOfDef is the shape of the named type d.
func (f *fFile) shapeOfDef(d *typeDef, lit func(string) string) string {
	var parts []string
	switch d.kind {
	case dRecord:
		var req, opt []string
		for _, fl := range d.fields {
			p := "[" + lit(fl.wire) + ", " + f.shapeOfType(fl.typ, lit) + "]"
			if fl.required {
				req = append(req, p)
			} else {
				opt = append(opt, p)
			}
		}
		return "[" + lit("record") + ", [" + strings.Join(req, ", ") + "], [" + strings.Join(opt, ", ") + "]]"
	case dEnum:
		return "[" + lit("enum") + ", [" + joinEnum(d, lit, ", ", 0) + "]]"
	default:
		for _, v := range d.variants {
			parts = append(parts, f.shapeOfType(v.typ, lit))
		}
		return "[" + lit("union") + ", [" + strings.Join(parts, ", ") + "]]"
	}
}

// wholeNote is what a function's doc says before why its arguments are
// passed whole: that they may be left out (none: how the language says
// so) when the schema requires nothing.
func wholeNote(tp *toolPlan, none string) string {
	if tp.optional {
		return " (or " + none + ": the schema requires none): "
	}
	return ": "
}

// taskDoc is what a function's doc says of a tool the server runs as an
// MCP task; start is the language's call that runs it in the background.
func taskDoc(start string) string {
	return "The server runs it as an MCP task: the call waits for the task's result, as long as the server works, within the call's deadline; cancelling the call cancels the task. " + start + " runs it in the background, to collect later."
}
