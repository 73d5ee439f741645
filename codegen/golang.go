package codegen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The Go emitter. It turns the neutral plans into one source file that
// imports only goImports, declares one function per tool and one options
// type per tool with optional parameters, and nothing else.

// capwireImport is the package every façade calls (the capwire client
// contract: capwire.Shared and (*capwire.Client).Call).
const capwireImport = "github.com/capbridge/capbridge/capwire"

// goImports is the import allowlist verification enforces.
var goImports = []string{"context", capwireImport}

// goReserved are the names a generated identifier must never be: Go's
// keywords and predeclared identifiers (so no declaration or parameter
// shadows them), the blank identifier (a parameter must be usable), and the
// names the emitted bodies and imports use.
var goReserved = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Fields(`
		break case chan const continue default defer else fallthrough for func go goto if import
		interface map package range return select struct switch type var
		any bool byte comparable complex64 complex128 error float32 float64 int int8 int16 int32
		int64 rune string uint uint8 uint16 uint32 uint64 uintptr true false iota nil
		append cap clear close complex copy delete imag len make max min new panic print println
		real recover
		ctx opts args c err context capwire main _`) {
		m[s] = true
	}
	return m
}()

func isGoReserved(s string) bool { return goReserved[s] }

func notReserved(string) bool { return false }

// Widths of generated comment text, in runes.
const (
	docWidth    = 76
	maxNameNote = 80 // a wire name quoted in a comment
)

// goFunc is one tool bound to Go names.
type goFunc struct {
	tp      *toolPlan
	name    string   // exported function name
	labels  []string // per required param: the Go parameter name
	fields  []string // per optional param: the options field name
	options string   // the options type, or "" when there are no optional params
	whole   string   // non-empty: whole-value form, and why
}

// goOutput is what the emitter hands back to Generate.
type goOutput struct {
	pkg     string
	source  []byte
	header  func(SurfaceLevel) string
	entries []entry
}

// emitGo binds names, writes the source and verifies it.
func emitGo(server, digest string, plans []toolPlan) (*goOutput, error) {
	pkgName := mangle(server, pkg, isGoReserved, "mcp")
	funcs, err := bindGo(plans)
	if err != nil {
		return nil, err
	}
	src := writeGo(server, pkgName, digest, funcs)
	want := intent{pkg: pkgName, funcs: map[string]bool{}, types: map[string]bool{}}
	for _, f := range funcs {
		want.funcs[f.name] = true
		if f.options != "" {
			want.types[f.options] = true
		}
	}
	if err := verifyGo(src, want); err != nil {
		return nil, err
	}
	out := &goOutput{pkg: pkgName, source: src}
	n := len(funcs)
	qserver := commentQuote(server)
	out.header = func(l SurfaceLevel) string {
		h := fmt.Sprintf("package %s // MCP server %s: %d function(s), each returning (*capwire.Result, error)", pkgName, qserver, n)
		if l == SurfaceIndex {
			h += "; descriptions omitted, ask for a function's details by name"
		}
		return h
	}
	for _, f := range funcs {
		out.entries = append(out.entries, goEntry(pkgName, f))
	}
	return out, nil
}

