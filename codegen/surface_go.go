package codegen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/truncate"
)

// The Go surface: the declarations a model writes against, in Go syntax.
// The conventions every server shares are in the preamble, printed once
// (Preamble); a server's surface is one head line and its declarations.
// Every piece of server text on it is a Go string literal (see quoted),
// so a description cannot forge a line.

// goPreambleText is the Go preamble: how to import, call, read results
// and errors, and what the surface's own notation means.
const goPreambleText = `// MCP tools as Go packages: each "// package p" below is imported as "<module>/p", with "context" and "github.com/capbridge/capbridge/capwire".
// Call: r, err := p.F(ctx, p.FArgs{Field: v}); p.F(ctx) takes no arguments; p.F(ctx, map[string]any{...}) takes them whole (nil: none).
// Fields without a pointer are required (a nil slice is sent as null: give []T{}). Pointer fields are optional: capwire.Ptr[float64](3), capwire.Ptr("x"), or leave them out.
// Enum T: constants T<Value>; a literal ("open") fits a required one. A union interface{ A | W(T) } takes an A{...}, or W(v) wrapping a T. An output union is any, holding one of its shapes.
// If FOutput is declared: out, err := p.DecodeF(r); else r.Text() or r.Decode(&v).
// r.Content: blocks b, b.Kind "text" (b.Text), "image"/"audio" (b.Data []byte, b.MIME; Data nil past capbridge's size limit, b.Size says it), "resource" (b.URI, b.Text or b.Data), "resource_link" (b.URI, b.Name). r.Text() is the text blocks only.
// err != nil: refused, *capwire.Denied (d.Code, d.Path, d.Message; errors.Is(err, capwire.ErrTimeout)). "bad_arguments": an argument breaks the tool's schema or has no JSON form, at d.Path (a JSON Pointer). What capbridge cannot check, the server judges: r.IsError, r.Text() says why.
// Notes: task: the server runs it as a task, F waits for its result (capwire.Start: in the background); destructive: the tool may destroy data; deprecated: avoid it; text result: read r.Text(); =v default; lo..hi, >=lo, <=hi: range; len, items: sizes; untyped: why a field is any.
// "Quoted": the server's own text, often cut. capwire.Describe(ctx, "p", "F") gives a tool whole; capwire.Search(ctx, "words", 0) finds tools; capwire.ReadResource(ctx, "p", b.URI) reads a linked resource; h, err := capwire.Start(ctx, "p", "tool", args) runs a long call in the background, capwire.Collect(ctx, h) waits for its result.
`

// docs renders every tool for the surface, Describe and Search, and
// indexes its words in ix unless ix is nil.
func (f *goFile) docs(ix *searchBuilder) ([]toolDoc, []func(detail) string) {
	byOwner := map[*goFunc][]*typeDef{}
	for _, d := range f.order {
		byOwner[f.owner[d]] = append(byOwner[f.owner[d]], d)
	}
	variant := map[*typeDef]bool{}
	for _, d := range f.order {
		for _, v := range d.variants {
			if v.typ.kind == kNamed {
				variant[v.typ.def] = true
			}
		}
	}
	textOut := f.textOutputs()
	out := make([]toolDoc, 0, len(f.funcs))
	decls := make([]func(detail) string, 0, len(f.funcs))
	for _, fn := range f.funcs {
		t := fn.tp.tool
		doc := toolDoc{name: fn.name, wire: t.Name}
		decls = append(decls, func(lv detail) string {
			// What leaving the output type out saves is spent on the
			// description, which must then say what the tool returns.
			elide := textOut[t.Name]
			if lv == detailDescribe {
				elide = nil // a description gives the tool whole
			}
			credit := 0
			if d := elide; d != nil {
				var skipped strings.Builder
				f.surfaceType(&skipped, d, lv, variant)
				credit = max(0, skipped.Len()-len("text result, "))
			}
			var b strings.Builder
			f.surfaceFunc(&b, fn, lv, elide, credit)
			for _, d := range byOwner[fn] {
				if d != elide {
					f.surfaceType(&b, d, lv, variant)
				}
			}
			if lv == detailDescribe {
				// Types declared by an earlier tool of the same shape are
				// spelled out too, so one description stands alone.
				for _, d := range f.referenced(fn.tp) {
					if f.owner[d] != nil && f.owner[d] != fn {
						f.surfaceType(&b, d, lv, variant)
					}
				}
			}
			return b.String()
		})
		doc.index = fn.name
		if note := f.toolNote(fn, detailShort, nil, 0); note != "" {
			doc.index += " // " + note
		}
		doc.sig = f.signature(fn)
		ix.add(t, fn.tp.args)
		out = append(out, doc)
	}
	return out, decls
}

