// Package jsonlex is capbridge's one JSON lexer: the RFC 8259 scanning
// primitives that interchange (JSON to MessagePack) and mcpwire (MCP
// lines) both build on, with one nesting bound, bound.MaxDepth.
//
// Every function is total on hostile bytes: a malformed input yields a
// *Fault with its offset, never a panic, and nothing recurses deeper than
// bound.MaxDepth. Nothing allocates except the functions that return a
// new string and the faults themselves. The functions documented as
// taking a validated value assume their input passed Valid or ScanValue
// with the same Flags; on anything else their result is unspecified (but
// they still neither panic nor loop).
package jsonlex

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/capbridge/capbridge/internal/bound"
)

// Flags select where the two JSON readers capbridge has differ. The zero
// Flags is encoding/json's reading.
type Flags uint8

const (
	// CheckUTF8 makes string scanning refuse bytes that are not UTF-8
	// (FaultInvalidUTF8, or FaultTruncated for a sequence cut by the end
	// of input). Without it bytes from 0x80 up are passed over unread:
	// for callers that validate the whole input on their own.
	CheckUTF8 Flags = 1 << iota
	// RefuseLoneSurrogate makes a \u escape naming half of a UTF-16
	// surrogate pair without its other half a FaultLoneSurrogate, found
	// at the escape's backslash. RFC 8259 §8.2 admits such strings but
	// leaves their meaning open; interchange refuses them, since the
	// MessagePack str it must produce has to be UTF-8. Without the flag
	// they are accepted, and AppendUnescaped decodes each lone half as
	// U+FFFD, as encoding/json does, which is how mcpwire reads an MCP
	// server's lines.
	RefuseLoneSurrogate
)

// FaultKind classifies a Fault, for callers that map it onto their own
// error kinds.
type FaultKind uint8

// The fault kinds.
const (
	// FaultTruncated: the input ended inside a value; Offset is its length.
	FaultTruncated FaultKind = iota + 1
	// FaultSyntax: a byte that cannot appear where it does.
	FaultSyntax
	// FaultInvalidUTF8: a string holds a byte that is not UTF-8 (only
	// with CheckUTF8).
	FaultInvalidUTF8
	// FaultLoneSurrogate: half a surrogate pair (only with
	// RefuseLoneSurrogate).
	FaultLoneSurrogate
	// FaultDepth: a container would be number bound.MaxDepth+1.
	FaultDepth
	// FaultTrailing: Valid found bytes after the one value.
	FaultTrailing
)

// Fault is a lexical fault: what, where (a byte offset of the scanned
// input) and a short English reason that callers may show.
type Fault struct {
	Kind   FaultKind
	Offset int
	Reason string
}

func fault(k FaultKind, off int, reason string) *Fault {
	return &Fault{Kind: k, Offset: off, Reason: reason}
}

// IsSpace reports whether c is JSON whitespace (RFC 8259 §2).
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first non-whitespace byte of b at or
// after i, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// ScanValue validates the JSON value starting at b[i] (no leading
// whitespace), enclosed by depth containers already, and returns the
// offset just past it. Containers are scanned in its own body, not in
// helpers, so a nested value costs one call. It is linear in the input and never allocates on
// success. If ws is not nil, *ws is set when insignificant whitespace
// occurs inside the value, so a caller knows whether a compact copy is
// needed.
func ScanValue(b []byte, i, depth int, fl Flags, ws *bool) (int, *Fault) {
	if i >= len(b) {
		return i, fault(FaultTruncated, len(b), "unexpected end of input")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, f := ScanString(b, i, fl)
		return end, f
	case c == '{':
		if f := CheckDepth(i, depth); f != nil {
			return i, f
		}
		i = skip(b, i+1, ws)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, unexpected(b, i, "expected object key")
			}
			var f *Fault
			if i, _, f = ScanString(b, i, fl); f != nil {
				return i, f
			}
			i = skip(b, i, ws)
			if i >= len(b) || b[i] != ':' {
				return i, unexpected(b, i, "expected ':' after object key")
			}
			i = skip(b, i+1, ws)
			if i, f = ScanValue(b, i, depth+1, fl, ws); f != nil {
				return i, f
			}
			i = skip(b, i, ws)
			if i >= len(b) {
				return i, fault(FaultTruncated, len(b), "unterminated object")
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, fault(FaultSyntax, i, "expected ',' or '}' in object")
			}
			i = skip(b, i+1, ws)
		}
	case c == '[':
		if f := CheckDepth(i, depth); f != nil {
			return i, f
		}
		i = skip(b, i+1, ws)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var f *Fault
			if i, f = ScanValue(b, i, depth+1, fl, ws); f != nil {
				return i, f
			}
			i = skip(b, i, ws)
			if i >= len(b) {
				return i, fault(FaultTruncated, len(b), "unterminated array")
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, fault(FaultSyntax, i, "expected ',' or ']' in array")
			}
			i = skip(b, i+1, ws)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if end, _, ok := ShortInt(b, i); ok {
			return end, nil
		}
		n, f := ScanNumber(b, i)
		return n.End, f
	case c == 't':
		return ScanLiteral(b, i, "true")
	case c == 'f':
		return ScanLiteral(b, i, "false")
	case c == 'n':
		return ScanLiteral(b, i, "null")
	default:
		return i, fault(FaultSyntax, i, "invalid character "+strconv.QuoteRune(rune(c))+" looking for a value")
	}
}

