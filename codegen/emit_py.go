package codegen

import (
	"fmt"
	"slices"
	"strings"
)

// The Python emitter. It writes one module per server that imports only
// typing and the capwire client and declares, per tool, one async
// function with keyword-only arguments (so they are named), the
// TypedDicts, Literal aliases and union aliases of its schemas, and, when
// the tool declares an output schema, a decode helper typing its
// structured result. Records are TypedDicts rather than dataclasses: a
// call's arguments and a structured result are plain dicts on the wire
// (capwire sends and returns dicts), so a TypedDict types them without a
// conversion the client does not have. Server text reaches the module
// only in '#' comments and docstrings (cleaned; '\' and '"' escaped, so
// no docstring can end early or hold an escape) and in string literals
// escaped to printable ASCII.

// pyReservedWords are Python's keywords and soft keywords.
var pyReservedWords = wordSet(`
	False None True and as assert async await break class continue def del elif else except
	finally for from global if import in is lambda nonlocal not or pass raise return try while
	with yield match case type _`)

// pyBuiltins are the names of Python's builtins module (3.11), which no
// module-level name of a façade shadows: the façade uses some of them,
// and a reader expects every one to mean what it always does.
var pyBuiltins = wordSet(`
	ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup
	BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError
	ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError
	DeprecationWarning EOFError Ellipsis EncodingWarning EnvironmentError Exception
	ExceptionGroup FileExistsError FileNotFoundError FloatingPointError FutureWarning
	GeneratorExit IOError ImportError ImportWarning IndentationError IndexError InterruptedError
	IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError
	NameError NotADirectoryError NotImplemented NotImplementedError OSError OverflowError
	PendingDeprecationWarning PermissionError ProcessLookupError RecursionError ReferenceError
	ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration SyntaxError
	SyntaxWarning SystemError SystemExit TabError TimeoutError TypeError UnboundLocalError
	UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning
	UserWarning ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool
	breakpoint bytearray bytes callable chr classmethod compile complex copyright credits
	delattr dict dir divmod enumerate eval exec exit filter float format frozenset getattr
	globals hasattr hash help hex id input int isinstance issubclass iter len license list
	locals map max memoryview min next object oct open ord pow print property quit range repr
	reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip`)

// pyModuleNames are what a façade imports, or a program that imports a
// façade likely does, beside it.
var pyModuleNames = wordSet(`capwire typing asyncio`)

var pyLang = fLang{
	funcStyle:    snake,
	funcFallback: "tool",
	decodePrefix: "decode",
	module:       func(s string) bool { return pyReservedWords[s] || pyBuiltins[s] || pyModuleNames[s] },
	funcs:        func(s string) bool { return pyReservedWords[s] || pyBuiltins[s] || pyModuleNames[s] },
	types:        func(s string) bool { return pyBuiltins[s] },
}

// pyParamReserved are the names no keyword parameter may take: keywords,
// and the modules the function body uses.
func pyParamReserved(s string) bool {
	return pyReservedWords[s] && !pySoftKeywords[s] || pyModuleNames[s]
}

// pySoftKeywords are keywords only in their own statements, and names
// everywhere else.
var pySoftKeywords = wordSet(`match case type _`)

// pyDeclares reports whether the module declares d: not an arguments
// record the function spells out as keyword parameters.
func (f *fFile) pyDeclares(d *typeDef) bool {
	fn := f.argsRoot[d]
	return fn == nil || fn.params == nil
}

// pyLit is the Python string literal of s, escaped to printable ASCII.
func pyLit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pyDocText makes clean text safe inside a docstring: every backslash is
// doubled, so none starts an escape, and a quote is escaped where it
// would meet another or end the text, so no run of quotes can end the
// docstring.
func pyDocText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '"' && (i+1 == len(s) || s[i+1] == '"'):
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// pyIdent reports an ASCII Python identifier.
func pyIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// pyClassForm reports whether record d can be a TypedDict class: every
// key an identifier that is no keyword, is not mangled as private
// (leading "__"), and names nothing the class's annotations use.
func (f *fFile) pyClassForm(d *typeDef) bool {
	for _, fl := range d.fields {
		w := fl.wire
		if !pyIdent(w) || pyReservedWords[w] || strings.HasPrefix(w, "__") || pyModuleNames[w] || f.typeNames[w] {
			return false
		}
	}
	return true
}

