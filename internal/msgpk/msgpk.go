// Package msgpk is capbridge's one MessagePack reader: it decodes the
// header of a value at an offset of a byte slice, and skips whole values
// with a bound on nesting, checking every length against the bytes that
// are there before anyone allocates for it. capwire scans envelopes with
// it and interchange converts MessagePack to JSON with it.
package msgpk

import (
	"encoding/binary"
	"errors"

	"github.com/capbridge/capbridge/internal/bound"
)

// Kind is the MessagePack family of a value (the MessagePack spec,
// "Formats"), with the signed-int formats that hold a non-negative value
// folded into Uint: some encoders, a JavaScript one for example, write
// small positive numbers as int8.
type Kind uint8

// The kinds. The zero Kind is no value: the header could not be read, or
// its type byte is 0xc1, which MessagePack never uses.
const (
	Nil Kind = iota + 1
	False
	True
	Uint
	NegInt
	Float32
	Float64
	Str
	Bin
	Ext
	Array
	Map
)

// Head is the decoded header of one value.
type Head struct {
	Kind Kind
	// V is the unsigned value (Uint), the two's-complement bits (NegInt),
	// the IEEE 754 bits (Float32 in the low 32 bits, Float64), the payload
	// length in bytes (Str, Bin; Ext counts its type byte too) or the
	// element count (Array; Map counts pairs).
	V uint64
	// Off is where the payload or the first element starts; for the other
	// kinds it is where the next value starts.
	Off int
}

// End is the offset just past a value whose header is h, for every kind
// but Array and Map, whose elements follow (Skip walks them).
func (h Head) End() int {
	switch h.Kind {
	case Str, Bin, Ext:
		return h.Off + int(h.V)
	}
	return h.Off
}

// Faults. ErrShort and ErrInvalid mean the bytes are not MessagePack;
// ErrTooDeep means they are, but nest deeper than bound.MaxDepth.
var (
	ErrShort    = errors.New("msgpk: value runs past the end of the input")
	ErrInvalid  = errors.New("msgpk: byte 0xc1 is never used in MessagePack")
	ErrTooDeep  = errors.New("msgpk: nesting deeper than bound.MaxDepth")
	ErrTrailing = errors.New("msgpk: bytes after the value")
)

// ReadFix decodes the header at b[i] when it is one of the one-byte
// headers that make up most of any document (fixint, fixstr, fixmap,
// fixarray, nil, booleans) and, for a fixstr, its payload fits; otherwise
// it reports false and the caller uses ReadHead. It is small enough for the
// compiler to inline, which is the point: a hot loop pays a call only for
// the rarer, longer headers.
func ReadFix(b []byte, i int) (Head, bool) {
	if uint(i) >= uint(len(b)) {
		return Head{}, false
	}
	c := b[i]
	f := fixes[c]
	if f.kind == 0 || f.kind == Str && int(f.v) >= len(b)-i {
		return Head{}, false
	}
	return Head{Kind: f.kind, V: f.v, Off: i + 1}, true
}

// fixes holds, for every type byte, the header it is alone (Kind 0 when
// more bytes follow).
var fixes = func() (t [256]struct {
	kind Kind
	v    uint64
}) {
	for c := range 256 {
		e := &t[c]
		switch {
		case c <= 0x7f:
			e.kind, e.v = Uint, uint64(c)
		case c >= 0xe0:
			e.kind, e.v = NegInt, uint64(int64(int8(c)))
		case c <= 0x8f:
			e.kind, e.v = Map, uint64(c&0x0f)
		case c <= 0x9f:
			e.kind, e.v = Array, uint64(c&0x0f)
		case c <= 0xbf:
			e.kind, e.v = Str, uint64(c&0x1f)
		case c == 0xc0:
			e.kind = Nil
		case c == 0xc2:
			e.kind = False
		case c == 0xc3:
			e.kind = True
		}
	}
	return t
}()

// ReadHead decodes the header at b[i]. It never reads past len(b). It
// returns ErrShort when the header, or a Str, Bin or Ext payload, does not
// fit in b (Array and Map counts are not checked against b: Skip does
// that), and ErrInvalid for 0xc1. With ErrShort, Kind is still set when
// the type byte was there, so a caller can refuse a kind before it
// complains about length.
func ReadHead(b []byte, i int) (Head, error) {
	if i < 0 || i >= len(b) {
		return Head{}, ErrShort
	}
	c := b[i]
	switch {
	case c <= 0x7f:
		return Head{Kind: Uint, V: uint64(c), Off: i + 1}, nil
	case c >= 0xe0:
		return Head{Kind: NegInt, V: uint64(int64(int8(c))), Off: i + 1}, nil
	case c <= 0x8f:
		return Head{Kind: Map, V: uint64(c & 0x0f), Off: i + 1}, nil
	case c <= 0x9f:
		return Head{Kind: Array, V: uint64(c & 0x0f), Off: i + 1}, nil
	case c <= 0xbf:
		return payload(b, Str, uint64(c&0x1f), i+1)
	}
	switch c {
	case 0xc0:
		return Head{Kind: Nil, Off: i + 1}, nil
	case 0xc2:
		return Head{Kind: False, Off: i + 1}, nil
	case 0xc3:
		return Head{Kind: True, Off: i + 1}, nil
	case 0xc4, 0xc5, 0xc6: // bin8/16/32
		w := 1 << (c - 0xc4)
		return lenPayload(b, Bin, i, w, 0)
	case 0xd9, 0xda, 0xdb: // str8/16/32
		w := 1 << (c - 0xd9)
		return lenPayload(b, Str, i, w, 0)
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, type byte, data
		// The payload starts at the type byte; it counts as one more byte.
		w := 1 << (c - 0xc7)
		return lenPayload(b, Ext, i, w, 1)
	case 0xca:
		return fixed(b, Float32, i, 4, false)
	case 0xcb:
		return fixed(b, Float64, i, 8, false)
	case 0xcc, 0xcd, 0xce, 0xcf:
		return fixed(b, Uint, i, 1<<(c-0xcc), false)
	case 0xd0, 0xd1, 0xd2, 0xd3:
		return fixed(b, NegInt, i, 1<<(c-0xd0), true)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16: type byte + data
		return payload(b, Ext, 1+uint64(1)<<(c-0xd4), i+1)
	case 0xdc, 0xdd:
		return counted(b, Array, i, 2<<(c-0xdc))
	case 0xde, 0xdf:
		return counted(b, Map, i, 2<<(c-0xde))
	}
	return Head{}, ErrInvalid // 0xc1
}