// skip is SkipSpace that records whether it skipped anything.
func skip(b []byte, i int, ws *bool) int {
	j := SkipSpace(b, i)
	if j != i && ws != nil {
		*ws = true
	}
	return j
}

// unexpected reports b[i] as out of place, or truncation at the end.
func unexpected(b []byte, i int, reason string) *Fault {
	if i >= len(b) {
		return fault(FaultTruncated, len(b), reason)
	}
	return fault(FaultSyntax, i, reason)
}

// CheckDepth returns a FaultDepth at i if a container opened at b[i],
// inside depth others, would exceed bound.MaxDepth, and nil otherwise.
func CheckDepth(i, depth int) *Fault {
	if depth < bound.MaxDepth {
		return nil
	}
	return depthFault(i)
}

func depthFault(i int) *Fault {
	return fault(FaultDepth, i, "nesting deeper than "+strconv.Itoa(bound.MaxDepth))
}

// Valid checks that b holds exactly one JSON value, optionally surrounded
// by whitespace, and returns the value's span and whether whitespace
// occurred inside it.
func Valid(b []byte, fl Flags) (start, end int, ws bool, f *Fault) {
	start = SkipSpace(b, 0)
	end, f = ScanValue(b, start, 0, fl, &ws)
	if f != nil {
		return start, end, ws, f
	}
	if rest := SkipSpace(b, end); rest != len(b) {
		return start, end, ws, fault(FaultTrailing, rest, "trailing data after JSON value")
	}
	return start, end, ws, nil
}

// ScanLiteral checks that b holds the literal lit (true, false or null)
// at i and returns the offset just past it.
func ScanLiteral(b []byte, i int, lit string) (int, *Fault) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i, fault(FaultTruncated, len(b), "invalid literal")
		}
		if b[i+k] != lit[k] {
			return i, fault(FaultSyntax, i+k, "invalid literal")
		}
	}
	return i + len(lit), nil
}

// Number is what ScanNumber learned about a number in the one pass that
// validated it.
type Number struct {
	// End is the offset just past the number.
	End int
	// Float is set when the number has a fraction or an exponent.
	Float bool
	// Neg is set when the number starts with '-'.
	Neg bool
	// Mag is the integer part's magnitude, when Overflow is not set.
	Mag uint64
	// Overflow is set when the integer part exceeds math.MaxUint64.
	Overflow bool
}

// Int64 returns an integer Number's value, and whether it has no
// fraction or exponent and fits an int64.
func (n Number) Int64() (int64, bool) {
	switch {
	case n.Float || n.Overflow:
		return 0, false
	case n.Neg && n.Mag <= 1<<63:
		return -int64(n.Mag-1) - 1, true
	case !n.Neg && n.Mag <= math.MaxInt64:
		return int64(n.Mag), true
	}
	return 0, false
}

