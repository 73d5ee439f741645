package codegen

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Caps on server prose, in runes after cleaning.
const (
	maxToolDesc  = 400 // a tool's description in the source
	maxParamNote = 120 // a parameter's description, enum list or reason
	maxTitle     = 80  // a tool's title
)

// cleanText makes server prose inert and short: invalid UTF-8 becomes
// U+FFFD; every control, format (which holds the bidi overrides and
// isolates, zero-width characters and the BOM), line or paragraph
// separator, private-use and surrogate codepoint is removed; every run of
// white space (new lines included) becomes one space, because only the
// emitter decides where lines break; and the result is capped at max runes,
// ending in "…" when it was cut. The output can sit inside a line comment
// of any language and cannot end it, re-order it visually or smuggle a
// directive onto a line of its own.
func cleanText(s string, max int) string {
	var b strings.Builder
	b.Grow(min(len(s), 4*max+8))
	runes, space := 0, false
	cut := 0 // b.Len() when it held max-1 runes: where "…" goes if s is longer
	put := func(r rune) bool {
		if runes == max-1 {
			cut = b.Len()
		}
		if runes == max {
			return false
		}
		b.WriteRune(r)
		runes++
		return true
	}
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsSpace(r) {
			space = runes > 0
			continue
		}
		if isHidden(r) {
			continue
		}
		if space && !put(' ') || !put(r) {
			return strings.TrimRight(b.String()[:cut], " ") + "…"
		}
		space = false
	}
	return b.String()
}

// isHidden reports the codepoints that must never reach generated text.
func isHidden(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f // the ASCII controls, without table lookups
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp) ||
		(r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE // noncharacters
}

// wrap splits clean text (see cleanText: single spaces, no line breaks)
// into lines of at most width runes, breaking only at spaces; a word longer
// than width gets a line of its own. A line is a substring of s wherever
// its words are one space apart in s, as they are in clean text, so
// wrapping allocates only the slice of lines.
func wrap(s string, width int) []string {
	var lines []string
	var parts []string       // the words of a line not contiguous in s
	start, end, n := 0, 0, 0 // the line is s[start:end], n runes, or parts
	flush := func() {
		if parts != nil {
			lines = append(lines, strings.Join(parts, " "))
			parts = nil
		} else {
			lines = append(lines, s[start:end])
		}
		n = 0
	}
	for i := 0; i <= len(s); {
		j := strings.IndexByte(s[i:], ' ')
		if j < 0 {
			j = len(s) - i
		}
		w, at := s[i:i+j], i
		i += j + 1
		if w == "" {
			continue
		}
		wn := utf8.RuneCountInString(w)
		if n > 0 && n+1+wn > width {
			flush()
		}
		switch {
		case n == 0:
			start, end, n = at, at+len(w), wn
			continue
		case parts == nil && at != end+1:
			parts = strings.Split(s[start:end], " ")
		}
		if parts != nil {
			parts = append(parts, w)
		}
		end, n = at+len(w), n+1+wn
	}
	if n > 0 {
		flush()
	}
	return lines
}
