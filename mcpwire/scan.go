package mcpwire

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds JSON nesting in every value this package validates, so
// a hostile line of 16 MiB of '[' costs a fault, not a deep recursion.
const maxDepth = 512

// scanError is a JSON syntax fault at a byte offset of the scanned input.
// Decoders wrap it into their own typed fault with the location.
type scanError struct {
	off    int
	reason string
}

// class of every byte for the scanner's hot loops: what a byte means
// inside a JSON string. 0 = ordinary, 1 = stop (quote, backslash or a
// control character that JSON forbids raw).
var strStop = func() (t [256]bool) {
	for i := 0; i < 0x20; i++ {
		t[i] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the offset of the first non-whitespace byte at or
// after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue validates the JSON value starting at b[i] (no leading
// whitespace) and returns the offset just past it. It is the one
// validating pass every decoder in this package rests on: linear in the
// input, bounded in depth, never allocating. ws reports whether any
// insignificant whitespace occurred inside the value (so a compact copy
// is needed before it can be embedded in an outgoing line).
func scanValue(b []byte, i, depth int, ws *bool) (int, *scanError) {
	if i >= len(b) {
		return i, &scanError{i, "unexpected end of input"}
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{':
		if depth >= maxDepth {
			return i, &scanError{i, "nesting deeper than " + strconv.Itoa(maxDepth)}
		}
		i++
		j := skipSpace(b, i)
		if j != i {
			*ws = true
		}
		i = j
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, &scanError{i, "expected object key"}
			}
			var err *scanError
			if i, err = scanString(b, i); err != nil {
				return i, err
			}
			if j = skipSpace(b, i); j != i {
				*ws = true
			}
			i = j
			if i >= len(b) || b[i] != ':' {
				return i, &scanError{i, "expected ':' after object key"}
			}
			if j = skipSpace(b, i+1); j != i+1 {
				*ws = true
			}
			if i, err = scanValue(b, j, depth+1, ws); err != nil {
				return i, err
			}
			if j = skipSpace(b, i); j != i {
				*ws = true
			}
			i = j
			if i >= len(b) {
				return i, &scanError{i, "unterminated object"}
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, &scanError{i, "expected ',' or '}' in object"}
			}
			if j = skipSpace(b, i+1); j != i+1 {
				*ws = true
			}
			i = j
		}
	case c == '[':
		if depth >= maxDepth {
			return i, &scanError{i, "nesting deeper than " + strconv.Itoa(maxDepth)}
		}
		i++
		j := skipSpace(b, i)
		if j != i {
			*ws = true
		}
		i = j
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err *scanError
			if i, err = scanValue(b, i, depth+1, ws); err != nil {
				return i, err
			}
			if j = skipSpace(b, i); j != i {
				*ws = true
			}
			i = j
			if i >= len(b) {
				return i, &scanError{i, "unterminated array"}
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, &scanError{i, "expected ',' or ']' in array"}
			}
			if j = skipSpace(b, i+1); j != i+1 {
				*ws = true
			}
			i = j
		}
	case c == '-' || (c >= '0' && c <= '9'):
		end, _, err := scanNumber(b, i)
		return end, err
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	default:
		return i, &scanError{i, "invalid character " + strconv.QuoteRune(rune(c)) + " looking for a value"}
	}
}

func scanLiteral(b []byte, i int, lit string) (int, *scanError) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, &scanError{i, "invalid literal"}
	}
	return i + len(lit), nil
}

// scanNumber validates a JSON number at b[i] and reports whether it is
// an integer (no fraction, no exponent).
func scanNumber(b []byte, i int) (end int, integer bool, _ *scanError) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, false, &scanError{i, "invalid number"}
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, false, &scanError{i, "invalid number: no digits after '.'"}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, false, &scanError{i, "invalid number: no digits in exponent"}
		}
	}
	return i, integer, nil
}

