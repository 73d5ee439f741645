package capwire

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/capbridge/capbridge/internal/bound"
)

// This file is a small MessagePack scanner and writer over byte slices.
// Envelopes are decoded by hand on top of it (no reflection) so that the
// bridge's hot path, one call in and one result out per tool call, costs a
// single pass and carries args/structured as sub-slices of the frame
// without re-encoding them (issue 5, lead's notes).

// Nesting is bounded by bound.MaxDepth inside any one envelope field,
// counted from the field's value (a map given as args is depth 1): the
// bound interchange and mcpwire enforce too, so a value capwire lets
// through is not refused for depth further on.

// kind is the MessagePack family of a value, with the signed-int formats
// that hold a non-negative value folded into kUint (some encoders, e.g. a
// JS one, write small positive numbers as int8).
type kind uint8

const (
	kNil kind = iota + 1
	kFalse
	kTrue
	kUint
	kNegInt
	kFloat
	kStr
	kBin
	kExt
	kArray
	kMap
)

// head is the decoded header of one value.
type head struct {
	k kind
	// v is the unsigned value (kUint), the two's-complement bits (kNegInt),
	// the payload length in bytes (kStr, kBin, kExt) or the element count
	// (kArray; kMap counts pairs).
	v uint64
	// off is where the payload or the first element starts; for scalars it
	// is where the next value starts.
	off int
}

// Structural faults. They mean the bytes are not MessagePack, so nothing
// after them can be trusted and the frame is a bad_frame.
var (
	errShort   = errors.New("value runs past the end of the frame")
	errInvalid = errors.New("byte 0xc1 is never used in MessagePack")
	// errTooDeep is not structural: the value is well formed (the scanner
	// walked it to its end) but nests deeper than bound.MaxDepth.
	errTooDeep = errors.New("nesting deeper than " + strconv.Itoa(bound.MaxDepth))
)

// readHead decodes the header at b[i]. It never reads past len(b) and
// reports errShort when the header, or a str/bin/ext payload, does not fit.
func readHead(b []byte, i int) (head, error) {
	if i >= len(b) {
		return head{}, errShort
	}
	c := b[i]
	switch {
	case c <= 0x7f:
		return head{k: kUint, v: uint64(c), off: i + 1}, nil
	case c >= 0xe0:
		return head{k: kNegInt, v: uint64(int64(int8(c))), off: i + 1}, nil
	case c <= 0x8f:
		return head{k: kMap, v: uint64(c & 0x0f), off: i + 1}, nil
	case c <= 0x9f:
		return head{k: kArray, v: uint64(c & 0x0f), off: i + 1}, nil
	case c <= 0xbf:
		return payload(b, kStr, uint64(c&0x1f), i+1)
	}
	switch c {
	case 0xc0:
		return head{k: kNil, off: i + 1}, nil
	case 0xc2:
		return head{k: kFalse, off: i + 1}, nil
	case 0xc3:
		return head{k: kTrue, off: i + 1}, nil
	case 0xc4, 0xd9: // bin8, str8
		n, ok := be(b, i+1, 1)
		return lenPayload(b, kindOf(c), n, i+2, ok)
	case 0xc5, 0xda: // bin16, str16
		n, ok := be(b, i+1, 2)
		return lenPayload(b, kindOf(c), n, i+3, ok)
	case 0xc6, 0xdb: // bin32, str32
		n, ok := be(b, i+1, 4)
		return lenPayload(b, kindOf(c), n, i+5, ok)
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, type byte, data
		w := 1 << (c - 0xc7)
		n, ok := be(b, i+1, w)
		// The payload starts at the type byte; it counts as one more byte.
		return lenPayload(b, kExt, n+1, i+1+w, ok)
	case 0xca:
		return scalar(b, kFloat, 0, i+5)
	case 0xcb:
		return scalar(b, kFloat, 0, i+9)
	case 0xcc, 0xcd, 0xce, 0xcf:
		w := 1 << (c - 0xcc)
		v, ok := be(b, i+1, w)
		if !ok {
			return head{}, errShort
		}
		return head{k: kUint, v: v, off: i + 1 + w}, nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		w := 1 << (c - 0xd0)
		u, ok := be(b, i+1, w)
		if !ok {
			return head{}, errShort
		}
		// Sign-extend from w bytes.
		shift := 64 - 8*w
		v := int64(u<<shift) >> shift
		if v >= 0 {
			return head{k: kUint, v: uint64(v), off: i + 1 + w}, nil
		}
		return head{k: kNegInt, v: uint64(v), off: i + 1 + w}, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16: type byte + data
		return payload(b, kExt, 1+uint64(1)<<(c-0xd4), i+1)
	case 0xdc:
		n, ok := be(b, i+1, 2)
		return count(kArray, n, i+3, ok)
	case 0xdd:
		n, ok := be(b, i+1, 4)
		return count(kArray, n, i+5, ok)
	case 0xde:
		n, ok := be(b, i+1, 2)
		return count(kMap, n, i+3, ok)
	case 0xdf:
		n, ok := be(b, i+1, 4)
		return count(kMap, n, i+5, ok)
	}
	return head{}, errInvalid // 0xc1
}

