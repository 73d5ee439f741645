package codegen

import (
	"fmt"
	"strings"
)

// The TypeScript emitter. It writes one ES module per server that imports
// only the capwire client (tsImport) and declares, per tool, one async
// function taking one arguments object (its interface spelled out, so
// arguments are named), the interfaces, string-literal unions and union
// aliases of its schemas, and, when the tool declares an output schema,
// its output type and a decode helper. Server text reaches the module
// only inside JSDoc blocks (cleaned, "*/" broken) and string literals
// escaped to printable ASCII, so no description, name or value can end a
// comment, a string or a line.

// tsImport is the package every TypeScript façade imports, as capwire
// (shared(), Client.call, Result, CallOptions).
const tsImport = "@capbridge/capwire"

// tsReservedWords are the words no TypeScript function, namespace or
// module name may be: ECMAScript's reserved words in strict mode (an ES
// module is strict), TypeScript's type keywords, the names a strict
// binding cannot take, and the module's own import.
var tsReservedWords = wordSet(`
	break case catch class const continue debugger default delete do else enum export extends
	false finally for function if import in instanceof new null return super switch this throw
	true try typeof var void while with implements interface let package private protected
	public static yield await async as from of get set type declare namespace module abstract
	any unknown never number string boolean bigint symbol object undefined keyof readonly infer
	is asserts satisfies accessor constructor require global
	eval arguments NaN Infinity capwire`)

// tsReservedTypes are the global names a type of the module must not
// shadow: the ones the module uses, and the standard ones a reader
// expects to mean what they always do.
var tsReservedTypes = wordSet(`
	Array ArrayBuffer ArrayLike BigInt Boolean DataView Date Error EvalError Function Iterable
	IterableIterator Iterator JSON Map Math Number Object Partial Pick Omit Promise PromiseLike
	RangeError ReadonlyArray ReadonlyMap ReadonlySet Record ReferenceError RegExp Required Set
	String Symbol SyntaxError TypeError URIError Uint8Array WeakMap WeakSet AbortSignal`)

var tsLang = fLang{
	funcStyle:    lowerCamel,
	funcFallback: "tool",
	decodePrefix: "decode",
	module:       func(s string) bool { return tsReservedWords[s] },
	funcs:        func(s string) bool { return tsReservedWords[s] },
	types:        func(s string) bool { return tsReservedTypes[s] },
}

// jsLit is the JavaScript string literal of s, escaped to printable
// ASCII: no quote, backslash, line terminator (U+2028 and U+2029
// included) or other codepoint outside ' '..'~' survives unescaped.
// Invalid UTF-8, which a JavaScript string cannot hold, becomes U+FFFD.
func jsLit(s string) string {
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
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsIdent reports a wire name that is a property name as it stands in
// TypeScript: ASCII letters, digits, '_' and '$', not leading with a
// digit. Any other is written as a string literal.
func jsIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$') {
			return false
		}
	}
	return true
}

// tsKey is a record's property name in TypeScript.
func tsKey(wire string) string {
	if jsIdent(wire) {
		return wire
	}
	return jsLit(wire)
}

// jsdocText makes clean text (see cleanText) safe inside a JSDoc block:
// "*/" cannot close it.
func jsdocText(s string) string { return strings.ReplaceAll(s, "*/", "*\\/") }

// tsExpr spells the TypeScript type of t; out says it is read from a
// result, where capwire decodes every integer as a number.
func (f *fFile) tsExpr(t typ, out bool) string {
	var e string
	switch t.kind {
	case kAny:
		return "unknown"
	case kString:
		e = "string"
	case kInteger:
		e = "number"
		if t.unsigned && !out {
			e = "number | bigint"
		}
	case kNumber:
		e = "number"
	case kBoolean:
		e = "boolean"
	case kList:
		el := f.tsExpr(*t.elem, out)
		if strings.ContainsAny(el, " ") {
			el = "(" + el + ")"
		}
		e = el + "[]"
	case kMap:
		e = "{ [key: string]: " + f.tsExpr(*t.elem, out) + " }"
	case kNamed:
		e = f.types[t.def]
	}
	if t.nullable {
		e += " | null"
	}
	return e
}

// tsOutput reports a type declared by an output schema.
func (f *fFile) tsOutput(d *typeDef) bool { return f.g.output[d] }

// tsForm is one of the three files of a TypeScript façade: the module
// (.ts), and the same module as JavaScript (.js) with its declarations
// (.d.ts), which run as they are on Node, with no compiler.
type tsForm uint8

const (
	formTS tsForm = iota
	formJS
	formDTS
)

// tsShared is what the forms of a module write alike, kept from the
// module (.ts), which is written first, for the other two: per function,
// where its doc comment and its types are in src. Rendering prose and
// types once rather than in each form is a third of a big façade's
// writing.
type tsShared struct {
	src        string
	doc, types [][2]int
}

func (sh *tsShared) text(span [2]int) string { return sh.src[span[0]:span[1]] }

