// Package text holds the small string operations that capbridge applies
// wherever untrusted text is cut, quoted or named: clipping at a character
// boundary and escaping a JSON Pointer token.
package text

import (
	"strings"
	"unicode/utf8"
)

// Clip returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence. It does not validate s: invalid bytes before the
// cut are kept as they are.
func Clip(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Ellipsis is Clip that marks a cut: when s is longer than n bytes, the
// result is its clipped prefix followed by "…".
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Clip(s, n) + "…"
}

// Tail returns the last at most n bytes of b as valid UTF-8: a character
// split by the cut (or by whoever filled b, such as a ring buffer) is
// dropped, and any other invalid byte becomes U+FFFD. It is how capbridge
// renders the tail of a server's stderr.
func Tail(b []byte, n int) string {
	if n >= 0 && len(b) > n {
		b = b[len(b)-n:]
	}
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// AppendPointerToken appends tok to dst as one RFC 6901 reference token,
// with its leading "/": "~" becomes "~0" and "/" becomes "~1" (§3).
func AppendPointerToken(dst []byte, tok string) []byte {
	dst = append(dst, '/')
	for i := 0; i < len(tok); i++ {
		switch tok[i] {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, tok[i])
		}
	}
	return dst
}

// PointerToken returns tok escaped as an RFC 6901 reference token,
// without the leading "/".
func PointerToken(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return string(AppendPointerToken(nil, tok)[1:])
}

// UnescapePointerToken reverses PointerToken: "~1" becomes "/" and "~0"
// becomes "~", in that order (RFC 6901 §4).
func UnescapePointerToken(tok string) string {
	if !strings.Contains(tok, "~") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}
