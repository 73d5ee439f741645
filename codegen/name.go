package codegen

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Names. A server chooses its tool, property and enum names; the generator
// turns them into identifiers a model can type from the wire name alone:
//
//   - split the name into words at separators ('_', '-', '.', '/', ':' and
//     space) and drop them; separators and case are spelling, not meaning,
//     so get-sum, get_sum and getSum all become GetSum;
//   - join the words in the kind's case style and cap the result at
//     maxIdentBase characters;
//   - append "_" and the first eight hex characters of SHA-256(original)
//     only where the name would otherwise be ambiguous or wrong: some
//     character other than a separator was lost (non-ASCII, punctuation),
//     the name was cut, the result is reserved, or two names of one scope
//     (the tools of a listing, the fields of a record, every top-level
//     declaration of a file) meet at one identifier — then every one of
//     them gets its suffix.
//
// A tool's identifier can therefore change when a tool that spells the same
// words differently is added, which is the price of readable names; the
// listing digest pins a façade to the listing it was generated from.

// maxIdentBase caps the readable part of an identifier.
const maxIdentBase = 64

// style is one way of spelling identifiers.
type style uint8

const (
	exported   style = iota // UpperCamelCase: functions, types, fields, constants
	pkg                     // lower case without separators: package names
	lowerCamel              // lowerCamelCase: TypeScript functions
	snake                   // snake_case: Python functions and parameters
)

// isSeparator reports the characters whose loss is not a change.
func isSeparator(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == ' '
}

// spell joins the ASCII words of s in style st and reports whether anything
// beyond separators and case was lost.
func spell(s string, st style) (string, bool) {
	if st == lowerCamel || st == snake {
		return spellWords(s, st)
	}
	var b strings.Builder
	lost := false
	start := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		lower, upper, digit := c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		if !lower && !upper && !digit {
			if !isSeparator(c) {
				lost = true
			}
			start = true
			continue
		}
		switch {
		case st == pkg:
			c = toLower(c)
		case start:
			c = toUpper(c)
		}
		b.WriteByte(c)
		start = false
	}
	return b.String(), lost
}

// spellWords spells s in a style that must see its words: the words of
// the Go spelling, split again where the case changes (getHTTPResponse:
// get, HTTP, Response), joined lowerCamel or snake_case. It loses exactly
// what spell loses, so a name needs a digest suffix in every language or
// in none.
func spellWords(s string, st style) (string, bool) {
	var words []string
	lost := false
	cur := []byte{}
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = []byte{}
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		lower, upper, digit := c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		if !lower && !upper && !digit {
			if !isSeparator(c) {
				lost = true
			}
			flush()
			continue
		}
		if upper && len(cur) > 0 {
			prev := cur[len(cur)-1]
			nextLower := i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
			if prev >= 'a' && prev <= 'z' || prev >= '0' && prev <= '9' || prev >= 'A' && prev <= 'Z' && nextLower {
				flush()
			}
		}
		cur = append(cur, c)
	}
	flush()
	var b strings.Builder
	for i, w := range words {
		w = strings.ToLower(w)
		switch {
		case st == snake && i > 0:
			b.WriteByte('_')
		case st == lowerCamel && i > 0:
			w = string(toUpper(w[0])) + w[1:]
		}
		b.WriteString(w)
	}
	return b.String(), lost
}

// base is the readable identifier for original, and whether it needs a
// digest suffix on its own (loss, cut or reserved). fallback leads a
// name that is empty or starts with a digit.
func base(original string, st style, reserved func(string) bool, fallback string) (string, bool) {
	b, lost := spell(original, st)
	if b == "" {
		b, lost = fallback, true
	} else if c := b[0]; c >= '0' && c <= '9' {
		b = fallback + b
	}
	if len(b) > maxIdentBase {
		b, lost = b[:maxIdentBase], true
	}
	return b, lost || reserved(b)
}

// suffixed is ident with the digest of original appended.
func suffixed(ident, original string, st style) string {
	if st == pkg {
		return ident + digest8(original) // Go package names conventionally have no underscores.
	}
	return ident + "_" + digest8(original)
}

// mangleAll names a scope's originals at once: each gets its base, and a
// suffix where the base alone needs one or where two originals share it.
// The second result reports a residual collision: two identical originals,
// or a 32-bit digest near-miss.
func mangleAll(originals []string, st style, reserved func(string) bool, fallback string) ([]string, int, int) {
	bases := make([]string, len(originals))
	needs := make([]bool, len(originals))
	count := map[string]int{}
	for i, o := range originals {
		bases[i], needs[i] = base(o, st, reserved, fallback)
		count[bases[i]]++
	}
	out := make([]string, len(originals))
	seen := map[string]int{}
	for i, o := range originals {
		out[i] = bases[i]
		if needs[i] || count[bases[i]] > 1 {
			out[i] = suffixed(bases[i], o, st)
		}
		if j, dup := seen[out[i]]; dup {
			return out, j, i
		}
		seen[out[i]] = i
	}
	return out, -1, -1
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

// claim takes a top-level identifier in a file whose identifiers taken
// holds: want if it is free, else want with the digest of key, else the
// server is refused (a 32-bit near-miss).
func claim(taken map[string]bool, want, key string) (string, error) {
	if !taken[want] {
		taken[want] = true
		return want, nil
	}
	alt := want + "_" + digest8(key)
	if taken[alt] {
		return "", &CollisionError{Ident: alt, A: want, B: key}
	}
	taken[alt] = true
	return alt, nil
}