// writeTS writes the module in form. Every line is the generator's own;
// server text enters only through jsLit, tsKey and jsdoc. formTS fills
// sh; the other forms copy from it.
func (f *fFile) writeTS(form tsForm, sh *tsShared) []byte {
	if form == formTS {
		sh.doc, sh.types = make([][2]int, len(f.funcs)), make([][2]int, len(f.funcs))
	}
	var b strings.Builder
	b.WriteString("// Code generated by capbridge; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Listing SHA-256: %s.\n", f.digest)
	b.WriteString("//\n")
	commentLines(&b, "", fmt.Sprintf("Module %s calls the tools of MCP server %s through capbridge. Each function sends its tool's name and its arguments' wire names verbatim and resolves with the tool's result. A tool's failure is a result with isError set; a refused call rejects (capwire.DeniedError).", f.module, commentQuote(f.server)))
	b.WriteByte('\n')
	fmt.Fprintf(&b, "import * as capwire from %s;\n", jsLit(tsImport))
	for i, fn := range f.funcs {
		f.writeTSFunc(&b, fn, form, sh, i)
		switch form {
		case formJS:
			continue // types exist only for the checker
		case formDTS:
			b.WriteString(sh.text(sh.types[i]))
			continue
		}
		start := b.Len()
		for _, d := range f.byOwner[fn] {
			f.writeTSType(&b, d)
		}
		sh.types[i] = [2]int{start, b.Len()}
	}
	if form != formDTS {
		f.writeTSShapes(&b, form)
	}
	if form == formTS {
		sh.src = b.String()
	}
	return []byte(b.String())
}

