// Package truncate cuts untrusted text to a bound without splitting a
// character. It is the one place capbridge shortens a string it did not
// write: a message quoting a server, a metrics label, the tail of a
// server's stderr. Its name is one no caller uses for a local variable.
package truncate

import (
	"strings"
	"unicode/utf8"
)

// String returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence. It does not validate s: invalid bytes before the
// cut are kept as they are.
func String[S ~string | ~[]byte](s S, n int) S {
	if n <= 0 {
		return s[:0]
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Suffix returns the longest suffix of s of at most n bytes (all of s when
// n < 0) that does not begin inside a UTF-8 sequence: continuation bytes
// at the cut, or at the start of s, are dropped. Like String it does not
// validate what it keeps.
func Suffix[S ~string | ~[]byte](s S, n int) S {
	i := 0
	if n >= 0 && len(s) > n {
		i = len(s) - n
	}
	for k := 0; k < utf8.UTFMax && i < len(s) && !utf8.RuneStart(s[i]); k++ {
		i++
	}
	return s[i:]
}

// Ellipsis returns s as valid UTF-8 (each invalid byte sequence becomes
// U+FFFD) of at most n bytes before a "…" that marks a cut. Its result can
// always be encoded where text must be UTF-8, so it is how a message that
// quotes untrusted text is bounded.
func Ellipsis(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	return String(s, n) + "…"
}

// Tail returns the last at most n bytes of b (all of b when n < 0) as
// valid UTF-8: a character split by the cut (or by whoever filled b, such
// as a ring buffer) is dropped, and any other invalid byte becomes U+FFFD.
// It is how capbridge renders the tail of a server's stderr.
func Tail(b []byte, n int) string {
	return strings.ToValidUTF8(string(Suffix(b, n)), "\uFFFD")
}