// pyExpr spells the Python type of t; prefix qualifies the typing names
// ("typing." in the source, "" on the surface).
func (f *fFile) pyExpr(t typ, prefix string) string {
	var e string
	switch t.kind {
	case kAny:
		return prefix + "Any"
	case kString:
		e = "str"
	case kInteger:
		e = "int"
	case kNumber:
		e = "float"
	case kBoolean:
		e = "bool"
	case kList:
		e = "list[" + f.pyExpr(*t.elem, prefix) + "]"
	case kMap:
		e = "dict[str, " + f.pyExpr(*t.elem, prefix) + "]"
	case kNamed:
		e = f.types[t.def]
	}
	if t.nullable {
		e += " | None"
	}
	return e
}

// pyAnn is t as an annotation the interpreter evaluates when the module
// loads: quoted when it names a declared type, which may be declared
// later (or be t itself).
func (f *fFile) pyAnn(t typ) string {
	e := f.pyExpr(t, "typing.")
	if hasNamed(t) {
		return `"` + e + `"`
	}
	return e
}

func hasNamed(t typ) bool {
	for t.kind == kList || t.kind == kMap {
		t = *t.elem
	}
	return t.kind == kNamed
}

// writePython writes the module. Every line is the generator's own;
// server text enters only through pyLit, pyDocText and comments.
func (f *fFile) writePython() []byte {
	var b strings.Builder
	b.WriteString("# Code generated by capbridge; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "# Listing SHA-256: %s.\n#\n", f.digest)
	pyComment(&b, "", fmt.Sprintf("Module %s calls the tools of MCP server %s through capbridge. Each function sends its tool's name and its arguments' wire names verbatim and returns the tool's result. A tool's failure is a result with is_error set; a refused call raises capwire.Denied.", f.module, commentQuote(f.server)))
	b.WriteString("\nimport typing\n\nimport capwire\n\n_Args = dict[str, object]\n")
	for _, fn := range f.funcs {
		f.writePyFunc(&b, fn)
		for _, d := range f.byOwner[fn] {
			if f.pyDeclares(d) {
				f.writePyType(&b, d)
			}
		}
	}
	f.writePyShapes(&b)
	return []byte(b.String())
}

// pyComment writes clean text as '#' comment lines.
func pyComment(b *strings.Builder, indent, text string) {
	for _, l := range wrap(text, docWidth) {
		b.WriteString(indent + "# " + l + "\n")
	}
}

// pyDocstring writes a docstring of paragraphs of clean text, wrapped;
// one short line stays on one line.
func pyDocstring(b *strings.Builder, indent string, paras ...string) {
	var lines []string
	for _, p := range paras {
		if p == "" {
			continue
		}
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, wrap(p, docWidth)...)
	}
	if len(lines) == 1 {
		b.WriteString(indent + `"""` + pyDocText(lines[0]) + `"""` + "\n")
		return
	}
	b.WriteString(indent + `"""`)
	for i, l := range lines {
		switch {
		case i == 0:
			b.WriteString(pyDocText(l) + "\n")
		case l == "":
			b.WriteString("\n")
		default:
			b.WriteString(indent + pyDocText(l) + "\n")
		}
	}
	b.WriteString(indent + `"""` + "\n")
}

func (f *fFile) writePyFunc(b *strings.Builder, fn *fFunc) {
	t := fn.tp.tool
	a := argsOf(fn)
	fmt.Fprintf(b, "\n\nasync def %s(\n", fn.name)
	switch {
	case fn.tp.whole != "" && a != nil:
		fmt.Fprintf(b, "    args: %q,\n    *,\n", f.types[a])
	case fn.tp.whole != "" && fn.tp.optional:
		b.WriteString("    args: dict[str, typing.Any] | None = None,\n    *,\n")
	case fn.tp.whole != "":
		b.WriteString("    args: dict[str, typing.Any],\n    *,\n")
	case a != nil:
		b.WriteString("    *,\n")
		for i, fl := range a.fields {
			if fl.required {
				fmt.Fprintf(b, "    %s: %s,\n", fn.params[i], f.pyAnn(fl.typ))
			} else {
				opt := fl.typ
				opt.nullable = opt.kind != kAny // None leaves it out
				fmt.Fprintf(b, "    %s: %s = None,\n", fn.params[i], f.pyAnn(opt))
			}
		}
	default:
		b.WriteString("    *,\n")
	}
	b.WriteString("    _timeout: float | None = None,\n) -> capwire.Result:\n")
	pyDocstring(b, "    ", f.funcDoc(fn, "a dict")...)
	arg := "{}"
	switch {
	case fn.tp.whole != "":
		arg = "args"
	case a != nil:
		arg = "_args"
		var req []string
		for i, fl := range a.fields {
			if fl.required {
				req = append(req, pyLit(fl.wire)+": "+fn.params[i])
			}
		}
		fmt.Fprintf(b, "    _args: _Args = {%s}\n", strings.Join(req, ", "))
		for i, fl := range a.fields {
			if !fl.required {
				fmt.Fprintf(b, "    if %s is not None:\n        _args[%s] = %s\n", fn.params[i], pyLit(fl.wire), fn.params[i])
			}
		}
	}
	fmt.Fprintf(b, "    _client = await capwire.shared()\n    return await _client.call(%s, %s, %s, timeout=_timeout)\n", pyLit(f.server), pyLit(t.Name), arg)
	if fn.decode == "" {
		return
	}
	out := *fn.tp.output
	fmt.Fprintf(b, "\n\ndef %s(r: capwire.Result) -> %s:\n", fn.decode, f.pyAnn(out))
	pyDocstring(b, "    ", fmt.Sprintf("Returns the structured result of %s (tool %s) as %s, checked against the output schema's type at every depth: content that is missing or does not fit raises capwire.DecodeError naming the place. Keys the schema does not declare are allowed.", fn.name, commentQuote(t.Name), f.pyExpr(out, "")))
	fmt.Fprintf(b, "    v = capwire.decode_structured(r, %s, %s)\n", f.shapeOfType(out, pyLit), pyShapes)
	fmt.Fprintf(b, "    return typing.cast(%s, v)\n", pyLit(f.pyExpr(out, "typing.")))
}