// tsDoc writes a JSDoc block of paragraphs of clean text, wrapped; one
// short line stays on one line.
func tsDoc(b *strings.Builder, indent string, paras ...string) {
	var lines []string
	for _, p := range paras {
		if p == "" {
			continue
		}
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, wrap(jsdocText(p), docWidth)...)
	}
	b.WriteString(indent)
	if len(lines) == 1 {
		b.WriteString("/** ")
		b.WriteString(lines[0])
		b.WriteString(" */\n")
		return
	}
	b.WriteString("/**\n")
	for _, l := range lines {
		b.WriteString(indent)
		if l == "" {
			b.WriteString(" *\n")
			continue
		}
		b.WriteString(" * ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(indent)
	b.WriteString(" */\n")
}

func (f *fFile) writeTSFunc(b *strings.Builder, fn *fFunc, form tsForm, sh *tsShared, i int) {
	t := fn.tp.tool
	b.WriteByte('\n')
	if form == formTS {
		start := b.Len()
		tsDoc(b, "", f.funcDoc(fn, "an object")...)
		sh.doc[i] = [2]int{start, b.Len()}
	} else {
		b.WriteString(sh.text(sh.doc[i]))
	}
	args, arg := "", "{}"
	switch a := argsOf(fn); {
	case fn.tp.whole != "":
		args, arg = "args"+optionalTS(fn)+": { [key: string]: unknown }, ", "args"
	case a != nil:
		args, arg = "args: "+f.types[a]+", ", "args"
	}
	switch form {
	case formTS:
		fmt.Fprintf(b, "export async function %s(%sopts?: capwire.CallOptions): Promise<capwire.Result> {\n", fn.name, args)
	case formJS:
		params := "opts"
		if arg == "args" {
			params = "args, opts"
		}
		fmt.Fprintf(b, "export async function %s(%s) {\n", fn.name, params)
	case formDTS:
		fmt.Fprintf(b, "export declare function %s(%sopts?: capwire.CallOptions): Promise<capwire.Result>;\n", fn.name, args)
	}
	if form != formDTS {
		fmt.Fprintf(b, "  const c = await capwire.shared();\n  return c.call(%s, %s, %s, opts);\n}\n", jsLit(f.server), jsLit(t.Name), arg)
	}
	if fn.decode == "" {
		return
	}
	out := f.tsExpr(*fn.tp.output, true)
	b.WriteByte('\n')
	tsDoc(b, "", fmt.Sprintf("Returns the structured result of %s (tool %s) as %s, checked against the output schema's type at every depth: content that is missing or does not fit throws a capwire.DecodeError naming the place. Keys the schema does not declare are allowed.", fn.name, commentQuote(t.Name), out))
	switch form {
	case formTS:
		fmt.Fprintf(b, "export function %s(r: capwire.Result): %s {\n", fn.decode, out)
		fmt.Fprintf(b, "  return capwire.decodeStructured<%s>(r, %s, %s);\n}\n", out, f.shapeOfType(*fn.tp.output, jsLit), tsShapes)
	case formJS:
		fmt.Fprintf(b, "export function %s(r) {\n", fn.decode)
		fmt.Fprintf(b, "  return capwire.decodeStructured(r, %s, %s);\n}\n", f.shapeOfType(*fn.tp.output, jsLit), tsShapes)
	case formDTS:
		fmt.Fprintf(b, "export declare function %s(r: capwire.Result): %s;\n", fn.decode, out)
	}
}

// tsShapes is the module's table of output shapes; no function or type
// name begins with '_'.
const tsShapes = "_shapes"

// writeTSShapes writes the table of the output types' shapes that the
// decode helpers check against.
func (f *fFile) writeTSShapes(b *strings.Builder, form tsForm) {
	defs := f.outputDefs()
	if len(defs) == 0 {
		return
	}
	b.WriteByte('\n')
	tsDoc(b, "", "The output types as capwire shapes, which the decode helpers check structured content against.")
	if form == formJS {
		b.WriteString("const " + tsShapes + " = {\n")
	} else {
		b.WriteString("const " + tsShapes + ": capwire.Shapes = {\n")
	}
	for _, d := range defs {
		fmt.Fprintf(b, "  %s: %s,\n", f.types[d], f.shapeOfDef(d, jsLit))
	}
	b.WriteString("};\n")
}

func (f *fFile) writeTSType(b *strings.Builder, d *typeDef) {
	name := f.types[d]
	out := f.tsOutput(d)
	b.WriteByte('\n')
	head := fmt.Sprintf("%s is %s of tool %s.", name, f.role(d), commentQuote(f.g.owner[d].tp.tool.Name))
	switch d.kind {
	case dRecord:
		tsDoc(b, "", head, cleanText(d.doc, maxToolDesc))
		if len(d.fields) == 0 {
			fmt.Fprintf(b, "export interface %s {}\n", name)
			return
		}
		fmt.Fprintf(b, "export interface %s {\n", name)
		for _, fl := range d.fields {
			if note := fieldDoc(fl); note != "" {
				tsDoc(b, "  ", note)
			}
			opt := ""
			if !fl.required {
				opt = "?"
			}
			fmt.Fprintf(b, "  %s%s: %s;\n", tsKey(fl.wire), opt, f.tsExpr(fl.typ, out))
		}
		b.WriteString("}\n")
	case dEnum:
		tsDoc(b, "", head, cleanText(d.doc, maxToolDesc))
		fmt.Fprintf(b, "export type %s = %s;\n", name, joinEnum(d, jsLit, " | ", 0))
	case dUnion:
		tsDoc(b, "", head, cleanText(d.doc, maxToolDesc), "One of its variants, "+unionHow(d)+".")
		fmt.Fprintf(b, "export type %s = %s;\n", name, f.tsUnion(d, out))
	}
}

func (f *fFile) tsUnion(d *typeDef, out bool) string {
	var parts []string
	for _, v := range d.variants {
		parts = append(parts, f.tsExpr(v.typ, out))
	}
	return strings.Join(parts, " | ")
}

// tsIntent is what the module in form means to declare, for
// verification.
func (f *fFile) tsIntent(form tsForm) fIntent {
	in := fIntent{decls: map[string]bool{}, keys: map[string]bool{}, vocab: tsVocabulary,
		header: []string{"import * as capwire from " + jsLit(tsImport) + ";"}}
	for _, fn := range f.funcs {
		in.decls[fn.name] = true
		if fn.decode != "" {
			in.decls[fn.decode] = true
		}
	}
	switch {
	case len(f.outputDefs()) == 0 || form == formDTS:
	case form == formJS:
		in.header = append(in.header, "const "+tsShapes+" = {")
	default:
		in.header = append(in.header, "const "+tsShapes+": capwire.Shapes = {")
	}
	for _, d := range f.g.order {
		if form == formJS {
			in.keys[f.types[d]] = true // named in the shapes, declared nowhere
		} else {
			in.decls[f.types[d]] = true
		}
		for _, fl := range d.fields {
			if jsIdent(fl.wire) {
				in.keys[fl.wire] = true
			}
		}
	}
	return in
}

// tsVocabulary is every identifier the TypeScript emitter writes outside
// comments and strings besides the intended names and keys.
var tsVocabulary = wordSet(`
	import as from export const async function await return null
	interface type declare capwire shared call CallOptions Result Promise args opts c r key
	string number boolean bigint unknown decodeStructured Shapes _shapes`)

// tsFiles are a TypeScript façade's three forms: the module, and the
// same as JavaScript with its declarations.
type tsFiles struct{ ts, js, dts []byte }

// emitTS binds and, with source, writes and verifies a TypeScript module
// in its three forms.
func emitTS(server, digest string, plans []toolPlan, source bool) (*fFile, tsFiles, error) {
	f, err := bindForeign(TypeScript, tsLang, server, digest, plans)
	if err != nil || !source {
		return f, tsFiles{}, err
	}
	var out tsFiles
	var sh tsShared
	for _, w := range []struct {
		form tsForm
		dst  *[]byte
	}{{formTS, &out.ts}, {formJS, &out.js}, {formDTS, &out.dts}} { // formTS first: it fills sh
		src := f.writeTS(w.form, &sh)
		if err := verifyForeign(TypeScript, src, f.tsIntent(w.form)); err != nil {
			return nil, tsFiles{}, err
		}
		*w.dst = src
	}
	return f, out, nil
}
