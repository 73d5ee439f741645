package interchange

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/msgpk"
)

// mpConv converts one MessagePack value to JSON. It is used by one
// goroutine for one call.
type mpConv struct {
	src   []byte
	out   []byte
	limit int // len(out) may not pass this (Limits.MaxOutput)
	st    *scratch
}

// value converts the value starting at src[p], enclosed by depth arrays
// and maps, and returns the offset just past it.
func (c *mpConv) value(p, depth int) (int, *Fault) {
	src := c.src
	if p >= len(src) {
		return p, newFault(FaultTruncated, len(src))
	}
	if len(c.out) > c.limit {
		return p, newFault(FaultTooLarge, p)
	}
	// One-byte headers, most of any document, are decoded inline.
	h, ok := msgpk.ReadFix(src, p)
	if !ok {
		var err error
		h, err = msgpk.ReadHead(src, p)
		if f := headFault(src, p, h, err); f != nil {
			return p, f
		}
	}
	switch h.Kind {
	case msgpk.Str:
		return c.str(h)
	case msgpk.Map:
		return c.object(p, h.Off, clampLen(h.V), depth)
	case msgpk.Array:
		return c.array(p, h.Off, clampLen(h.V), depth)
	case msgpk.Uint:
		c.out = strconv.AppendUint(c.out, h.V, 10)
	case msgpk.NegInt:
		c.out = strconv.AppendInt(c.out, int64(h.V), 10)
	case msgpk.Nil:
		c.out = append(c.out, "null"...)
	case msgpk.False:
		c.out = append(c.out, "false"...)
	case msgpk.True:
		c.out = append(c.out, "true"...)
	case msgpk.Float32:
		// Widened, not re-rounded: the JSON number is the exact value the
		// float32 held, so it converts back to an equal float64.
		return h.Off, c.float(p, float64(math.Float32frombits(uint32(h.V))))
	case msgpk.Float64:
		return h.Off, c.float(p, math.Float64frombits(h.V))
	}
	return h.Off, nil
}

// headFault is the fault, if any, for the header h read at src[p] with
// err. Binary and extension values are refused by kind, whole or
// truncated: no JSON form exists that a reader would not have to guess at
// (base64? an array of bytes?).
func headFault(src []byte, p int, h msgpk.Head, err error) *Fault {
	switch {
	case h.Kind == msgpk.Bin:
		return newFault(FaultBinary, p)
	case h.Kind == msgpk.Ext:
		return newFault(FaultExtension, p)
	case err == msgpk.ErrInvalid: // 0xc1, "never used" in the spec
		return newFault(FaultSyntax, p)
	case err != nil:
		return newFault(FaultTruncated, len(src))
	}
	return nil
}

// clampLen turns a declared 32-bit count into an int. On 32-bit platforms
// a count past MaxInt cannot be satisfied by the input anyway, so it is
// clamped and the conversion reports truncation.
func clampLen(n uint64) int {
	if n > math.MaxInt32 && strconv.IntSize == 32 {
		return math.MaxInt32
	}
	return int(n)
}

func (c *mpConv) float(p int, v float64) *Fault {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return newFault(FaultNonFinite, p)
	}
	c.out = appendFloat(c.out, v)
	return nil
}

// appendFloat writes v as the shortest decimal that parses back to v,
// formatted as ECMAScript (and encoding/json) do, and always with a "." or
// an exponent: a float must come back from JSON as a float, and 1e20
// written as an integer would not even fit the integer range.
func appendFloat(dst []byte, v float64) []byte {
	start := len(dst)
	abs := math.Abs(v)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		// "1e-07" → "1e-7", as encoding/json does.
		if n := len(dst); n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	for _, ch := range dst[start:] {
		if ch == '.' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

// str converts the string whose header is h (its payload is known to fit).
func (c *mpConv) str(h msgpk.Head) (int, *Fault) {
	var bad int
	c.out, bad = appendJSONString(c.out, c.src[h.Off:h.End()])
	if bad >= 0 {
		return h.Off, newFault(FaultInvalidUTF8, h.Off+bad)
	}
	return h.End(), nil
}

func (c *mpConv) array(p, q, n, depth int) (int, *Fault) {
	if depth >= MaxDepth {
		return p, newFault(FaultDepth, p)
	}
	c.out = append(c.out, '[')
	for i := range n {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		var f *Fault
		if q, f = c.value(q, depth+1); f != nil {
			return q, f.index(i)
		}
	}
	c.out = append(c.out, ']')
	return q, nil
}

func (c *mpConv) object(p, q, n, depth int) (int, *Fault) {
	if depth >= MaxDepth {
		return p, newFault(FaultDepth, p)
	}
	if c.st == nil {
		c.st = getScratch()
	}
	base := len(c.st.keys)
	src := c.src
	c.out = append(c.out, '{')
	for i := range n {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		// The key: only str has a JSON form.
		if q >= len(src) {
			return q, newFault(FaultTruncated, len(src))
		}
		kp := q
		kh, ok := msgpk.ReadFix(src, q)
		var err error
		if !ok {
			kh, err = msgpk.ReadHead(src, q)
		}
		if kh.Kind != msgpk.Str {
			return q, newFault(FaultNonStringKey, kp)
		}
		if err != nil {
			return q, newFault(FaultTruncated, len(src))
		}
		kn := int(kh.V)
		q = kh.Off
		key := src[q : q+kn]
		var bad int
		if c.out, bad = appendJSONString(c.out, key); bad >= 0 {
			return q, newFault(FaultInvalidUTF8, q+bad)
		}
		if c.st.addKey(src, base, q, kn) {
			return kp, newFault(FaultDuplicateKey, kp).key(key)
		}
		c.out = append(c.out, ':')
		var f *Fault
		if q, f = c.value(q+kn, depth+1); f != nil {
			return q, f.key(key)
		}
	}
	c.st.keys = c.st.keys[:base]
	c.out = append(c.out, '}')
	return q, nil
}

// appendJSONString appends s as a JSON string. It escapes only what RFC
// 8259 §7 requires (quote, backslash, C0 controls), so the text stays
// readable to the tool, and returns the offset in s of the first byte that
// is not valid UTF-8, or -1.
func appendJSONString(dst, s []byte) ([]byte, int) {
	dst = append(dst, '"')
	i, start := 0, 0
	for {
		i = jsonlex.PlainRun(s, i)
		if i >= len(s) {
			break
		}
		ch := s[i]
		if ch >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, i
			}
			i += size
			if i < len(s) && s[i] >= utf8.RuneSelf {
				// Text beyond ASCII goes on: it is validated a run at a
				// time, up to the next byte to escape (jsonlex.ScanString
				// says why).
				j := jsonlex.SpecialRun(s, i)
				if !utf8.Valid(s[i:j]) {
					return dst, firstInvalid(s, i)
				}
				i = j
			}
			continue
		}
		dst = append(dst, s[start:i]...)
		switch ch {
		case '"', '\\':
			dst = append(dst, '\\', ch)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), -1
}

// firstInvalid is the offset of the first byte at or after s[i] that does
// not begin a UTF-8 rune, which the caller knows is there.
func firstInvalid(s []byte, i int) int {
	for {
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
}

const hexDigits = "0123456789abcdef"
