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
	fmt.Fprintf(&b, "// package %s: MCP server %s, %d tools; import \"<module>/%s\", \"context\", %q.\n", p, strconv.QuoteToASCII(f.server), len(f.funcs), p, capwireImport)
	fmt.Fprintf(&b, "// r, err := %s.F(ctx, %s.FArgs{...}); pointers optional (new(v)). Enum consts <Type><Value>. If FOutput: out, err := %s.DecodeF(r).\n", p, p, p)
	b.WriteString("// err: refused (errors.Is(err, capwire.ErrTimeout), *capwire.Denied); r.IsError: tool failed, r.Text(). \"Quoted\": server text.\n")
	switch level {
	case SurfaceFull, SurfaceShort:
		b.WriteString("// Descriptions cut; describe(names) gives them whole.\n")
	case SurfaceSignatures:
		b.WriteString("// Descriptions omitted; describe(names) gives them.\n")
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
	variant := map[*typeDef]bool{}
	for _, d := range f.order {
		for _, v := range d.variants {
			if v.typ.kind == kNamed {
				variant[v.typ.def] = true
			}
		}
	}
	out := make([]toolDoc, 0, len(f.funcs))
	for _, fn := range f.funcs {
		t := fn.tp.tool
		doc := toolDoc{name: fn.name, wire: t.Name}
		for lv := detailDescribe; lv <= detailSigs; lv++ {
			var b strings.Builder
			f.surfaceFunc(&b, fn, lv)
			for _, d := range byOwner[fn] {
				f.surfaceType(&b, d, lv, variant)
			}
			if lv == detailDescribe {
				// Types declared by an earlier tool of the same shape are
				// spelled out too, so one description stands alone.
				for _, d := range f.referenced(fn) {
					if f.owner[d] != nil && f.owner[d] != fn {
						f.surfaceType(&b, d, lv, variant)
					}
				}
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

// referenced lists the declared types fn's arguments and output use,
// directly or through other types, in first-use order.
func (f *goFile) referenced(fn *goFunc) []*typeDef {
	var out []*typeDef
	seen := map[*typeDef]bool{}
	var walk func(t typ)
	walk = func(t typ) {
		for t.kind == kList || t.kind == kMap {
			t = *t.elem
		}
		if t.kind != kNamed {
			return
		}
		d := f.canon(t.def)
		if seen[d] || len(seen) > maxDefs*4 {
			return
		}
		seen[d] = true
		out = append(out, d)
		for _, fl := range d.fields {
			walk(fl.typ)
		}
		for _, v := range d.variants {
			walk(v.typ)
		}
	}
	if fn.tp.args != nil {
		walk(typ{kind: kNamed, def: fn.tp.args})
	}
	if fn.tp.output != nil {
		walk(*fn.tp.output)
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
	b.WriteString("// ")
	b.WriteString(strconv.QuoteToASCII(clip(t.Name, maxNameNote)))
	if h := t.Hints; lv <= detailFull {
		// Only the claims that change how a model should use the tool.
		switch {
		case h.Destructive != nil && *h.Destructive:
			b.WriteString(" (destructive)")
		case h.ReadOnly != nil && *h.ReadOnly:
			b.WriteString(" (read-only)")
		}
	}
	if desc := toolDescription(t); desc != "" && lv != detailSigs {
		max := [...]int{detailDescribe: maxToolDesc, detailFull: surfaceLongDesc, detailShort: surfaceShortDesc}[lv]
		b.WriteString(": ")
		b.WriteString(quoted(desc, max))
	}
	b.WriteString("\nfunc ")
	b.WriteString(fn.name)
	switch {
	case fn.tp.whole != "":
		b.WriteString("(ctx, map[string]any) // " + quoted(fn.tp.whole, maxParamNote) + "\n")
	case fn.args != "":
		b.WriteString("(ctx, " + fn.args + "{\n")
		f.surfaceFields(b, fn.tp.args, lv)
		b.WriteString("})\n")
	default:
		b.WriteString("(ctx)\n")
	}
}

// surfaceFields writes the fields of record d, one a line.
func (f *goFile) surfaceFields(b *strings.Builder, d *typeDef, lv detail) {
	for i, fl := range d.fields {
		e, _ := f.fieldType(d, fl)
		fmt.Fprintf(b, "\t%s %s", f.fields[d][i], e)
		var parts []string
		if vals := f.enumValues(fl.typ); vals != "" {
			parts = append(parts, vals)
		}
		if lv != detailSigs {
			max := [...]int{detailDescribe: maxFieldDoc, detailFull: surfaceFieldLong, detailShort: surfaceFieldShort}[lv]
			if doc := cleanText(fl.doc, max); doc != "" {
				parts = append(parts, quoted(doc, max))
			}
		}
		for _, fact := range f.facts(d, fl) {
			if lv <= detailFull || strings.HasPrefix(fact, "required") || strings.HasPrefix(fact, "untyped") {
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
	return enumLiterals(t.def)
}

func enumLiterals(d *typeDef) string {
	var parts []string
	for i, v := range d.values {
		if i == maxEnumShown {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(d.values)-i))
			break
		}
		if d.base == kString {
			parts = append(parts, strconv.Quote(v.str))
		} else {
			parts = append(parts, v.lit)
		}
	}
	return strings.Join(parts, " | ")
}

func (f *goFile) surfaceType(b *strings.Builder, d *typeDef, lv detail, variant map[*typeDef]bool) {
	name := f.types[d]
	switch d.kind {
	case dRecord:
		if d == f.owner[d].tp.args {
			return // spelled out in the function's line
		}
		if why := f.opaque[d]; why != "" {
			fmt.Fprintf(b, "type %s map[string]any // %s\n", name, quoted(why, maxParamNote))
			return
		}
		fmt.Fprintf(b, "type %s struct {", name)
		if doc := cleanText(d.doc, maxFieldDoc); doc != "" && lv <= detailFull {
			b.WriteString(" // " + quoted(doc, [...]int{detailDescribe: maxFieldDoc, detailFull: surfaceFieldLong}[lv]))
		}
		b.WriteByte('\n')
		f.surfaceFields(b, d, lv)
		b.WriteString("}\n")
	case dEnum:
		if !variant[d] {
			return // listed at the fields that use it
		}
		base := "string"
		if d.base == kInteger {
			base = "int64"
			if d.unsigned {
				base = "uint64"
			}
		}
		fmt.Fprintf(b, "type %s %s // %s\n", name, base, enumLiterals(d))
	case dUnion:
		note := quoted(f.unionNote(d), 4*maxParamNote)
		if f.output[d] {
			fmt.Fprintf(b, "type %s any // %s\n", name, note)
			return
		}
		fmt.Fprintf(b, "type %s interface{ %s() } // %s\n", name, marker(name), note)
	}
}
