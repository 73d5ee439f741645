package interchange

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// jsConv converts one JSON text to MessagePack. It is used by one
// goroutine for one call.
type jsConv struct {
	src   []byte
	out   []byte
	limit int
	st    *scratch
}

// lexFlags is interchange's JSON dialect: strings must be UTF-8 with
// paired surrogates, since the MessagePack str they become must be UTF-8.
const lexFlags = jsonlex.CheckUTF8 | jsonlex.RefuseLoneSurrogate

var lexKinds = [...]FaultKind{
	jsonlex.FaultTruncated:     FaultTruncated,
	jsonlex.FaultSyntax:        FaultSyntax,
	jsonlex.FaultInvalidUTF8:   FaultInvalidUTF8,
	jsonlex.FaultLoneSurrogate: FaultLoneSurrogate,
	jsonlex.FaultDepth:         FaultDepth,
	jsonlex.FaultTrailing:      FaultTrailing,
}

// lexFault translates the lexer's fault into the package's.
func lexFault(f *jsonlex.Fault) *Fault {
	return newFault(lexKinds[f.Kind], f.Offset)
}

func (c *jsConv) skipSpace(p int) int {
	return jsonlex.SkipSpace(c.src, p)
}

// unexpected reports the byte at p as out of place, or truncation if the
// input ends there.
func (c *jsConv) unexpected(p int) *Fault {
	if p >= len(c.src) {
		return newFault(FaultTruncated, len(c.src))
	}
	return newFault(FaultSyntax, p)
}

// value converts the value at src[p] (no leading space), enclosed by
// depth arrays and objects, and returns the offset just past it.
func (c *jsConv) value(p, depth int) (int, *Fault) {
	src := c.src
	if p >= len(src) {
		return p, newFault(FaultTruncated, len(src))
	}
	if len(c.out) > c.limit {
		return p, newFault(FaultTooLarge, p)
	}
	switch ch := src[p]; ch {
	case '{':
		return c.object(p, depth)
	case '[':
		return c.array(p, depth)
	case '"':
		q, _, _, f := c.str(p)
		return q, f
	case 't':
		return c.literal(p, "true", 0xc3)
	case 'f':
		return c.literal(p, "false", 0xc2)
	case 'n':
		return c.literal(p, "null", 0xc0)
	default:
		if ch == '-' || ch >= '0' && ch <= '9' {
			// Numbers are most of many documents: a short integer is
			// read by the lexer's inlined fast path, anything else by
			// its full scan, called here rather than in a helper.
			if q, u, ok := jsonlex.ShortInt(src, p); ok {
				c.out = appendUint(c.out, u)
				return q, nil
			}
			n, f := jsonlex.ScanNumber(src, p)
			if f != nil {
				return n.End, lexFault(f)
			}
			// Without a fraction or exponent a number is an integer and
			// must fit int64 or uint64 exactly: no wrapping, no clamping,
			// no float fallback.
			switch u := n.Mag; {
			case n.Float:
				text := src[p:n.End]
				// ParseFloat neither keeps nor returns (on success) its
				// argument, so viewing the bytes as a string is safe and
				// saves a copy.
				v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(text), len(text)), 64)
				if err != nil && math.IsInf(v, 0) {
					return p, newFault(FaultFloatOverflow, p)
				}
				// Any other error is underflow, rounded to zero or a
				// subnormal as every JSON reader does; the lexer checked
				// the grammar.
				c.out = append(c.out, 0xcb)
				c.out = binary.BigEndian.AppendUint64(c.out, math.Float64bits(v))
			case n.Overflow, n.Neg && u > 1<<63:
				return p, newFault(FaultIntegerRange, p)
			case n.Neg && u != 0:
				c.out = appendInt(c.out, -int64(u-1)-1)
			default:
				c.out = appendUint(c.out, u)
			}
			return n.End, nil
		}
	}
	return p, newFault(FaultSyntax, p)
}

