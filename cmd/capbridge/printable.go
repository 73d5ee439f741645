package main

import (
	"io"
	"strings"
	"unicode"
)

// printable is server text made safe for a terminal: every rune that is
// not printable (controls, escapes, bidi and other format characters,
// tabs, line ends) becomes U+FFFD, so a server cannot move the cursor,
// recolour, retitle or reorder what an operator reads, nor break the
// columns or forge a line.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return unicode.ReplacementChar
	}, s)
}

// printableLines is printable for text of several lines: its line feeds
// are kept.
func printableLines(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || unicode.IsPrint(r) {
			return r
		}
		return unicode.ReplacementChar
	}, s)
}

// forTerminal is printableLines when w is a terminal and s as it is
// otherwise: a tool's result piped to a file or a program keeps its
// exact bytes.
func forTerminal(w io.Writer, s string) string {
	if isTerminal(w) {
		return printableLines(s)
	}
	return s
}