// signature is a tool's call on one line, its arguments' fields spelled
// out.
func (f *goFile) signature(fn *goFunc) string {
	s := f.pkg + "." + fn.name + "(ctx"
	switch {
	case fn.tp.whole != "":
		s += ", map[string]any{…}"
	case fn.args != "":
		var parts []string
		for i, fl := range fn.tp.args.fields {
			e, _ := f.fieldType(fn.tp.args, fl)
			parts = append(parts, f.fields[fn.tp.args][i]+" "+e)
		}
		s += ", " + f.pkg + "." + fn.args + "{" + strings.Join(parts, "; ") + "}"
	}
	return s + ")"
}

// spellsWire reports whether fn's name is its wire name's words with only
// separators and case changed. Then the surface leaves the wire name out:
// the façade sends it, and a reader looking for "get-sum" finds GetSum.
func spellsWire(fn *goFunc) bool {
	w, lost := spell(fn.tp.tool.Name, exported)
	return !lost && w == fn.name
}

// toolNote is what the surface says of a tool after its declaration: its
// wire name when the function's name does not spell it, the hint that
// changes how it should be used, and its description.
func (f *goFile) toolNote(fn *goFunc, lv detail, textOut *typeDef, credit int) string {
	t := fn.tp.tool
	var parts []string
	if !spellsWire(fn) || lv == detailDescribe {
		parts = append(parts, "tool "+strconv.QuoteToASCII(truncate.Ellipsis(t.Name, maxNameNote)))
	}
	parts = append(parts, toolLabels(t, lv, textOut != nil)...)
	if desc := toolDescription(t); desc != "" && lv != detailSigs {
		parts = append(parts, toolProse(t, lv, proseCaps[lv], credit))
	}
	return strings.Join(parts, ", ")
}

// surfaceFunc writes fn's declaration: its arguments' fields spelled out
// in the record literal, its note after it.
func (f *goFile) surfaceFunc(b *strings.Builder, fn *goFunc, lv detail, textOut *typeDef, credit int) {
	note := f.toolNote(fn, lv, textOut, credit)
	b.WriteString("func " + fn.name)
	switch {
	case fn.tp.whole != "":
		b.WriteString("(ctx, map[string]any)")
		if note != "" {
			note += "; "
		}
		note += "untyped: " + quoted(fn.tp.whole, maxParamNote)
	case fn.args != "":
		lines := f.surfaceFields(fn.tp.args, lv)
		if oneLine(lines) {
			b.WriteString("(ctx, " + fn.args + "{" + strings.Join(lines, "; ") + "})")
			break
		}
		b.WriteString("(ctx, " + fn.args + "{")
		if note != "" {
			b.WriteString(" // " + note)
		}
		b.WriteByte('\n')
		for _, l := range lines {
			b.WriteString("\t" + l + "\n")
		}
		b.WriteString("})\n")
		return
	default:
		b.WriteString("(ctx)")
	}
	if note != "" {
		b.WriteString(" // " + note)
	}
	b.WriteByte('\n')
}

