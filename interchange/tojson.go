package interchange

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
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
	b := src[p]
	switch {
	case b <= 0x7f: // positive fixint
		c.out = strconv.AppendUint(c.out, uint64(b), 10)
		return p + 1, nil
	case b >= 0xe0: // negative fixint
		c.out = strconv.AppendInt(c.out, int64(int8(b)), 10)
		return p + 1, nil
	case b <= 0x8f:
		return c.object(p, p+1, int(b&0x0f), depth)
	case b <= 0x9f:
		return c.array(p, p+1, int(b&0x0f), depth)
	case b <= 0xbf:
		return c.str(p, p+1, int(b&0x1f))
	}
	switch b {
	case 0xc0:
		c.out = append(c.out, "null"...)
		return p + 1, nil
	case 0xc2:
		c.out = append(c.out, "false"...)
		return p + 1, nil
	case 0xc3:
		c.out = append(c.out, "true"...)
		return p + 1, nil
	case 0xc4, 0xc5, 0xc6:
		// No JSON form exists that a reader would not have to guess at
		// (base64? an array of bytes?), so binary is refused (issue 4).
		return p, newFault(FaultBinary, p)
	case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return p, newFault(FaultExtension, p)
	case 0xca:
		u, q, f := c.uint(p, 4)
		if f != nil {
			return q, f
		}
		// Widened, not re-rounded: the JSON number is the exact value the
		// float32 held, so it converts back to an equal float64.
		return q, c.float(p, float64(math.Float32frombits(uint32(u))))
	case 0xcb:
		u, q, f := c.uint(p, 8)
		if f != nil {
			return q, f
		}
		return q, c.float(p, math.Float64frombits(u))
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, q, f := c.uint(p, 1<<(b-0xcc))
		if f == nil {
			c.out = strconv.AppendUint(c.out, u, 10)
		}
		return q, f
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (b - 0xd0)
		u, q, f := c.uint(p, n)
		if f == nil {
			shift := 64 - 8*n // sign-extend the n-byte value
			c.out = strconv.AppendInt(c.out, int64(u<<shift)>>shift, 10)
		}
		return q, f
	case 0xd9, 0xda, 0xdb:
		n, q, f := c.uint(p, 1<<(b-0xd9))
		if f != nil {
			return q, f
		}
		return c.str(p, q, clampLen(n))
	case 0xdc, 0xdd:
		n, q, f := c.uint(p, 2<<(b-0xdc))
		if f != nil {
			return q, f
		}
		return c.array(p, q, clampLen(n), depth)
	case 0xde, 0xdf:
		n, q, f := c.uint(p, 2<<(b-0xde))
		if f != nil {
			return q, f
		}
		return c.object(p, q, clampLen(n), depth)
	}
	return p, newFault(FaultSyntax, p) // 0xc1, "never used" in the spec
}

// clampLen turns a declared 32-bit length into an int. On 32-bit
// platforms a length past MaxInt cannot be satisfied by the input anyway,
// so it is clamped and the conversion reports truncation.
func clampLen(n uint64) int {
	if n > math.MaxInt32 && strconv.IntSize == 32 {
		return math.MaxInt32
	}
	return int(n)
}

// uint reads the n-byte big-endian payload after the type byte at p.
func (c *mpConv) uint(p, n int) (uint64, int, *Fault) {
	q := p + 1
	if len(c.src)-q < n {
		return 0, p, newFault(FaultTruncated, len(c.src))
	}
	b := c.src[q : q+n]
	switch n {
	case 1:
		return uint64(b[0]), q + 1, nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), q + 2, nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), q + 4, nil
	}
	return binary.BigEndian.Uint64(b), q + 8, nil
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

// str converts the n-byte string payload at src[q]; p is its type byte.
func (c *mpConv) str(p, q, n int) (int, *Fault) {
	if len(c.src)-q < n {
		return p, newFault(FaultTruncated, len(c.src))
	}
	var bad int
	c.out, bad = appendJSONString(c.out, c.src[q:q+n])
	if bad >= 0 {
		return p, newFault(FaultInvalidUTF8, q+bad)
	}
	return q + n, nil
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
		var kn int
		switch b := src[q]; {
		case b >= 0xa0 && b <= 0xbf:
			kn, q = int(b&0x1f), q+1
		case b >= 0xd9 && b <= 0xdb:
			u, q2, f := c.uint(q, 1<<(b-0xd9))
			if f != nil {
				return q2, f
			}
			kn, q = clampLen(u), q2
		default:
			return q, newFault(FaultNonStringKey, kp)
		}
		if len(src)-q < kn {
			return q, newFault(FaultTruncated, len(src))
		}
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
		i = plainRun(s, i)
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

const hexDigits = "0123456789abcdef"

// plainRun returns the index of the first byte of s at or after i that is
// a quote, a backslash, a C0 control or not ASCII, or len(s). It tests
// eight bytes at a time (the "has less than" and "has zero byte" tricks
// of Hacker's Delight / Bit Twiddling Hacks), since plain runs are most of
// every string in practice.
func plainRun(s []byte, i int) int {
	const lo = 0x0101010101010101
	const hi = 0x8080808080808080
	for ; len(s)-i >= 8; i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		q := x ^ (lo * '"')
		b := x ^ (lo * '\\')
		m := (x | (x-lo*0x20)&^x | (q-lo)&^q | (b-lo)&^b) & hi
		if m != 0 {
			// Borrows only travel upwards, so the lowest flagged byte
			// is a true hit.
			return i + trailingZeroBytes(m)
		}
	}
	for ; i < len(s); i++ {
		if !plainByte[s[i]] {
			return i
		}
	}
	return i
}

var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func trailingZeroBytes(m uint64) int { return bits.TrailingZeros64(m) >> 3 }
