package codegen

import (
	"fmt"
	"strconv"
	"strings"
)

// What every emitter writes alike: comment text of one width, names quoted
// one way, and the same doc comment prose for a tool and a field.

// Widths of generated comment text, in runes.
const (
	docWidth    = 76
	maxNameNote = 80  // a wire name quoted in a comment
	maxFieldDoc = 200 // a field's description in the source
)

// commentQuote is a name as it may appear in a comment: cleaned, capped and
// quoted to ASCII.
func commentQuote(s string) string { return strconv.QuoteToASCII(cleanText(s, maxNameNote)) }

// commentLines writes clean text as comment lines of at most docWidth
// runes, each beginning "// " and indent. The emitter alone breaks lines.
func commentLines(b *strings.Builder, indent, text string) {
	for _, l := range wrap(text, docWidth) {
		b.WriteString(indent)
		b.WriteString("// ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
}

// toolDescription is a tool's description for its doc comment, or its
// title when it has none.
func toolDescription(t *Tool) string {
	if t.Description != "" {
		return cleanText(t.Description, maxToolDesc)
	}
	return cleanText(t.Title, maxTitle)
}

// hintText spells out the hints a tool declares, for its doc comment; the
// server's word only, so the comment calls them unverified.
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

// untypedReason is why t, or the element type of a list or map t, is any.
func untypedReason(t typ) string {
	for t.kind == kList || t.kind == kMap {
		t = *t.elem
	}
	if t.kind == kAny {
		return t.reason
	}
	return ""
}

// wordSet is the set of the words of s, so that a list of reserved words
// reads as the text it is copied from.
func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// joinEnum joins the values of enum d with sep: strings as lit writes
// them, integers as their JSON literals. limit > 0 lists at most that many
// and says how many more there are.
func joinEnum(d *typeDef, lit func(string) string, sep string, limit int) string {
	var parts []string
	for i, v := range d.values {
		if limit > 0 && i == limit {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(d.values)-i))
			break
		}
		if d.base == kString {
			parts = append(parts, lit(v.str))
		} else {
			parts = append(parts, v.lit)
		}
	}
	return strings.Join(parts, sep)
}

// fieldDoc is the documentation of a field in the source: its
// description, then facts (what the language's type leaves unsaid), why it
// is untyped and its notes, cleaned.
func fieldDoc(fl field, facts ...string) string {
	var parts []string
	if doc := cleanText(fl.doc, maxFieldDoc); doc != "" {
		parts = append(parts, doc)
	}
	parts = append(parts, facts...)
	if why := untypedReason(fl.typ); why != "" {
		parts = append(parts, "untyped: "+cleanText(why, maxParamNote))
	}
	for _, n := range fl.notes {
		parts = append(parts, cleanText(n, maxParamNote))
	}
	return strings.Join(parts, "; ")
}