// surfaceFields renders the fields of record d, one a line; consecutive
// fields of one type and no comment share a line ("A, B float64").
func (f *goFile) surfaceFields(d *typeDef, lv detail) []string {
	var lines []string
	lastType := ""
	for i, fl := range d.fields {
		e, _ := f.fieldType(d, fl)
		name := f.fields[d][i]
		var parts []string
		if vals := f.enumValues(fl.typ); vals != "" {
			parts = append(parts, vals)
		}
		parts = append(parts, fieldFacts(fl, lv, f.requiredFacts(d, fl)...)...)
		if len(parts) == 0 && lastType == e {
			last := lines[len(lines)-1]
			lines[len(lines)-1] = strings.TrimSuffix(last, " "+e) + ", " + name + " " + e
			continue
		}
		line := name + " " + e
		lastType = ""
		if len(parts) > 0 {
			line += " // " + strings.Join(parts, "; ")
		} else {
			lastType = e
		}
		lines = append(lines, line)
	}
	return lines
}

// enumValues lists the values of the enum t is (or holds), for the field
// that uses it: enums are shown where they are used, not declared apart.
func (f *goFile) enumValues(t typ) string {
	for t.kind == kList || t.kind == kMap {
		t = *t.elem
	}
	if t.kind != kNamed || t.def.kind != dEnum {
		return ""
	}
	return joinEnum(t.def, strconv.Quote, "|", maxEnumShown)
}

func (f *goFile) surfaceType(b *strings.Builder, d *typeDef, lv detail, variant map[*typeDef]bool) {
	name := f.types[d]
	switch d.kind {
	case dRecord:
		if d == f.owner[d].tp.args {
			return // spelled out in the function's line
		}
		if why := f.opaque[d]; why != "" {
			fmt.Fprintf(b, "type %s map[string]any // untyped: %s\n", name, quoted(why, maxParamNote))
			return
		}
		lines := f.surfaceFields(d, lv)
		doc := typeDoc(d, lv, " // ")
		switch {
		case len(lines) == 0:
			fmt.Fprintf(b, "type %s struct{}%s\n", name, doc)
			return
		case oneLine(lines):
			fmt.Fprintf(b, "type %s struct{ %s }%s\n", name, strings.Join(lines, "; "), doc)
			return
		}
		fmt.Fprintf(b, "type %s struct {%s\n", name, doc)
		for _, l := range lines {
			b.WriteString("\t" + l + "\n")
		}
		b.WriteString("}\n")
	case dEnum:
		if !variant[d] {
			return // listed at the fields that use it
		}
		fmt.Fprintf(b, "type %s %s // %s\n", name, enumBase(d), joinEnum(d, strconv.Quote, "|", maxEnumShown))
	case dUnion:
		f.surfaceUnion(b, d)
	}
}

// surfaceUnion writes union d: in arguments, the interface its variants
// satisfy, spelled as a Go constraint (a record A, or W(T) for a wrapper
// W of a value of type T); in outputs, any and the shapes it may hold.
// A note says what tells the variants apart when it is not their JSON
// kind.
func (f *goFile) surfaceUnion(b *strings.Builder, d *typeDef) {
	out := f.output[d]
	var parts []string
	for i, v := range d.variants {
		w := f.wrappers[d][i]
		t := f.expr(typ{kind: v.typ.kind, elem: v.typ.elem, def: v.typ.def, unsigned: v.typ.unsigned}, out)
		switch {
		case w == "":
			parts = append(parts, f.types[v.typ.def])
		case out:
			parts = append(parts, t)
		default:
			parts = append(parts, w+"("+t+")")
		}
	}
	if out {
		fmt.Fprintf(b, "type %s any // %s%s\n", f.types[d], strings.Join(parts, " | "), unionTell(d, "; "))
		return
	}
	fmt.Fprintf(b, "type %s interface{ %s }%s\n", f.types[d], strings.Join(parts, " | "), unionTell(d, " // "))
}