// ScanNumber validates the RFC 8259 §6 number at b[i] (a '-' or a digit).
// A number must be followed by a delimiter: "01", "1.5.2" and "2-1" are
// malformed numbers, not a number followed by something else.
// ShortInt reports whether b[i:] starts with a complete non-negative
// integer of at most 18 digits, the most common number by far, and
// returns its end and value. It is small enough to be inlined into a
// converter's loop, which calls ScanNumber only when it reports false;
// it accepts only what ScanNumber accepts, with the same end and value.
func ShortInt(b []byte, i int) (end int, u uint64, ok bool) {
	j := i
	for j < len(b) && b[j]-'0' < 10 {
		u = u*10 + uint64(b[j]-'0')
		j++
	}
	ok = uint(j-i-1) < 18 && (b[i] != '0' || j == i+1) && (j == len(b) || !numberByte[b[j]])
	return j, u, ok
}

// numberByte marks the bytes that may continue a number.
var numberByte = func() (t [256]bool) {
	for _, c := range "0123456789.eE+-" {
		t[c] = true
	}
	return t
}()

// ScanNumber validates the RFC 8259 §6 number at b[i] (a '-' or a digit).
// A number must be followed by a delimiter: "01", "1.5.2" and "2-1" are
// malformed numbers, not a number followed by something else.
func ScanNumber(b []byte, i int) (Number, *Fault) {
	var n Number
	if b[i] == '-' {
		n.Neg = true
		i++
	}
	if i >= len(b) {
		return Number{End: i}, fault(FaultTruncated, len(b), "invalid number")
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		var u uint64
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := uint64(b[i] - '0')
			if u > (math.MaxUint64-d)/10 {
				n.Overflow = true
			}
			u = u*10 + d
		}
		n.Mag = u
	default:
		return Number{End: i}, fault(FaultSyntax, i, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		n.Float = true
		i++
		if f := digit(b, i, "invalid number: no digits after '.'"); f != nil {
			return Number{End: i}, f
		}
		i = skipDigits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		n.Float = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if f := digit(b, i, "invalid number: no digits in exponent"); f != nil {
			return Number{End: i}, f
		}
		i = skipDigits(b, i)
	}
	if i < len(b) && numberByte[b[i]] {
		return Number{End: i}, fault(FaultSyntax, i, "invalid number")
	}
	n.End = i
	return n, nil
}

func digit(b []byte, i int, reason string) *Fault {
	if i >= len(b) {
		return fault(FaultTruncated, len(b), reason)
	}
	if c := b[i]; c < '0' || c > '9' {
		return fault(FaultSyntax, i, reason)
	}
	return nil
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// ScanString validates the string whose opening quote is at b[i] and
// returns the offset just past its closing quote and whether it holds an
// escape (so its body is not its text). It checks everything JSON and fl
// ask of a string: no raw control characters, only the defined escapes,
// and, per fl, UTF-8 and paired surrogates; decoding it afterwards with
// AppendUnescaped cannot fail.
func ScanString(b []byte, i int, fl Flags) (end int, esc bool, f *Fault) {
	i++
	for {
		i = PlainRun(b, i)
		if i >= len(b) {
			return i, false, fault(FaultTruncated, len(b), "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			n, f := escape(b, i, fl)
			if f != nil {
				return i, false, f
			}
			i += n
		case c < 0x20:
			return i, false, fault(FaultSyntax, i, "control character in string")
		case fl&CheckUTF8 == 0:
			i = SpecialRun(b, i)
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, false, badRune(b, i)
			}
			i += size
			if i < len(b) && b[i] >= utf8.RuneSelf {
				// Text beyond ASCII goes on: it is validated a run at a
				// time, up to the next quote, backslash or control;
				// rune by rune, CJK text costs three to five times as
				// much. A lone accented letter keeps the path above,
				// which is cheaper for it.
				j := SpecialRun(b, i)
				if !utf8.Valid(b[i:j]) {
					return i, false, badRune(b, i)
				}
				i = j
			}
		}
	}
}

// badRune is the fault for the first rune at or after b[i] that is not
// UTF-8, which the caller knows is there: a rune cut short by the end of
// b is a truncation, anything else invalid.
func badRune(b []byte, i int) *Fault {
	for {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if !utf8.FullRune(b[i:]) {
				return fault(FaultTruncated, len(b), "unterminated string")
			}
			return fault(FaultInvalidUTF8, i, "invalid UTF-8 in string")
		}
		i += size
	}
}

