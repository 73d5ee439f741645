// Package pointer writes and reads the reference tokens of RFC 6901 JSON
// Pointers, the form in which capbridge names where a value sits: in a
// fault, a denial, a policy guard.
package pointer

import "strings"

// AppendToken appends tok to dst as one reference token, with its leading
// "/": "~" becomes "~0" and "/" becomes "~1" (RFC 6901 §3).
func AppendToken(dst []byte, tok string) []byte {
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

// Token returns tok escaped as a reference token, without the leading "/".
func Token(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return string(AppendToken(nil, tok)[1:])
}

// Unescape reverses Token: "~1" becomes "/" and "~0" becomes "~", in that
// order (RFC 6901 §4).
func Unescape(tok string) string {
	if !strings.Contains(tok, "~") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// Tokens splits a pointer into its unescaped reference tokens. The
// leading "/" is optional; "" and "/" both give one empty token.
func Tokens(p string) []string {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		parts[i] = Unescape(s)
	}
	return parts
}