func (c *jsConv) literal(p int, word string, code byte) (int, *Fault) {
	q, f := jsonlex.ScanLiteral(c.src, p, word)
	if f != nil {
		return q, lexFault(f)
	}
	c.out = append(c.out, code)
	return q, nil
}

// appendUint writes u in the smallest MessagePack unsigned form.
func appendUint(dst []byte, u uint64) []byte {
	switch {
	case u <= 0x7f:
		return append(dst, byte(u))
	case u <= math.MaxUint8:
		return append(dst, 0xcc, byte(u))
	case u <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(u))
	case u <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(u))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), u)
}

// appendInt writes a negative i in the smallest MessagePack signed form.
func appendInt(dst []byte, i int64) []byte {
	switch {
	case i >= -32:
		return append(dst, byte(i))
	case i >= math.MinInt8:
		return append(dst, 0xd0, byte(i))
	case i >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(i))
	case i >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(i))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(i))
}

// strHeaderLen is the size of the smallest MessagePack str header for n
// bytes.
func strHeaderLen(n int) int {
	switch {
	case n <= 31:
		return 1
	case n <= math.MaxUint8:
		return 2
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func appendStrHeader(dst []byte, n int) []byte {
	switch {
	case n <= 31:
		return append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
}

// putStrHeader writes the header for n bytes into dst, which is exactly
// strHeaderLen(n) long.
func putStrHeader(dst []byte, n int) {
	switch len(dst) {
	case 1:
		dst[0] = 0xa0 | byte(n)
	case 2:
		dst[0], dst[1] = 0xd9, byte(n)
	case 3:
		dst[0] = 0xda
		binary.BigEndian.PutUint16(dst[1:], uint16(n))
	default:
		dst[0] = 0xdb
		binary.BigEndian.PutUint32(dst[1:], uint32(n))
	}
}

// str converts the string whose opening quote is at src[p] and returns
// the offset past its closing quote and where its decoded bytes landed in
// out.
func (c *jsConv) str(p int) (next, off, n int, f *Fault) {
	end, esc, lf := jsonlex.ScanString(c.src, p, lexFlags)
	if lf != nil {
		return p, 0, 0, lexFault(lf)
	}
	raw := c.src[p+1 : end-1]
	if uint64(len(raw)) > math.MaxUint32 {
		// MessagePack cannot say how long this string is.
		return p, 0, 0, newFault(FaultTooLarge, p)
	}
	if !esc {
		c.out = appendStrHeader(c.out, len(raw))
		off = len(c.out)
		c.out = append(c.out, raw...)
		return end, off, len(raw), nil
	}
	h := strHeaderLen(len(raw))
	at := len(c.out)
	c.out = slices.Grow(c.out, h+len(raw))[:at+h]
	// Escapes only shrink a string, so the header sized for the raw text
	// is big enough; if the decoded text needs a smaller header, slide it
	// down so the output stays in the smallest form.
	c.out = jsonlex.AppendUnescaped(c.out, raw)
	n = len(c.out) - at - h
	if h2 := strHeaderLen(n); h2 != h {
		copy(c.out[at+h2:], c.out[at+h:])
		c.out = c.out[:at+h2+n]
		h = h2
	}
	putStrHeader(c.out[at:at+h], n)
	return end, at + h, n, nil
}

func (c *jsConv) array(p, depth int) (int, *Fault) {
	if f := jsonlex.CheckDepth(p, depth); f != nil {
		return p, lexFault(f)
	}
	hdr := len(c.out)
	c.out = append(c.out, 0x90)
	q := c.skipSpace(p + 1)
	if q < len(c.src) && c.src[q] == ']' {
		return q + 1, nil
	}
	n := 0
	for {
		var f *Fault
		if q, f = c.value(q, depth+1); f != nil {
			return q, f.index(n)
		}
		if n++; uint64(n) > math.MaxUint32 {
			// MessagePack cannot count this many elements.
			return q, newFault(FaultTooLarge, p)
		}
		q = c.skipSpace(q)
		if q >= len(c.src) {
			return q, newFault(FaultTruncated, len(c.src))
		}
		if c.src[q] == ']' {
			break
		}
		if c.src[q] != ',' {
			return q, newFault(FaultSyntax, q)
		}
		q = c.skipSpace(q + 1)
	}
	c.closeContainer(hdr, n, false)
	return q + 1, nil
}

func (c *jsConv) object(p, depth int) (int, *Fault) {
	if f := jsonlex.CheckDepth(p, depth); f != nil {
		return p, lexFault(f)
	}
	if c.st == nil {
		c.st = getScratch()
	}
	base := len(c.st.keys)
	hdr := len(c.out)
	c.out = append(c.out, 0x80)
	q := c.skipSpace(p + 1)
	if q < len(c.src) && c.src[q] == '}' {
		return q + 1, nil
	}
	n := 0
	for {
		if q >= len(c.src) || c.src[q] != '"' {
			return q, c.unexpected(q)
		}
		kp := q
		var off, kn int
		var f *Fault
		if q, off, kn, f = c.str(q); f != nil {
			return q, f
		}
		// Keys are compared decoded ("a" and "\u0061" are the same key),
		// which is what the output holds.
		if c.st.addKey(c.out, base, off, kn) {
			return kp, newFault(FaultDuplicateKey, kp).key(c.out[off : off+kn])
		}
		q = c.skipSpace(q)
		if q >= len(c.src) || c.src[q] != ':' {
			return q, c.unexpected(q).key(c.out[off : off+kn])
		}
		q = c.skipSpace(q + 1)
		if q, f = c.value(q, depth+1); f != nil {
			return q, f.key(c.out[off : off+kn])
		}
		if n++; uint64(n) > math.MaxUint32 {
			return q, newFault(FaultTooLarge, p)
		}
		q = c.skipSpace(q)
		if q >= len(c.src) {
			return q, newFault(FaultTruncated, len(c.src))
		}
		if c.src[q] == '}' {
			break
		}
		if c.src[q] != ',' {
			return q, newFault(FaultSyntax, q)
		}
		q = c.skipSpace(q + 1)
	}
	c.st.keys = c.st.keys[:base]
	c.closeContainer(hdr, n, true)
	return q + 1, nil
}

// closeContainer completes the one-byte header written when a container
// opened. MessagePack puts the member count before the members, JSON says
// it only at the end, so a container of more than 15 members needs a
// longer header; rather than move its members now (which, nested, would
// copy the same bytes once per level) it is noted and expand makes room
// for every long header in one backwards pass at the end.
func (c *jsConv) closeContainer(hdr, n int, isMap bool) {
	if n <= 15 {
		c.out[hdr] |= byte(n)
		return
	}
	if c.st == nil {
		c.st = getScratch()
	}
	c.st.fix = append(c.st.fix, fixup{pos: hdr, n: n, isMap: isMap})
}

func containerHeaderLen(n int) int {
	switch {
	case n <= 15:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

// expand widens the headers of the containers closeContainer noted.
func (c *jsConv) expand() {
	fix := c.st.fix
	// Containers are noted as they close (children before parents);
	// the pass below needs them in output order.
	slices.SortFunc(fix, func(a, b fixup) int { return a.pos - b.pos })
	extra := 0
	for _, x := range fix {
		extra += containerHeaderLen(x.n) - 1
	}
	r := len(c.out)
	c.out = slices.Grow(c.out, extra)[:r+extra]
	w := len(c.out)
	for i := len(fix) - 1; i >= 0; i-- {
		x := fix[i]
		seg := r - (x.pos + 1)
		copy(c.out[w-seg:w], c.out[x.pos+1:r])
		w -= seg
		h := containerHeaderLen(x.n)
		w -= h
		b := c.out[w : w+h]
		if h == 3 {
			b[0] = 0xdc
			binary.BigEndian.PutUint16(b[1:], uint16(x.n))
		} else {
			b[0] = 0xdd
			binary.BigEndian.PutUint32(b[1:], uint32(x.n))
		}
		if x.isMap {
			b[0] += 2 // map16/map32 follow array16/array32
		}
		r = x.pos
	}
}
