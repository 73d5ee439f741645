package codegen

import (
	"strings"
)

// The Python surface: the declarations a model writes against, in Python
// syntax — async functions with their keyword parameters, TypedDicts, and
// enums as the Literal types they are. Every piece of server text on it is
// a string literal (a Python one for enum values and keys in code, quoted
// for prose after "#"), so a description cannot forge a line.

// pyPreambleText is the Python preamble.
const pyPreambleText = `# MCP tools as Python modules: each "# module m" below is imported as "import m" from the façade directory, and calls the capwire package.
# Call: r = await m.f(field=v) (async, keyword-only); m.f() takes no arguments; m.f(args) takes a dict whole. Every f takes _timeout=seconds.
# "field: T = ..." is optional: leave it out. Literal["a", "b"]: one of these values. A union takes any of its shapes; "by" names the key that tells them apart.
# Objects are TypedDicts: plain dicts under their wire names. If FOutput is declared: out = m.decode_f(r); else r.text() or r.structured.
# r.content: blocks b (a field not set is None), b.kind "text" (b.text), "image"/"audio" (b.data bytes, b.mime; data None past capbridge's size limit, b.size says it), "resource" (b.uri, b.text or b.data), "resource_link" (b.uri, b.name). r.text() is the text blocks only.
# A raised capwire.Denied is a refusal (err.code, err.path; capwire.has_code(err, capwire.TIMEOUT)). "bad_arguments": an argument breaks the tool's schema or has no JSON form, at err.path (a JSON Pointer). What capbridge cannot check, the server judges: r.is_error, r.text() says why.
# End with await (await capwire.shared()).close(), so no connection is left open.
# Notes: task: the server runs it as a task, f waits for its result (capwire.start: in the background); destructive: the tool may destroy data; deprecated: avoid it; text result: read r.text(); =v default; lo..hi, >=lo, <=hi: range; len, items: sizes; untyped: why a field is Any.
# "Quoted": the server's own text, often cut. await capwire.describe("m", "f") gives a tool whole; await capwire.search("words") finds tools; await capwire.read_resource("m", b.uri) reads a linked resource; h = await capwire.start("m", "tool", args) runs a long call in the background, await capwire.collect(h) waits for its result.
`

// pySurface renders a tool's declarations at detail lv.
func (f *fFile) pySurface(b *strings.Builder, fn *fFunc, lv detail) {
	textOut, credit := f.elided(fn, lv, f.pySurfaceType)
	note := toolNoteF(fn, snake, lv, textOut, credit)
	b.WriteString("async def " + fn.name)
	open := true // the declaration's last line is still to end
	switch a := argsOf(fn); {
	case fn.tp.whole != "" && a != nil:
		b.WriteString("(args: " + f.types[a] + ")")
	case fn.tp.whole != "":
		b.WriteString("(args: dict[str, Any]" + optionalPy(fn) + ")")
		if note != "" {
			note += "; "
		}
		note += "untyped: " + quoted(fn.tp.whole, maxParamNote)
	case a != nil:
		lines := f.pySurfaceParams(fn, a, lv)
		if code, ok := pyOneLine(lines, ", "); ok {
			b.WriteString("(*, " + code + ")")
			break
		}
		b.WriteString("(*,")
		if note != "" {
			b.WriteString(" # " + note)
		}
		b.WriteByte('\n')
		pyLines(b, lines, ",")
		b.WriteString(")\n")
		open = false
	default:
		b.WriteString("()")
	}
	if open {
		if note != "" {
			b.WriteString(" # " + note)
		}
		b.WriteByte('\n')
	}
	for _, d := range f.byOwner[fn] {
		if (f.argsRoot[d] != fn || fn.params == nil) && d != textOut {
			f.pySurfaceType(b, d, lv)
		}
	}
	if lv == detailDescribe {
		for _, d := range f.g.referenced(fn.tp) {
			if f.owner[d] != fn && f.pyDeclares(d) && d != textOut {
				f.pySurfaceType(b, d, lv)
			}
		}
	}
}

// pySurfaceExpr is pyExpr with enums spelled as their Literal values.
func (f *fFile) pySurfaceExpr(t typ) string {
	var e string
	switch {
	case t.kind == kNamed && t.def.kind == dEnum:
		e = "Literal[" + joinEnum(t.def, pyLit, ", ", maxEnumShown) + "]"
	case t.kind == kList:
		e = "list[" + f.pySurfaceExpr(*t.elem) + "]"
	case t.kind == kMap:
		e = "dict[str, " + f.pySurfaceExpr(*t.elem) + "]"
	default:
		return f.pyExpr(t, "")
	}
	if t.nullable {
		e += " | None"
	}
	return e
}