// be reads the w-byte big-endian unsigned integer after the type byte at
// b[i]; ok is false when it does not fit.
func be(b []byte, i, w int) (v uint64, ok bool) {
	if w > len(b)-i-1 {
		return 0, false
	}
	p := b[i+1:]
	switch w {
	case 1:
		return uint64(p[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), true
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), true
	}
	return binary.BigEndian.Uint64(p), true
}

// fixed decodes a scalar whose w-byte value follows the type byte at b[i].
// A signed value is sign-extended and folded into Uint when not negative.
func fixed(b []byte, k Kind, i, w int, signed bool) (Head, error) {
	v, ok := be(b, i, w)
	if !ok {
		return Head{Kind: k}, ErrShort
	}
	if signed {
		shift := 64 - 8*w
		if s := int64(v<<shift) >> shift; s >= 0 {
			k, v = Uint, uint64(s)
		} else {
			v = uint64(s)
		}
	}
	return Head{Kind: k, V: v, Off: i + 1 + w}, nil
}

// lenPayload decodes a header whose w-byte length follows the type byte at
// b[i]; the payload is extra bytes longer than that length says.
func lenPayload(b []byte, k Kind, i, w int, extra uint64) (Head, error) {
	n, ok := be(b, i, w)
	if !ok {
		return Head{Kind: k}, ErrShort
	}
	return payload(b, k, n+extra, i+1+w)
}

// payload checks that an n-byte payload starting at off fits in b.
func payload(b []byte, k Kind, n uint64, off int) (Head, error) {
	if off > len(b) || n > uint64(len(b)-off) {
		return Head{Kind: k}, ErrShort
	}
	return Head{Kind: k, V: n, Off: off}, nil
}

// counted decodes an array or map header whose w-byte count follows the
// type byte at b[i].
func counted(b []byte, k Kind, i, w int) (Head, error) {
	n, ok := be(b, i, w)
	if !ok {
		return Head{Kind: k}, ErrShort
	}
	return Head{Kind: k, V: n, Off: i + 1 + w}, nil
}

// Skip returns the offset just past the value at b[i], checking that it is
// well formed. depth is the number of containers already open around it
// (0 for a value of its own). A container opened at depth bound.MaxDepth
// is walked to its end without recursion, and Skip returns that end with
// ErrTooDeep, so a caller can report the limit and still read on (capwire
// does, to recover a call's id). Recursion is therefore at most
// bound.MaxDepth deep whatever the input, and every count is checked
// against the bytes left before it is looped over, so the work is bounded
// by len(b).
func Skip(b []byte, i, depth int) (int, error) {
	h, ok := ReadFix(b, i)
	if !ok {
		var err error
		if h, err = ReadHead(b, i); err != nil {
			return 0, err
		}
	}
	if h.Kind != Array && h.Kind != Map {
		return h.End(), nil
	}
	if depth >= bound.MaxDepth {
		end, err := skipFlat(b, i)
		if err != nil {
			return 0, err
		}
		return end, ErrTooDeep
	}
	n := h.V
	if h.Kind == Map {
		n *= 2
	}
	// Every element takes at least one byte, so a count larger than what
	// is left is a lie; refusing it here bounds the loop by len(b).
	if n > uint64(len(b)-h.Off) {
		return 0, ErrShort
	}
	j, deep := h.Off, false
	for ; n > 0; n-- {
		var err error
		j, err = Skip(b, j, depth+1)
		if err == ErrTooDeep {
			deep = true
		} else if err != nil {
			return 0, err
		}
	}
	if deep {
		return j, ErrTooDeep
	}
	return j, nil
}

// skipFlat returns the offset just past the value at b[i] without tracking
// depth: it keeps one count of values still to be read, so arbitrarily deep
// nesting costs no stack. Each step consumes at least one byte, so it ends
// within len(b) steps.
func skipFlat(b []byte, i int) (int, error) {
	for pending := uint64(1); pending > 0; pending-- {
		h, err := ReadHead(b, i)
		if err != nil {
			return 0, err
		}
		switch h.Kind {
		case Array:
			pending += h.V
		case Map:
			pending += 2 * h.V
		}
		i = h.End()
		if pending-1 > uint64(len(b)-i) {
			return 0, ErrShort
		}
	}
	return i, nil
}

// Check reports whether raw is exactly one well-formed value no deeper
// than bound.MaxDepth, and returns its header.
func Check(raw []byte) (Head, error) {
	h, err := ReadHead(raw, 0)
	if err != nil {
		return h, err
	}
	end, err := Skip(raw, 0, 0)
	if err != nil {
		return h, err
	}
	if end != len(raw) {
		return h, ErrTrailing
	}
	return h, nil
}