// scanString validates the JSON string whose opening quote is at b[i]
// and returns the offset just past its closing quote. UTF-8 validity is
// the framer's job (every line is checked whole before it is decoded);
// here only JSON's own rules apply: no raw control characters and only
// the defined escapes.
func scanString(b []byte, i int) (int, *scanError) {
	i++
	for {
		for i < len(b) && !strStop[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, &scanError{i, "unterminated string"}
		}
		switch b[i] {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 >= len(b) {
				return i, &scanError{i, "unterminated escape"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex4(b[i+2:i+6]) {
					return i, &scanError{i, `invalid \u escape`}
				}
				i += 6
			default:
				return i, &scanError{i, "invalid escape character"}
			}
		default:
			return i, &scanError{i, "control character in string"}
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if hexVal(c) < 0 {
			return false
		}
	}
	return true
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// validValue checks that b holds exactly one JSON value, optionally
// surrounded by whitespace, and returns the value's span and whether
// interior whitespace was seen.
func validValue(b []byte) (start, end int, ws bool, err *scanError) {
	start = skipSpace(b, 0)
	end, err = scanValue(b, start, 0, &ws)
	if err != nil {
		return start, end, ws, err
	}
	if rest := skipSpace(b, end); rest != len(b) {
		return start, end, ws, &scanError{rest, "trailing data after JSON value"}
	}
	return start, end, ws, nil
}

// eachMember calls f for each member of the already validated JSON
// object obj, in order, with the member's raw (still quoted) key and the
// raw span of its value. It stops at the first error f returns.
func eachMember(obj []byte, f func(key, val []byte) error) error {
	var ws bool
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		ks := i
		ke, _ := scanString(obj, i)
		i = skipSpace(obj, ke)
		i = skipSpace(obj, i+1) // ':'
		vs := i
		ve, _ := scanValue(obj, i, 0, &ws)
		if err := f(obj[ks:ke], obj[vs:ve]); err != nil {
			return err
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // ','
	}
	return nil
}

// eachElement calls f for each element of the already validated JSON
// array arr with its index and raw span.
func eachElement(arr []byte, f func(i int, val []byte) error) error {
	var ws bool
	i := skipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for n := 0; i < len(arr); n++ {
		ve, _ := scanValue(arr, i, 0, &ws)
		if err := f(n, arr[i:ve]); err != nil {
			return err
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) || arr[i] == ']' {
			return nil
		}
		i = skipSpace(arr, i+1)
	}
	return nil
}

// keyIs reports whether the raw quoted key equals name. Keys with
// escapes are unquoted first, so "\u0069d" is the key "id" as JSON says.
func keyIs(raw []byte, name string) bool {
	body := raw[1 : len(raw)-1]
	if len(body) == len(name) && string(body) == name {
		return true
	}
	if !hasBackslash(body) {
		return false
	}
	return unquote(raw) == name
}

func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// unquote decodes a validated JSON string (with its quotes). A lone
// surrogate escape becomes U+FFFD, as encoding/json does.
func unquote(raw []byte) string {
	body := raw[1 : len(raw)-1]
	if !hasBackslash(body) {
		return string(body)
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch body[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(body)-i >= 6 && body[i] == '\\' && body[i+1] == 'u' {
					r2 = hex4(body[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					i += 6
					r = d
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, body[i+1])
		}
		i += 2
	}
	return string(out)
}

func hex4(b []byte) rune {
	return rune(hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3]))
}

// appendQuoted appends s as a JSON string. Every control character is
// escaped, so the result can never hold a raw newline; invalid UTF-8 is
// refused by the callers before this point.
func appendQuoted(dst []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCompact appends the validated JSON value v without insignificant
// whitespace. Newlines can only occur in v as whitespace (JSON forbids
// them raw inside strings), so the output never contains one.
func appendCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if isSpace(c) {
			continue
		}
		dst = append(dst, c)
		if c != '"' {
			continue
		}
		end, _ := scanString(v, i)
		dst = append(dst, v[i+1:end]...)
		i = end - 1
	}
	return dst
}