// pySurfaceParams renders fn's keyword parameters, one a line, each with
// its notes after " # ".
func (f *fFile) pySurfaceParams(fn *fFunc, a *typeDef, lv detail) []pyLine {
	var lines []pyLine
	for i, fl := range a.fields {
		line := pyLine{code: fn.params[i] + ": " + f.pySurfaceExpr(fl.typ)}
		if !fl.required {
			line.code += " = ..."
		}
		line.note = strings.Join(fieldFacts(fl, lv), "; ")
		lines = append(lines, line)
	}
	return lines
}

// pyLine is a line of a Python declaration: code, and a note for after
// "#", kept apart because the code may hold a literal with a '#'.
type pyLine struct{ code, note string }

// pyOneLine joins lines with sep if they fit one line: few, no notes.
func pyOneLine(lines []pyLine, sep string) (string, bool) {
	if len(lines) > maxOneLine {
		return "", false
	}
	var codes []string
	for _, l := range lines {
		if l.note != "" {
			return "", false
		}
		codes = append(codes, l.code)
	}
	return strings.Join(codes, sep), true
}

// pyLines writes lines indented, each code followed by end and its note.
func pyLines(b *strings.Builder, lines []pyLine, end string) {
	for _, l := range lines {
		b.WriteString("    " + l.code + end)
		if l.note != "" {
			b.WriteString(" # " + l.note)
		}
		b.WriteByte('\n')
	}
}

// pySurfaceKeys renders the keys of TypedDict d, one a line.
func (f *fFile) pySurfaceKeys(d *typeDef, class bool, lv detail) []pyLine {
	var lines []pyLine
	for _, fl := range d.fields {
		t := f.pySurfaceExpr(fl.typ)
		if !fl.required {
			t = "NotRequired[" + t + "]"
		}
		key := fl.wire
		if !class {
			key = pyLit(fl.wire)
		}
		lines = append(lines, pyLine{code: key + ": " + t, note: strings.Join(fieldFacts(fl, lv), "; ")})
	}
	return lines
}

func (f *fFile) pySurfaceType(b *strings.Builder, d *typeDef, lv detail) {
	name := f.types[d]
	doc := typeDoc(d, lv, " # ")
	switch d.kind {
	case dRecord:
		class := f.pyClassForm(d)
		lines := f.pySurfaceKeys(d, class, lv)
		if !class {
			b.WriteString(name + " = TypedDict(" + pyLit(name) + ", {" + doc + "\n")
			pyLines(b, lines, ",")
			b.WriteString("})\n")
			return
		}
		if len(lines) == 0 {
			b.WriteString("class " + name + "(TypedDict): pass" + doc + "\n")
			return
		}
		if code, ok := pyOneLine(lines, "; "); ok {
			b.WriteString("class " + name + "(TypedDict): " + code + doc + "\n")
			return
		}
		b.WriteString("class " + name + "(TypedDict):" + doc + "\n")
		pyLines(b, lines, "")
	case dEnum:
		if !f.variant[d] {
			return // spelled out at the fields that use it
		}
		b.WriteString(name + " = Literal[" + joinEnum(d, pyLit, ", ", maxEnumShown) + "]\n")
	case dUnion:
		b.WriteString(name + " = " + f.pyUnion(d, "") + unionTell(d, " # ") + "\n")
	}
}

// pyIndex is a tool's line on the index rung.
func (f *fFile) pyIndex(fn *fFunc) string {
	s := fn.name
	if note := toolNoteF(fn, snake, detailShort, nil, 0); note != "" {
		s += " # " + note
	}
	return s
}

// pySignature is a tool's call on one line.
func (f *fFile) pySignature(fn *fFunc) string {
	s := f.module + "." + fn.name + "("
	switch a := argsOf(fn); {
	case fn.tp.whole != "" && a != nil:
		s += "args: " + f.types[a]
	case fn.tp.whole != "":
		s += "args: dict[str, Any]" + optionalPy(fn)
	case a != nil:
		var parts []string
		for i, fl := range a.fields {
			p := fn.params[i] + ": " + f.pySurfaceExpr(fl.typ)
			if !fl.required {
				p += " = ..."
			}
			parts = append(parts, p)
		}
		s += "*, " + strings.Join(parts, ", ")
	}
	return s + ")"
}

// optionalPy marks whole arguments a call may leave out, as the surface
// marks an optional field.
func optionalPy(fn *fFunc) string {
	if fn.tp.optional {
		return " = ..."
	}
	return ""
}