// bindGo names every tool, parameter and options type. Tool identifiers
// that coincide refuse the server; a parameter or field collision, or an
// options type that coincides with a function, degrades that one function
// to its whole-value form (issue 6, "Names").
func bindGo(plans []toolPlan) ([]goFunc, error) {
	funcs := make([]goFunc, len(plans))
	byName := make(map[string]int, len(plans))
	for i := range plans {
		tp := &plans[i]
		f := goFunc{tp: tp, name: mangle(tp.tool.Name, exported, notReserved, "Tool"), whole: tp.plan.whole}
		if j, dup := byName[f.name]; dup {
			return nil, &CollisionError{Ident: f.name, A: plans[j].tool.Name, B: tp.tool.Name}
		}
		byName[f.name] = i
		funcs[i] = f
	}
	for i := range funcs {
		f := &funcs[i]
		if f.whole != "" {
			continue
		}
		labels, fields := map[string]bool{}, map[string]bool{}
		for _, p := range f.tp.plan.params {
			if p.required {
				l := mangle(p.wire, local, isGoReserved, "param")
				if labels[l] {
					f.whole = "parameter names collide after mangling"
					break
				}
				labels[l] = true
				f.labels = append(f.labels, l)
				continue
			}
			n := mangle(p.wire, field, notReserved, "Field")
			if fields[n] {
				f.whole = "option names collide after mangling"
				break
			}
			fields[n] = true
			f.fields = append(f.fields, n)
		}
		if f.whole == "" && len(f.fields) > 0 {
			f.options = optionsName(f.name)
			if _, clash := byName[f.options]; clash {
				f.whole = "its options type would share a name with function " + f.options
			}
		}
		if f.whole != "" {
			f.labels, f.fields, f.options = nil, nil, ""
		}
	}
	return funcs, nil
}

// optionsName names the options type of function fn: "Options" goes
// before a digest suffix, so CreateIssue_1a2b3c4d's options are
// CreateIssueOptions_1a2b3c4d.
func optionsName(fn string) string {
	if i := strings.LastIndexByte(fn, '_'); i >= 0 {
		return fn[:i] + "Options" + fn[i:]
	}
	return fn + "Options"
}

// goType spells a parameter's type; optional scalars are pointers so that
// an unset option is distinguishable from its zero value.
func goType(p param, optional bool) string {
	var t string
	switch p.kind {
	case kString:
		t = "string"
	case kInteger:
		t = "int64"
	case kNumber:
		t = "float64"
	case kBoolean:
		t = "bool"
	default:
		return "any"
	}
	if p.list {
		return "[]" + t
	}
	if optional {
		return "*" + t
	}
	return t
}

// goLit is the Go string literal of s: total escaping to printable ASCII,
// so server text inside it is inert and the file stays ASCII whatever the
// bytes (invalid UTF-8 survives as \x escapes, verbatim on the wire).
func goLit(s string) string { return strconv.QuoteToASCII(s) }

// commentQuote is a name as it may appear in a comment: cleaned, capped and
// quoted to ASCII.
func commentQuote(s string) string { return strconv.QuoteToASCII(cleanText(s, maxNameNote)) }

// writeGo writes the source. Every line of it is the generator's own; server
// text enters only through goLit and commentLines.
func writeGo(server, pkgName, digest string, funcs []goFunc) []byte {
	var b strings.Builder
	b.WriteString("// Code generated by capbridge; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Listing SHA-256: %s.\n\n", digest)
	fmt.Fprintf(&b, "// Package %s calls the tools of MCP server %s through capbridge.\n", pkgName, commentQuote(server))
	b.WriteString("//\n// Each function sends its tool's name and its parameters' names to the\n")
	b.WriteString("// server verbatim and returns the tool's result. A tool's failure is a\n")
	b.WriteString("// result with IsError set; a refused call is an error (*capwire.Denied).\n")
	fmt.Fprintf(&b, "package %s\n", pkgName)
	if len(funcs) > 0 {
		fmt.Fprintf(&b, "\nimport (\n\t%q\n\n\t%q\n)\n", goImports[0], goImports[1])
	}
	for _, f := range funcs {
		writeGoFunc(&b, server, f)
		if f.options != "" {
			writeGoOptions(&b, f)
		}
	}
	return []byte(b.String())
}

