package codegen

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Names. A server chooses its tool and parameter names; the generator turns
// them into identifiers of the target language. The rule (issue 6) is the
// same for every kind of name:
//
//   - split the name into words: maximal runs of ASCII letters and digits
//     (everything else, including non-ASCII, is a separator and is lost);
//   - join the words in the kind's case style, and cap the result at
//     maxIdentBase characters;
//   - if that lost or changed anything — beyond the one invertible change
//     the style defines as its identity, see identity below — or the
//     original is longer than maxIdentBase, or the result is reserved,
//     append "_" and the first eight hex characters of SHA-256(original).
//
// The rule is per name and context free, so a tool's identifier never
// changes because another tool was added or removed. Two originals can share
// an identifier only if they are equal or their digests agree in 32 bits
// after the same mangling; the generator refuses such a server rather than
// repair it (see CollisionError).

// maxIdentBase caps the readable part of an identifier; the rule
// digests any name over this length.
const maxIdentBase = 32

// style is one way of spelling identifiers.
type style uint8

const (
	// exported is UpperCamelCase. Its identity class is lower snake_case
	// whose every word starts with a letter (create_issue): capitalising
	// each word and dropping the underscores is invertible on that class
	// (each capital marks a word start), so CreateIssue needs no suffix.
	// Every other spelling (createIssue, API-get-user) gets one.
	exported style = iota
	// field is UpperCamelCase for a field of an options type. Its
	// identity class is lowerCamelCase ([a-z][A-Za-z0-9]*), the spelling
	// of most parameter names: upper-casing the first letter is invertible
	// on it, so includeImage becomes IncludeImage with no suffix.
	field
	// local is a lower-case-first identifier for a parameter. Its identity
	// class is every ASCII identifier ([A-Za-z_][A-Za-z0-9_]*): such a wire
	// name is used verbatim, so file_path stays file_path.
	local
	// pkg is an all-lower-case package name without underscores. Its
	// identity class is [a-z][a-z0-9]*.
	pkg
)

// mangle returns the identifier for the original name in style st.
// reserved reports names the target language or the emitter's own
// declarations claim; a reserved result is digested like a changed one.
// fallback is the base used when no word survives (an empty or non-ASCII
// name). The result is always a valid ASCII identifier.
func mangle(original string, st style, reserved func(string) bool, fallback string) string {
	base, identity := spell(original, st)
	if base == "" {
		base, identity = fallback, false
	} else if c := base[0]; c >= '0' && c <= '9' {
		base, identity = fallback+base, false
	}
	if len(base) > maxIdentBase {
		base, identity = base[:maxIdentBase], false
	}
	if identity && len(original) <= maxIdentBase && !reserved(base) {
		return base
	}
	sep := "_"
	if st == pkg {
		sep = "" // Go package names conventionally have no underscores.
	}
	return base + sep + digest8(original)
}

// spell joins the ASCII words of s in style st and reports whether s was in
// the style's identity class.
func spell(s string, st style) (string, bool) {
	if st == local && isASCIIIdent(s) {
		return s, true
	}
	if st == field && isLowerCamel(s) {
		return string(toUpper(s[0])) + s[1:], true
	}
	var b strings.Builder
	identity := true
	word := 0 // position within the current word; 0 at a word start
	first := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		lower, upper, digit := c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		if !lower && !upper && !digit {
			// A separator. Only a single '_' between two words, the second
			// led by a lower-case letter, is part of the exported identity
			// class: create_2 and create2 would both become Create2.
			if !(st == exported && c == '_' && i > 0 && i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z' && word > 0) {
				identity = false
			}
			if st != exported {
				identity = false
			}
			word = 0
			continue
		}
		if upper {
			identity = false // capitals are outside every identity class here
		}
		switch {
		case word == 0 && (st == exported || st == field || (st == local && !first)):
			c = toUpper(c)
		case st == pkg || (st == local && first):
			c = toLower(c)
		}
		b.WriteByte(c)
		word++
		first = false
	}
	return b.String(), identity
}

func isLowerCamel(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isASCIIIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

func toUpper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c - 'A' + 'a'
	}
	return c
}

// digest8 is the suffix: the first eight lower-case hex characters of the
// SHA-256 of the original name's bytes.
func digest8(original string) string {
	sum := sha256.Sum256([]byte(original))
	return hex.EncodeToString(sum[:4])
}