func kindOf(c byte) kind {
	if c >= 0xd9 {
		return kStr
	}
	return kBin
}

// be reads a w-byte big-endian unsigned integer at b[i:].
func be(b []byte, i, w int) (uint64, bool) {
	if i+w > len(b) {
		return 0, false
	}
	switch w {
	case 1:
		return uint64(b[i]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(b[i:])), true
	case 4:
		return uint64(binary.BigEndian.Uint32(b[i:])), true
	}
	return binary.BigEndian.Uint64(b[i:]), true
}

func payload(b []byte, k kind, n uint64, off int) (head, error) {
	if off > len(b) || n > uint64(len(b)-off) {
		return head{}, errShort
	}
	return head{k: k, v: n, off: off}, nil
}

func lenPayload(b []byte, k kind, n uint64, off int, ok bool) (head, error) {
	if !ok {
		return head{}, errShort
	}
	return payload(b, k, n, off)
}

func scalar(b []byte, k kind, v uint64, next int) (head, error) {
	if next > len(b) {
		return head{}, errShort
	}
	return head{k: k, v: v, off: next}, nil
}

func count(k kind, n uint64, off int, ok bool) (head, error) {
	if !ok {
		return head{}, errShort
	}
	return head{k: k, v: n, off: off}, nil
}

// end is the offset just past a value whose header is h, for scalars and
// str/bin/ext; containers need skip.
func (h head) end() int {
	switch h.k {
	case kStr, kBin, kExt:
		return h.off + int(h.v)
	}
	return h.off
}

// skip returns the offset just past the value at b[i], checking that it is
// well formed. depth is the number of containers already open around it
// within the field being scanned (0 for the field's own value). A container
// opened at depth bound.MaxDepth is walked to its end without recursion by
// skipFlat, and skip returns that end with errTooDeep, so a caller can
// report the limit and still read the rest of the frame (to recover a call
// id). Recursion is therefore at most bound.MaxDepth deep whatever the input.
func skip(b []byte, i, depth int) (int, error) {
	h, err := readHead(b, i)
	if err != nil {
		return 0, err
	}
	if h.k != kArray && h.k != kMap {
		return h.end(), nil
	}
	if depth >= bound.MaxDepth {
		end, err := skipFlat(b, i)
		if err != nil {
			return 0, err
		}
		return end, errTooDeep
	}
	n := h.v
	if h.k == kMap {
		n *= 2
	}
	// Every element takes at least one byte, so a count larger than what
	// is left is a lie; refusing it here bounds the loop by the frame size.
	if n > uint64(len(b)-h.off) {
		return 0, errShort
	}
	j, deep := h.off, false
	for ; n > 0; n-- {
		j, err = skip(b, j, depth+1)
		if err == errTooDeep {
			deep = true
		} else if err != nil {
			return 0, err
		}
	}
	if deep {
		return j, errTooDeep
	}
	return j, nil
}

// skipFlat returns the offset just past the value at b[i] without tracking
// depth: it keeps one count of values still to be read, so arbitrarily deep
// nesting costs no stack. Each step consumes at least one byte, so it ends
// within len(b) steps.
func skipFlat(b []byte, i int) (int, error) {
	for pending := uint64(1); pending > 0; pending-- {
		h, err := readHead(b, i)
		if err != nil {
			return 0, err
		}
		switch h.k {
		case kArray:
			pending += h.v
		case kMap:
			pending += 2 * h.v
		}
		i = h.end()
		if pending-1 > uint64(len(b)-i) {
			return 0, errShort
		}
	}
	return i, nil
}

// checkValue reports whether raw is exactly one well-formed value no deeper
// than bound.MaxDepth, and returns its header.
func checkValue(raw []byte) (head, error) {
	h, err := readHead(raw, 0)
	if err != nil {
		return h, err
	}
	end, err := skip(raw, 0, 0)
	if err != nil {
		return h, err
	}
	if end != len(raw) {
		return h, errTrailing
	}
	return h, nil
}

var errTrailing = errors.New("bytes after the value")

// Writers. Each appends one value in the shortest form MessagePack allows,
// which is what makes the encoder's output deterministic (the worked
// example in docs/capwire.md depends on it).

func appendStr(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= 31:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xda, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, s...)
}

func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(dst, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(dst, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(dst, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(dst, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 0xc3)
	}
	return append(dst, 0xc2)
}

func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xde, byte(n>>8), byte(n))
	}
	return append(dst, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendArrayHeader(dst []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xdc, byte(n>>8), byte(n))
	}
	return append(dst, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
