package codegen

import (
	"strings"
)

// The TypeScript surface: the declarations a model writes against, in
// TypeScript syntax — functions with their argument object's type spelled
// out, interfaces, and enums as the literal unions they are. Every piece
// of server text on it is a string literal (a JavaScript one for enum
// values and names in code, quoted for prose after "//"), so a
// description cannot forge a line.

// tsPreambleText is the TypeScript preamble.
const tsPreambleText = `// MCP tools as TypeScript modules: each "// module m" below is imported as import * as m from "<dir>/m.js"; its client as import * as capwire from "@capbridge/capwire".
// Call: const r = await m.f({ field: v }); m.f() takes no arguments; m.f(args: { [key: string]: unknown }) takes them whole. Every f takes a last { timeoutMs, signal }.
// field?: T is optional: leave it out. "a"|"b": one of these values. A union takes any of its shapes; "by" names the property that tells them apart.
// If FOutput is declared: const out = m.decodeF(r); else r.text() or r.structured. Objects travel as plain objects under their wire names.
// r.content: blocks b (a field not set is undefined), b.kind "text" (b.text), "image"/"audio" (b.data Uint8Array, b.mime; no data past capbridge's size limit, b.size says it), "resource" (b.uri, b.text or b.data), "resource_link" (b.uri, b.name). r.text() is the text blocks only.
// A rejection is a refusal: capwire.DeniedError (err.code, err.path; capwire.hasCode(err, "timeout")). "bad_arguments": an argument breaks the tool's schema or has no JSON form, at err.path (a JSON Pointer). What capbridge cannot check, the server judges: r.isError, r.text() says why.
// End with (await capwire.shared()).close(): an open connection keeps Node running.
// Notes: task: the server runs it as a task, f waits for its result (capwire.start: in the background); destructive: the tool may destroy data; deprecated: avoid it; text result: read r.text(); =v default; lo..hi, >=lo, <=hi: range; len, items: sizes; untyped: why a field is unknown.
// "Quoted": the server's own text, often cut. await capwire.describe("m", ["f"]) gives a tool whole; await capwire.search("words") finds tools; await capwire.readResource("m", b.uri) reads a linked resource; const h = await capwire.start("m", "tool", args) runs a long call in the background, await capwire.collect(h) waits for its result.
`

// tsSurface renders a tool's declarations at detail lv.
func (f *fFile) tsSurface(b *strings.Builder, fn *fFunc, lv detail) {
	textOut, credit := f.elided(fn, lv, f.tsSurfaceType)
	note := toolNoteF(fn, lowerCamel, lv, textOut, credit)
	b.WriteString("function " + fn.name)
	open := false // the declaration's last line is still to end
	switch a := argsOf(fn); {
	case fn.tp.whole != "":
		b.WriteString("(args" + optionalTS(fn) + ": { [key: string]: unknown })")
		open = true
		if note != "" {
			note += "; "
		}
		note += "untyped: " + quoted(fn.tp.whole, maxParamNote)
	case a != nil:
		lines := f.tsSurfaceFields(a, lv)
		if oneLine(lines) {
			b.WriteString("({ " + strings.Join(lines, "; ") + " })")
			open = true
			break
		}
		b.WriteString("({")
		if note != "" {
			b.WriteString(" // " + note)
		}
		b.WriteByte('\n')
		for _, l := range lines {
			b.WriteString("\t" + l + "\n")
		}
		b.WriteString("})\n")
	default:
		b.WriteString("()")
		open = true
	}
	if open {
		if note != "" {
			b.WriteString(" // " + note)
		}
		b.WriteByte('\n')
	}
	for _, d := range f.byOwner[fn] {
		if d != textOut {
			f.tsSurfaceType(b, d, lv)
		}
	}
	if lv == detailDescribe {
		for _, d := range f.g.referenced(fn.tp) {
			if f.owner[d] != fn && d != textOut {
				f.tsSurfaceType(b, d, lv)
			}
		}
	}
}

