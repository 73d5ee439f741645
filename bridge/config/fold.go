package config

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// Case folding of argument keys, for restrict guards.
//
// Several servers bind a tool's arguments to their own names without
// regard to case: Go's encoding/json fills a struct field from any key
// that equals its name under Unicode simple case folding (mcp-go's
// BindArguments binds that way), and .NET's web defaults compare names
// ignoring case. To such a server {"path": "/srv/data/a", "PATH":
// "/etc/passwd"} has one argument, path, set to whichever key comes last,
// while a guard on /path that looked up its key exactly saw only the
// first. So a guarded call's keys are compared as such a server compares
// them: two keys of one object that fold to one key are refused, and a
// key that folds to a guard's key without being spelled as it is, too.

// appendFold appends the case fold of s: each rune replaced by the
// smallest rune of its simple case-folding orbit (unicode.SimpleFold),
// after its simple lower- and then upper-case mappings, so that two
// strings equal under strings.EqualFold fold to the same bytes, and so do
// the few pairs the mappings join beyond the orbits (the dotless ı and
// the dotted İ with I, as .NET's invariant upper-casing joins them).
// ASCII, the common case, takes a byte-wise path.
func appendFold[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
}

// appendFoldKey appends the fold of a validated JSON string (with its
// quotes): its text, escapes decoded.
func appendFoldKey(dst, raw []byte) []byte {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return appendFold(dst, body)
	}
	return appendFold(dst, jsonlex.Unquote(raw))
}

// foldRune is one rune's fold (see appendFold).
func foldRune(r rune) rune {
	if r == utf8.RuneError {
		return r
	}
	r = unicode.ToUpper(unicode.ToLower(r))
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}

// foldEqual reports whether a and b fold to the same key.
func foldEqual(a, b string) bool {
	if a == b {
		return true
	}
	var ba, bb [64]byte
	return string(appendFold(ba[:0], a)) == string(appendFold(bb[:0], b))
}