// pyShapes is the module's table of output shapes; no function, type or
// parameter name begins with '_' and a capital.
const pyShapes = "_SHAPES"

// writePyShapes writes the table of the output types' shapes that the
// decode helpers check against.
func (f *fFile) writePyShapes(b *strings.Builder) {
	defs := f.outputDefs()
	if len(defs) == 0 {
		return
	}
	b.WriteString("\n\n")
	pyComment(b, "", "The output types as capwire shapes, which the decode helpers check structured content against.")
	b.WriteString(pyShapes + ": capwire.Shapes = {\n")
	for _, d := range defs {
		fmt.Fprintf(b, "    %s: %s,\n", pyLit(f.types[d]), f.shapeOfDef(d, pyLit))
	}
	b.WriteString("}\n")
}

func (f *fFile) writePyType(b *strings.Builder, d *typeDef) {
	name := f.types[d]
	head := fmt.Sprintf("%s is %s of tool %s.", name, f.role(d), commentQuote(f.owner[d].tp.tool.Name))
	doc := cleanText(d.doc, maxToolDesc)
	switch d.kind {
	case dRecord:
		f.writePyRecord(b, d, name, head, doc)
	case dEnum:
		b.WriteString("\n\n")
		pyComment(b, "", head+" "+doc)
		fmt.Fprintf(b, "%s: typing.TypeAlias = typing.Literal[%s]\n", name, joinEnum(d, pyLit, ", ", 0))
	case dUnion:
		b.WriteString("\n\n")
		pyComment(b, "", head+" "+doc+" One of its variants, "+unionHow(d)+".")
		fmt.Fprintf(b, "%s: typing.TypeAlias = %s\n", name, pyLit(f.pyUnion(d, "typing.")))
	}
}

// A record is a TypedDict without typing.NotRequired (Python 3.11), so
// that a façade runs on 3.10: the keys are all required (total) or all
// optional (total=False), or, mixed, the record is split in two
// TypedDicts of one totality each and declared as their union by
// inheritance. The halves are named after the record with a leading '_',
// which no other declaration has.

// pySplit says whether record d is declared in two halves, and names them.
func pySplit(d *typeDef, name string) (split bool, req, opt string) {
	var r, o int
	for _, fl := range d.fields {
		if fl.required {
			r++
		} else {
			o++
		}
	}
	return r > 0 && o > 0, "_" + name + "Required", "_" + name + "Optional"
}

// pyAllOptional reports a record with fields, none of them required.
func pyAllOptional(d *typeDef) bool {
	return len(d.fields) > 0 && !slices.ContainsFunc(d.fields, func(fl field) bool { return fl.required })
}