// escape checks the escape sequence at b[i] (a backslash) and returns its
// length: 2, 6, or 12 for a surrogate pair under RefuseLoneSurrogate.
func escape(b []byte, i int, fl Flags) (int, *Fault) {
	if i+1 >= len(b) {
		return 0, fault(FaultTruncated, len(b), "unterminated escape")
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, fault(FaultSyntax, i+1, "invalid escape character")
	}
	r, f := hex4(b, i+2)
	if f != nil {
		return 0, f
	}
	if fl&RefuseLoneSurrogate == 0 || !utf16.IsSurrogate(r) {
		return 6, nil
	}
	if r >= 0xdc00 {
		return 0, fault(FaultLoneSurrogate, i, "lone surrogate escape")
	}
	// A high surrogate must be followed by an escaped low one (RFC 8259
	// §7); anything else would have to be replaced or passed on broken.
	for j := i + 6; j < i+8; j++ {
		if j >= len(b) {
			return 0, fault(FaultTruncated, len(b), "unterminated string")
		}
		if b[j] != `\u`[j-i-6] {
			return 0, fault(FaultLoneSurrogate, i, "lone surrogate escape")
		}
	}
	r2, f := hex4(b, i+8)
	if f != nil {
		return 0, f
	}
	if r2 < 0xdc00 || r2 > 0xdfff {
		return 0, fault(FaultLoneSurrogate, i, "lone surrogate escape")
	}
	return 12, nil
}

