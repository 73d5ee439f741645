package main

import (
	"io"

	"github.com/capbridge/capbridge/internal/inert"
)

// forTerminal is inert.Lines of s when w is a terminal and s as it is
// otherwise: a tool's result piped to a file or a program keeps its
// exact bytes.
func forTerminal(w io.Writer, s string) string {
	if isTerminal(w) {
		return inert.Lines(s)
	}
	return s
}