// tsSurfaceExpr is tsExpr with enums spelled as their values, where a
// reader needs them.
func (f *fFile) tsSurfaceExpr(t typ, out bool) string {
	switch {
	case t.kind == kNamed && t.def.kind == dEnum:
		e := joinEnum(t.def, jsLit, "|", maxEnumShown)
		if t.nullable {
			e += " | null"
		}
		return e
	case t.kind == kList:
		el := f.tsSurfaceExpr(*t.elem, out)
		if strings.ContainsAny(el, " |") {
			el = "(" + el + ")"
		}
		e := el + "[]"
		if t.nullable {
			e += " | null"
		}
		return e
	case t.kind == kMap:
		e := "{ [key: string]: " + f.tsSurfaceExpr(*t.elem, out) + " }"
		if t.nullable {
			e += " | null"
		}
		return e
	}
	return f.tsExpr(t, out)
}

// tsSurfaceFields renders the fields of record d, one a line.
func (f *fFile) tsSurfaceFields(d *typeDef, lv detail) []string {
	var lines []string
	for _, fl := range d.fields {
		opt := ""
		if !fl.required {
			opt = "?"
		}
		line := tsKey(fl.wire) + opt + ": " + f.tsSurfaceExpr(fl.typ, f.tsOutput(d))
		if parts := fieldFacts(fl, lv); len(parts) > 0 {
			line += " // " + strings.Join(parts, "; ")
		}
		lines = append(lines, line)
	}
	return lines
}

func (f *fFile) tsSurfaceType(b *strings.Builder, d *typeDef, lv detail) {
	name := f.types[d]
	doc := typeDoc(d, lv, " // ")
	switch d.kind {
	case dRecord:
		if f.argsRoot[d] != nil {
			return // spelled out in the function's line
		}
		lines := f.tsSurfaceFields(d, lv)
		switch {
		case len(lines) == 0:
			b.WriteString("interface " + name + " {}" + doc + "\n")
			return
		case oneLine(lines):
			b.WriteString("interface " + name + " { " + strings.Join(lines, "; ") + " }" + doc + "\n")
			return
		}
		b.WriteString("interface " + name + " {" + doc + "\n")
		for _, l := range lines {
			b.WriteString("\t" + l + "\n")
		}
		b.WriteString("}\n")
	case dEnum:
		if !f.variant[d] {
			return // spelled out at the fields that use it
		}
		b.WriteString("type " + name + " = " + joinEnum(d, jsLit, "|", maxEnumShown) + "\n")
	case dUnion:
		b.WriteString("type " + name + " = " + f.tsUnion(d, f.tsOutput(d)) + unionTell(d, " // ") + "\n")
	}
}

// tsIndex is a tool's line on the index rung.
func (f *fFile) tsIndex(fn *fFunc) string {
	s := fn.name
	if note := toolNoteF(fn, lowerCamel, detailShort, nil, 0); note != "" {
		s += " // " + note
	}
	return s
}

// tsSignature is a tool's call on one line.
func (f *fFile) tsSignature(fn *fFunc) string {
	s := f.module + "." + fn.name + "("
	switch a := argsOf(fn); {
	case fn.tp.whole != "":
		s += "args" + optionalTS(fn) + ": { [key: string]: unknown }"
	case a != nil:
		var parts []string
		for _, fl := range a.fields {
			opt := ""
			if !fl.required {
				opt = "?"
			}
			parts = append(parts, tsKey(fl.wire)+opt+": "+f.tsSurfaceExpr(fl.typ, false))
		}
		s += "{ " + strings.Join(parts, "; ") + " }"
	}
	return s + ")"
}

// optionalTS marks whole arguments a call may leave out.
func optionalTS(fn *fFunc) string {
	if fn.tp.optional {
		return "?"
	}
	return ""
}