func hex4(b []byte, i int) (rune, *Fault) {
	var r rune
	for k := i; k < i+4; k++ {
		if k >= len(b) {
			return 0, fault(FaultTruncated, len(b), `invalid \u escape`)
		}
		d := unhex(b[k])
		if d < 0 {
			return 0, fault(FaultSyntax, k, `invalid \u escape`)
		}
		r = r<<4 | d
	}
	return r, nil
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// PlainRun returns the offset of the first byte of b at or after i that
// is a quote, a backslash, a C0 control or not ASCII, or len(b).
func PlainRun(b []byte, i int) int { return stopRun(b, i, nonASCII) }

// SpecialRun returns the offset of the first byte of b at or after i that
// is a quote, a backslash or a C0 control, or len(b): the end of a run of
// text that may hold characters beyond ASCII, which the caller validates
// whole (utf8.Valid) rather than one rune at a time.
func SpecialRun(b []byte, i int) int { return stopRun(b, i, 0) }

// nonASCII is stopRun's high for stopping at bytes beyond ASCII.
const nonASCII = 0x8080808080808080

// stopRun is PlainRun (high nonASCII) and SpecialRun (high 0). Runs are
// most of every string in practice, and long ones (a file's text, an
// encoded blob) are where the bridge spends its time per byte: after a
// first 16 bytes tested by words, which end most short runs without a
// call, the rest goes 16 bytes at a time (stopBlocks).
func stopRun(b []byte, i int, high uint64) int {
	if len(b)-i >= longRun {
		if j := stopWords(b[:i+16], i, high); j < i+16 {
			return j
		}
		i += 16
		i += stopBlocks(b[i:], high)
		if i < len(b) && stops(b[i], high) {
			return i
		}
	}
	return stopWords(b, i, high)
}

// longRun is the length from which stopRun uses stopBlocks: below it the
// call costs more than the words it saves.
const longRun = 64

// stops reports whether c ends a run: a quote, a backslash, a C0
// control, or beyond ASCII when high says so.
func stops(c byte, high uint64) bool {
	return c == '"' || c == '\\' || c < 0x20 || c&byte(high) != 0
}

// stopWords is stopRun eight bytes at a time (the "has less than" and
// "has zero byte" tricks of Hacker's Delight / Bit Twiddling Hacks).
func stopWords(b []byte, i int, high uint64) int {
	const lo = 0x0101010101010101
	const hi = 0x8080808080808080
	for ; len(b)-i >= 8; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (lo * '"')
		s := x ^ (lo * '\\')
		m := (x&high | (x-lo*0x20)&^x | (q-lo)&^q | (s-lo)&^s) & hi
		if m != 0 {
			// Borrows only travel upwards, so the lowest flagged byte
			// is a true hit.
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if stops(b[i], high) {
			return i
		}
	}
	return i
}

// AppendUnescaped appends the text of a validated string body (without
// its quotes) to dst. Half a surrogate pair becomes U+FFFD, as in
// encoding/json; under RefuseLoneSurrogate validation there is none.
func AppendUnescaped(dst, body []byte) []byte {
	for {
		j := indexBackslash(body)
		if j < 0 {
			return append(dst, body...)
		}
		dst = append(dst, body[:j]...)
		switch c := body[j+1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hexRune(body[j+2:])
			body = body[j+6:]
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(body) >= 6 && body[0] == '\\' && body[1] == 'u' {
					r2 = hexRune(body[2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					body = body[6:]
					r = d
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		body = body[j+2:]
	}
}

func indexBackslash(b []byte) int { return bytes.IndexByte(b, '\\') }

func hexRune(b []byte) rune {
	return unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3])
}

// Unquote returns the text of a validated JSON string (with its quotes).
func Unquote(raw []byte) string {
	body := raw[1 : len(raw)-1]
	if indexBackslash(body) < 0 {
		return string(body)
	}
	return string(AppendUnescaped(make([]byte, 0, len(body)), body))
}

// KeyIs reports whether the validated string raw (with its quotes) has the
// text name. Escapes are decoded first, so "\u0069d" is the key "id", as
// JSON says.
func KeyIs(raw []byte, name string) bool {
	body := raw[1 : len(raw)-1]
	if len(body) == len(name) && string(body) == name {
		return true
	}
	if indexBackslash(body) < 0 {
		return false
	}
	return Unquote(raw) == name
}

// AppendQuoted appends s as a JSON string. Every control character is
// escaped, so the result never holds a raw newline; s must be UTF-8 (it
// is not checked).
func AppendQuoted(dst []byte, s string) []byte {
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

// AppendCompact appends the validated JSON value v without insignificant
// whitespace. JSON forbids raw newlines inside strings, so the output
// never holds one.
func AppendCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if IsSpace(c) {
			continue
		}
		if c != '"' {
			dst = append(dst, c)
			continue
		}
		end := skipString(v, i)
		dst = append(dst, v[i:end]...)
		i = end - 1
	}
	return dst
}

// EachMember calls f for each member of the validated JSON object obj, in
// order, with the member's raw (still quoted) key and its value's raw
// span. It stops at, and returns, the first error f returns.
func EachMember(obj []byte, f func(key, val []byte) error) error {
	i := SkipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		ks := i
		ke := skipString(obj, i)
		i = SkipSpace(obj, ke)
		i = SkipSpace(obj, i+1) // ':'
		vs := min(i, len(obj))
		ve := skipValue(obj, vs)
		if err := f(obj[ks:ke], obj[vs:ve]); err != nil {
			return err
		}
		i = SkipSpace(obj, ve)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		i = SkipSpace(obj, i+1) // ','
	}
	return nil
}

// EachElement calls f for each element of the validated JSON array arr
// with its index and raw span. It stops at, and returns, the first error
// f returns.
func EachElement(arr []byte, f func(i int, val []byte) error) error {
	i := SkipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for n := 0; i < len(arr); n++ {
		ve := skipValue(arr, i)
		if err := f(n, arr[i:ve]); err != nil {
			return err
		}
		i = SkipSpace(arr, ve)
		if i >= len(arr) || arr[i] == ']' {
			return nil
		}
		i = SkipSpace(arr, i+1)
	}
	return nil
}

// skipString returns the offset just past the validated string whose
// opening quote is at b[i] (or len(b) if it has no closing quote). It
// only looks for quotes, with bytes.IndexByte, which runs at memory
// speed: a walker over validated JSON need not check a string again to
// step over it. A quote is the closing one when an even number of
// backslashes precedes it.
func skipString(b []byte, i int) int {
	body := i + 1
	for i = body; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			break
		}
		i += j
		k := i
		for k > body && b[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the offset just past the validated value at b[i]
// (at most len(b)) without checking it again: strings by skipString,
// containers by counting brackets outside strings, numbers and literals
// up to the next delimiter.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) && numberByte[b[i]] || i < len(b) && b[i] >= 'a' && b[i] <= 'z' {
		i++
	}
	return i
}