func writeGoFunc(b *strings.Builder, server string, f goFunc) {
	t := f.tp.tool
	fmt.Fprintf(b, "\n// %s calls tool %s of server %s.\n", f.name, commentQuote(t.Name), commentQuote(server))
	commentLines(b, "", describe(t))
	if f.whole != "" {
		b.WriteString("//\n")
		commentLines(b, "", "Its arguments are passed whole, as a map from wire name to value: "+cleanText(f.whole, maxParamNote)+".")
	} else if len(f.labels) > 0 {
		b.WriteString("//\n// Parameters:\n")
		i := 0
		for _, p := range f.tp.plan.params {
			if p.required {
				fmt.Fprintf(b, "//   - %s\n", paramNote(f.labels[i], p, false))
				i++
			}
		}
	}
	if f.options != "" {
		fmt.Fprintf(b, "//\n// Optional parameters are the fields of %s; opts may be nil.\n", f.options)
	}
	if h := hintText(t.Hints); h != "" {
		fmt.Fprintf(b, "//\n// Server hints (unverified): %s.\n", h)
	}
	if len(t.OutputSchema) > 0 {
		b.WriteString("//\n// The tool declares an output schema: decode the structured result with\n// (*capwire.Result).Decode.\n")
	}
	fmt.Fprintf(b, "func %s(%s) (*capwire.Result, error) {\n", f.name, goParams(f, false))
	if f.whole == "" {
		// One assignment per parameter rather than a composite literal:
		// gofmt aligns the values of a literal's lines by a heuristic the
		// emitter would have to replicate to stay gofmt-stable.
		b.WriteString("\targs := map[string]any{}\n")
		i := 0
		for _, p := range f.tp.plan.params {
			if p.required {
				fmt.Fprintf(b, "\targs[%s] = %s\n", goLit(p.wire), f.labels[i])
				i++
			}
		}
		if f.options != "" {
			b.WriteString("\tif opts != nil {\n")
			i := 0
			for _, p := range f.tp.plan.params {
				if p.required {
					continue
				}
				deref := ""
				if !p.list && p.kind != kAny {
					deref = "*"
				}
				fmt.Fprintf(b, "\t\tif opts.%s != nil {\n\t\t\targs[%s] = %sopts.%s\n\t\t}\n", f.fields[i], goLit(p.wire), deref, f.fields[i])
				i++
			}
			b.WriteString("\t}\n")
		}
	}
	b.WriteString("\tc, err := capwire.Shared(ctx)\n\tif err != nil {\n\t\treturn nil, err\n\t}\n")
	fmt.Fprintf(b, "\treturn c.Call(ctx, %s, %s, args)\n}\n", goLit(server), goLit(t.Name))
}

func writeGoOptions(b *strings.Builder, f goFunc) {
	fmt.Fprintf(b, "\n// %s holds the optional parameters of %s.\n// A nil field is left out of the call.\n", f.options, f.name)
	fmt.Fprintf(b, "type %s struct {\n", f.options)
	i := 0
	for _, p := range f.tp.plan.params {
		if p.required {
			continue
		}
		if i > 0 {
			// A blank line between fields keeps gofmt from aligning them.
			b.WriteByte('\n')
		}
		fmt.Fprintf(b, "\t// %s\n\t%s %s\n", paramNote(f.fields[i], p, true), f.fields[i], goType(p, true))
		i++
	}
	b.WriteString("}\n")
}

// goParams spells the parameter list; short is the surface's form, which
// leaves out the context's type.
func goParams(f goFunc, short bool) string {
	var ps []string
	if short {
		ps = append(ps, "ctx")
	} else {
		ps = append(ps, "ctx context.Context")
	}
	if f.whole != "" {
		return strings.Join(append(ps, "args map[string]any"), ", ")
	}
	i := 0
	for _, p := range f.tp.plan.params {
		if p.required {
			ps = append(ps, f.labels[i]+" "+goType(p, false))
			i++
		}
	}
	if f.options != "" {
		ps = append(ps, "opts *"+f.options)
	}
	return strings.Join(ps, ", ")
}

// describe is a tool's description for its doc comment, or its title when
// it has none.
func describe(t *Tool) string {
	if t.Description != "" {
		return cleanText(t.Description, maxToolDesc)
	}
	return cleanText(t.Title, maxTitle)
}

