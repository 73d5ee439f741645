package codegen

import (
	"fmt"
	"strconv"
	"strings"
)

// The Go surface: the declarations a model writes against, in Go syntax,
// after a short fixed preamble. Every piece of server text on it is a Go
// string literal (see quoted), so a description cannot forge a line.

// goPreamble is the surface's fixed head for a rung and index page.
func (f *goFile) goPreamble(level SurfaceLevel, page, pages int) string {
	p := f.pkg
	var b strings.Builder
	fmt.Fprintf(&b, "// Go package %s: MCP server %s, %d tools. Import \"<module>/%s\" with \"context\" and %q.\n", p, strconv.QuoteToASCII(f.server), len(f.funcs), p, capwireImport)
	fmt.Fprintf(&b, "// Call: r, err := %s.F(ctx, %s.FArgs{Field: v}). Pointer fields are optional (new(v)); others are required.\n", p, p)
	b.WriteString("// err != nil: capbridge refused the call (errors.Is(err, capwire.ErrTimeout); errors.As(err, &d), d *capwire.Denied, d.Code).\n")
	fmt.Fprintf(&b, "// r.IsError: the tool failed, r.Text() says why. Typed output: out, err := %s.DecodeF(r). Quoted text is the server's.\n", p)
	switch level {
	case SurfaceShort:
		b.WriteString("// Descriptions are shortened; describe(names) gives the full declarations.\n")
	case SurfaceSignatures:
		b.WriteString("// Descriptions are omitted; describe(names) gives them.\n")
	case SurfaceIndex:
		fmt.Fprintf(&b, "// Index page %d of %d: describe(names) gives declarations; search(query) finds tools.\n", page, pages)
	}
	return b.String()
}

// docs renders every tool for the surface, Describe and Search.
func (f *goFile) docs() []toolDoc {
	byOwner := map[*goFunc][]*typeDef{}
	for _, d := range f.order {
		byOwner[f.owner[d]] = append(byOwner[f.owner[d]], d)
	}
	out := make([]toolDoc, 0, len(f.funcs))
	for _, fn := range f.funcs {
		t := fn.tp.tool
		doc := toolDoc{name: fn.name, wire: t.Name}
		for lv := detailFull; lv <= detailSigs; lv++ {
			var b strings.Builder
			f.surfaceFunc(&b, fn, lv)
			for _, d := range byOwner[fn] {
				f.surfaceType(&b, d, lv)
			}
			doc.decl[lv] = b.String()
		}
		doc.index = fn.name + " // tool " + strconv.QuoteToASCII(clip(t.Name, maxNameNote))
		if desc := toolDescription(t); desc != "" {
			doc.index += ": " + quoted(desc, surfaceShortDesc)
		}
		doc.sig = f.signature(fn)
		add := func(text string, w int) {
			for _, word := range searchWords(text) {
				doc.search = append(doc.search, word)
				doc.weight = append(doc.weight, w)
			}
		}
		add(t.Name, 4)
		add(t.Title, 3)
		add(cleanText(t.Description, maxToolDesc), 2)
		if fn.tp.args != nil {
			for _, fl := range fn.tp.args.fields {
				add(fl.wire, 1)
			}
		}
		out = append(out, doc)
	}
	return out
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

func (f *goFile) surfaceFunc(b *strings.Builder, fn *goFunc, lv detail) {
	t := fn.tp.tool
	b.WriteString("// tool ")
	b.WriteString(strconv.QuoteToASCII(clip(t.Name, maxNameNote)))
	if desc := toolDescription(t); desc != "" && lv != detailSigs {
		max := surfaceLongDesc
		if lv == detailShort {
			max = surfaceShortDesc
		}
		b.WriteString(": ")
		b.WriteString(quoted(desc, max))
	}
	if h := t.Hints; lv == detailFull {
		// Only the claims that change how a model should use the tool.
		switch {
		case h.Destructive != nil && *h.Destructive:
			b.WriteString(" (destructive)")
		case h.ReadOnly != nil && *h.ReadOnly:
			b.WriteString(" (read-only)")
		}
	}
	b.WriteString("\nfunc ")
	b.WriteString(fn.name)
	b.WriteByte('(')
	b.WriteString(f.params(fn, true))
	b.WriteByte(')')
	if fn.tp.whole != "" {
		b.WriteString(" // args: wire name → value; " + quoted(fn.tp.whole, maxParamNote))
	}
	b.WriteByte('\n')
	if fn.decode != "" {
		fmt.Fprintf(b, "func %s(r) (%s, error)\n", fn.decode, fn.out)
	}
}

func (f *goFile) surfaceType(b *strings.Builder, d *typeDef, lv detail) {
	name := f.types[d]
	switch d.kind {
	case dRecord:
		if why := f.opaque[d]; why != "" {
			fmt.Fprintf(b, "type %s map[string]any // %s\n", name, quoted(why, maxParamNote))
			return
		}
		fmt.Fprintf(b, "type %s struct {", name)
		if doc := cleanText(d.doc, surfaceFieldLong); doc != "" && lv == detailFull {
			b.WriteString(" // " + quoted(doc, surfaceFieldLong))
		}
		b.WriteByte('\n')
		for i, fl := range d.fields {
			e, _ := f.fieldType(d, fl)
			fmt.Fprintf(b, "\t%s %s", f.fields[d][i], e)
			var parts []string
			if lv != detailSigs {
				max := surfaceFieldLong
				if lv == detailShort {
					max = surfaceFieldShort
				}
				if doc := cleanText(fl.doc, max); doc != "" {
					parts = append(parts, quoted(doc, max))
				}
			}
			for _, fact := range f.facts(d, fl) {
				if lv == detailFull || strings.HasPrefix(fact, "required") || strings.HasPrefix(fact, "untyped") {
					if strings.HasPrefix(fact, "untyped: ") {
						fact = "untyped: " + quoted(strings.TrimPrefix(fact, "untyped: "), maxParamNote)
					}
					parts = append(parts, fact)
				}
			}
			if len(parts) > 0 {
				b.WriteString(" // " + strings.Join(parts, "; "))
			}
			b.WriteByte('\n')
		}
		b.WriteString("}\n")
	case dEnum:
		base := "string"
		if d.base == kInteger {
			base = "int64"
			if d.unsigned {
				base = "uint64"
			}
		}
		fmt.Fprintf(b, "type %s %s // ", name, base)
		for i, v := range d.values {
			if i == maxEnumShown {
				fmt.Fprintf(b, ", … (%d more)", len(d.values)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			lit := v.lit
			if d.base == kString {
				lit = strconv.Quote(v.str)
			}
			b.WriteString(f.consts[d][i] + " = " + lit)
		}
		b.WriteByte('\n')
	case dUnion:
		note := quoted(f.unionNote(d), 4*maxParamNote)
		if f.output[d] {
			fmt.Fprintf(b, "type %s any // %s\n", name, note)
			return
		}
		fmt.Fprintf(b, "type %s interface{ %s() } // %s\n", name, marker(name), note)
		for i, v := range d.variants {
			if w := f.wrappers[d][i]; w != "" {
				fmt.Fprintf(b, "type %s %s\n", w, f.expr(typ{kind: v.typ.kind, elem: v.typ.elem, def: v.typ.def, unsigned: v.typ.unsigned}, false))
			}
		}
	}
}