// Value is one JSON value that this package validated with CheckUTF8:
// RFC 8259 syntax, nesting within bound.MaxDepth, every string UTF-8. A
// decoder handed a Value walks it without validating it again. Holding
// one is the proof: Values come only from ScanObject, which validates
// every byte it yields, and from Clone, Own and Lease; nothing converts bytes
// from elsewhere into a Value. Its bytes alias what was scanned and must
// not be modified. The zero Value is "absent".
type Value struct {
	b []byte
	// s, when set, is the memory b views: an owned Value lives in a
	// string, so text cut from it (Str) is shared, not copied.
	s string
	// class is 1 + the lease class of a leased Value's memory (Lease);
	// 0 for any other.
	class uint8
}

// Bytes returns the value's JSON text (nil for the zero Value). The
// caller must not modify it: for an owned Value it is a view of a
// string.
func (v Value) Bytes() []byte { return v.b }

// IsZero reports whether v is the zero Value (no value).
func (v Value) IsZero() bool { return v.b == nil }

// Clone returns a Value with its own copy of the bytes, for a value that
// must outlive the buffer it was scanned in.
func (v Value) Clone() Value {
	if v.b == nil {
		return Value{}
	}
	return Value{b: bytes.Clone(v.b)}
}

// Own is Clone into a string: one copy that nothing ever writes, so a
// decoder can hand out text cut from it (Str) without copying that text
// again. Bytes of the result must only be read, and only by code that
// does not keep them: whatever a decoder returns as []byte it copies.
func (v Value) Own() Value {
	if v.b == nil {
		return Value{}
	}
	s := string(v.b)
	return Value{b: unsafe.Slice(unsafe.StringData(s), len(s)), s: s}
}

// Owned reports whether v lives in memory of its own (Own), so Str
// shares it.
func (v Value) Owned() bool { return v.s != "" }

// Str returns the bytes sub as a string: for an owned Value, when sub
// lies within its bytes, a substring of its memory (no copy); otherwise
// a copy.
func (v Value) Str(sub []byte) string {
	if v.s != "" && len(sub) > 0 {
		off := cap(v.b) - cap(sub)
		if off >= 0 && off+len(sub) <= len(v.b) && &v.b[off] == &sub[0] {
			return v.s[off : off+len(sub)]
		}
	}
	return string(sub)
}

// ScanObject validates the JSON object whose '{' is at b[i] (inside
// depth containers), as ScanValue does with fl|CheckUTF8, and in the same
// pass calls f with each member's raw (quoted, validated) key, its value
// as a Value and the value's offset in b, in order, until f returns
// false; validation goes on to the end of the object either way, so the
// verdict and any fault are exactly ScanValue's. It returns the offset
// just past the object. One pass both checks a message and hands its
// members out, where Valid followed by EachMember would scan every byte
// twice.
func ScanObject(b []byte, i, depth int, fl Flags, f func(key []byte, val Value, off int) bool) (int, *Fault) {
	fl |= CheckUTF8
	if i >= len(b) {
		return i, fault(FaultTruncated, len(b), "unexpected end of input")
	}
	if b[i] != '{' {
		return ScanValue(b, i, depth, fl, nil)
	}
	if f := CheckDepth(i, depth); f != nil {
		return i, f
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	more := true
	for {
		if i >= len(b) || b[i] != '"' {
			return i, unexpected(b, i, "expected object key")
		}
		ks := i
		var fa *Fault
		if i, _, fa = ScanString(b, i, fl); fa != nil {
			return i, fa
		}
		ke := i
		i = SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, unexpected(b, i, "expected ':' after object key")
		}
		i = SkipSpace(b, i+1)
		vs := i
		if i, fa = ScanValue(b, i, depth+1, fl, nil); fa != nil {
			return i, fa
		}
		if more {
			more = f(b[ks:ke], Value{b: b[vs:i]}, vs)
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, fault(FaultTruncated, len(b), "unterminated object")
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, fault(FaultSyntax, i, "expected ',' or '}' in object")
		}
		i = SkipSpace(b, i+1)
	}
}
