// Package inert makes text capbridge did not write (a server's names,
// descriptions, errors and stderr) safe to show on a terminal: every rune
// a terminal would act on rather than show becomes U+FFFD, so the text
// cannot move the cursor, recolour, retitle, write the clipboard or
// reorder what an operator reads.
package inert

import (
	"strings"
	"unicode"
)

// Line is s for one line of a terminal: every rune that is not printable
// (controls and escapes, C1 controls, bidi and other format characters,
// tabs, line ends) becomes U+FFFD, so s cannot break a column or forge a
// line either.
func Line(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return unicode.ReplacementChar
	}, s)
}

// Lines is Line for text of several lines: its line feeds are kept.
func Lines(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || unicode.IsPrint(r) {
			return r
		}
		return unicode.ReplacementChar
	}, s)
}