// paramNote is the one-line note on a parameter: its name, its wire name
// when that differs, its type, its enum and its description. The line is
// safe for a comment and never wraps.
func paramNote(ident string, p param, optional bool) string {
	var b strings.Builder
	b.WriteString(ident)
	b.WriteString(" (")
	if ident != p.wire && (p.wire == "" || ident != string(toUpper(p.wire[0]))+p.wire[1:]) {
		b.WriteString("wire name ")
		b.WriteString(commentQuote(p.wire))
		b.WriteString(", ")
	}
	b.WriteString(goType(p, optional))
	if p.kind == kAny {
		b.WriteString("; ")
		b.WriteString(cleanText(p.reason, maxParamNote))
	}
	b.WriteString(")")
	if len(p.enum) > 0 {
		b.WriteString(": one of ")
		b.WriteString(enumText(p.enum))
	}
	if note := cleanText(p.note, maxParamNote); note != "" {
		b.WriteString(": ")
		b.WriteString(note)
	}
	return b.String()
}

// enumText lists enum values, quoted to ASCII, within maxParamNote runes.
func enumText(vals []string) string {
	var parts []string
	for i, v := range vals {
		if i == maxEnumShown {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, commentQuote(v))
	}
	return cleanText(strings.Join(parts, ", "), maxParamNote)
}

func hintText(h Hints) string {
	var parts []string
	add := func(p *bool, yes, no string) {
		switch {
		case p == nil:
		case *p:
			parts = append(parts, yes)
		default:
			parts = append(parts, no)
		}
	}
	add(h.ReadOnly, "read-only", "not read-only")
	add(h.Destructive, "destructive", "not destructive")
	add(h.Idempotent, "idempotent", "not idempotent")
	add(h.OpenWorld, "open world", "closed world")
	return strings.Join(parts, ", ")
}

// commentLines writes clean text as comment lines of at most docWidth
// runes, each beginning "// " and indent. The emitter alone breaks lines,
// and every line is a continuation of the paragraph the caller opened, so
// gofmt's doc-comment rules (headings, lists, code blocks) cannot apply to
// server text.
func commentLines(b *strings.Builder, indent, text string) {
	for _, l := range wrap(text, docWidth) {
		b.WriteString("// ")
		b.WriteString(indent)
		b.WriteString(l)
		b.WriteByte('\n')
	}
}

// goEntry is the surface's view of one function.
func goEntry(pkgName string, f goFunc) entry {
	e := entry{name: f.name, desc: describe(f.tp.tool)}
	e.index = pkgName + "." + f.name + "(" + goParams(f, true) + ")"
	e.full = e.index
	var fieldSigs, notes []string
	i, j := 0, 0
	for _, p := range f.tp.plan.params {
		if f.whole != "" {
			break
		}
		if p.required {
			notes = append(notes, "  "+paramNote(f.labels[i], p, false))
			i++
			continue
		}
		fieldSigs = append(fieldSigs, f.fields[j]+" "+goType(p, true))
		notes = append(notes, "  opts."+paramNote(f.fields[j], p, true))
		j++
	}
	if len(fieldSigs) > 0 {
		e.full = strings.TrimSuffix(e.full, ")") + "{" + strings.Join(fieldSigs, "; ") + "})"
	}
	detail := []string{pkgName + "." + f.name + "(" + goParams(f, false) + ") (*capwire.Result, error)"}
	if e.desc != "" {
		detail = append(detail, e.desc)
	}
	if f.whole != "" {
		detail = append(detail, "  args: passed whole; "+cleanText(f.whole, maxParamNote))
	}
	detail = append(detail, notes...)
	if f.options != "" {
		detail = slices.Insert(detail, 1, "  opts *"+f.options+" may be nil; a nil field is left out")
	}
	e.detail = strings.Join(detail, "\n") + "\n"
	return e
}