func (f *fFile) writePyRecord(b *strings.Builder, d *typeDef, name, head, doc string) {
	split, reqName, optName := pySplit(d, name)
	// fields writes the fields with required set to req, in a class body
	// or a functional form's dict.
	fields := func(req bool, class bool) {
		for _, fl := range d.fields {
			if fl.required != req && split {
				continue
			}
			if class {
				b.WriteByte('\n')
			}
			if note := fieldDoc(fl); note != "" {
				pyComment(b, "    ", note)
			}
			if class {
				fmt.Fprintf(b, "    %s: %s\n", fl.wire, f.pyAnn(fl.typ))
			} else {
				fmt.Fprintf(b, "    %s: %s,\n", pyLit(fl.wire), f.pyAnn(fl.typ))
			}
		}
	}
	total := ""
	if pyAllOptional(d) {
		total = ", total=False"
	}
	switch {
	case f.pyClassForm(d) && split:
		fmt.Fprintf(b, "\n\nclass %s(typing.TypedDict):\n", reqName)
		pyDocstring(b, "    ", "The required keys of "+name+".")
		fields(true, true)
		fmt.Fprintf(b, "\n\nclass %s(%s, total=False):\n", name, reqName)
		pyDocstring(b, "    ", head, doc)
		fields(false, true)
	case f.pyClassForm(d):
		fmt.Fprintf(b, "\n\nclass %s(typing.TypedDict%s):\n", name, total)
		pyDocstring(b, "    ", head, doc)
		fields(true, true)
	case split:
		fmt.Fprintf(b, "\n\n%s = typing.TypedDict(%s, {\n", reqName, pyLit(reqName))
		fields(true, false)
		fmt.Fprintf(b, "})\n\n\n%s = typing.TypedDict(%s, {\n", optName, pyLit(optName))
		fields(false, false)
		fmt.Fprintf(b, "}, total=False)\n\n\nclass %s(%s, %s):\n", name, reqName, optName)
		pyDocstring(b, "    ", head, doc)
	default:
		b.WriteString("\n\n")
		pyComment(b, "", head+" "+doc)
		fmt.Fprintf(b, "%s = typing.TypedDict(%s, {\n", name, pyLit(name))
		fields(true, false)
		fmt.Fprintf(b, "}%s)\n", total)
	}
}

func (f *fFile) pyUnion(d *typeDef, prefix string) string {
	var parts []string
	for _, v := range d.variants {
		parts = append(parts, f.pyExpr(v.typ, prefix))
	}
	return strings.Join(parts, " | ")
}

// pyIntent is what the module means to declare, for verification.
func (f *fFile) pyIntent() fIntent {
	in := fIntent{decls: map[string]bool{"_Args": true}, keys: map[string]bool{}, vocab: pyVocabulary,
		header: []string{"import typing", "import capwire"}}
	for _, fn := range f.funcs {
		in.decls[fn.name] = true
		if fn.decode != "" {
			in.decls[fn.decode] = true
		}
		for _, p := range fn.params {
			in.keys[p] = true
		}
	}
	if len(f.outputDefs()) > 0 {
		in.header = append(in.header, pyShapes+": capwire.Shapes = {")
	}
	for _, d := range f.g.order {
		if !f.pyDeclares(d) {
			continue
		}
		in.decls[f.types[d]] = true
		if split, req, opt := pySplit(d, f.types[d]); d.kind == dRecord && split {
			in.decls[req] = true
			if !f.pyClassForm(d) {
				in.decls[opt] = true
			}
		}
		if d.kind == dRecord && f.pyClassForm(d) {
			for _, fl := range d.fields {
				in.keys[fl.wire] = true
			}
		}
	}
	return in
}

// pyVocabulary is every identifier the Python emitter writes outside
// comments and strings besides the intended names and keys.
var pyVocabulary = wordSet(`
	import typing capwire async def await return if is not None and or raise class
	dict str int float bool list object Any TypedDict total False
	TypeAlias Literal cast Result shared call timeout args v r
	decode_structured Shapes _SHAPES _Args _args _client _timeout`)

// bindPython adds the keyword parameters to a binding: the snake_case
// spellings of the arguments' wire names, with the Go rules for suffixes.
// A residual collision takes the arguments whole, as the Go emitter does
// for a record it cannot spell.
func (f *fFile) bindPython() {
	f.typeNames = map[string]bool{}
	for _, n := range f.types {
		f.typeNames[n] = true
	}
	for _, fn := range f.funcs {
		a := argsOf(fn)
		if a == nil {
			continue
		}
		wires := make([]string, len(a.fields))
		for i, fl := range a.fields {
			wires[i] = fl.wire
		}
		ids, x, y := mangleAll(wires, snake, pyParamReserved, "arg")
		if x >= 0 {
			fn.tp.whole = "property names " + quoteNote(wires[x]) + " and " + quoteNote(wires[y]) + " collide"
			continue
		}
		fn.params = ids
	}
}

// emitPython binds and, with source, writes and verifies a Python module.
func emitPython(server, digest string, plans []toolPlan, source bool) (*fFile, []byte, error) {
	f, err := bindForeign(Python, pyLang, server, digest, plans)
	if err != nil {
		return nil, nil, err
	}
	f.bindPython()
	if !source {
		return f, nil, nil
	}
	src := f.writePython()
	if err := verifyForeign(Python, src, f.pyIntent()); err != nil {
		return nil, nil, err
	}
	return f, src, nil
}
