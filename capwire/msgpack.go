package capwire

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/msgpk"
)

// This file holds capwire's MessagePack writers and its words for the
// reader's faults. Envelopes are read with internal/msgpk and decoded by
// hand on top of it (no reflection), so that the bridge's hot path, one
// call in and one result out per tool call, costs a single pass and
// carries args/structured as sub-slices of the frame without re-encoding
// them. Nesting is bounded by bound.MaxDepth inside any one envelope
// field, counted from the field's value (a map given as args is depth 1).

// Structural faults, in capwire's words: they reach the peer inside
// bad_frame and bad_request messages. errShort and errInvalid mean the
// bytes are not MessagePack, so nothing after them can be trusted.
var (
	errShort   = errors.New("value runs past the end of the frame")
	errInvalid = errors.New("byte 0xc1 is never used in MessagePack")
	// errTooDeep is not structural: the value is well formed (the scanner
	// walked it to its end) but nests deeper than bound.MaxDepth.
	errTooDeep  = errors.New("nesting deeper than " + strconv.Itoa(bound.MaxDepth))
	errTrailing = errors.New("bytes after the value")
)

// cause translates a fault of internal/msgpk into capwire's words; any
// other error is returned as is.
func cause(err error) error {
	switch err {
	case msgpk.ErrShort:
		return errShort
	case msgpk.ErrInvalid:
		return errInvalid
	case msgpk.ErrTooDeep:
		return errTooDeep
	case msgpk.ErrTrailing:
		return errTrailing
	}
	return err
}

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

func appendBin(dst []byte, b []byte) []byte {
	n := len(b)
	switch {
	case n <= math.MaxUint8:
		dst = append(dst, 0xc4, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xc5, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
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

// appendAny appends v when it is built of the types a program's
// arguments are made of — nil, bools, numbers, strings, []byte, []any,
// []string, map[string]any and msgpack.RawMessage, nested to at most
// bound.MaxDepth containers — reporting false, with dst as it was, for
// anything else, which is then the msgpack Encoder's (reflection) to
// encode. The values it writes decode as the Encoder's do: integers in
// their compact forms (UseCompactInts), floats at their width, and a nil
// slice or map as nil.
func appendAny(dst []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, 0xc0), true
	case bool:
		return appendBool(dst, v), true
	case string:
		return appendStr(dst, v), true
	case int:
		return appendInt(dst, int64(v)), true
	case int64:
		return appendInt(dst, v), true
	case int32:
		return appendInt(dst, int64(v)), true
	case int16:
		return appendInt(dst, int64(v)), true
	case int8:
		return appendInt(dst, int64(v)), true
	case uint:
		return appendUint(dst, uint64(v)), true
	case uint64:
		return appendUint(dst, v), true
	case uint32:
		return appendUint(dst, uint64(v)), true
	case uint16:
		return appendUint(dst, uint64(v)), true
	case uint8:
		return appendUint(dst, uint64(v)), true
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(v)), true
	case float32:
		return binary.BigEndian.AppendUint32(append(dst, 0xca), math.Float32bits(v)), true
	case []byte:
		if v == nil {
			return append(dst, 0xc0), true
		}
		return appendBin(dst, v), true
	case msgpack.RawMessage:
		return append(dst, v...), true // checked with the whole of args
	case []string:
		if v == nil {
			return append(dst, 0xc0), true
		}
		if depth >= bound.MaxDepth {
			return dst, false
		}
		dst = appendArrayHeader(dst, len(v))
		for _, s := range v {
			dst = appendStr(dst, s)
		}
		return dst, true
	case []any:
		if v == nil {
			return append(dst, 0xc0), true
		}
		if depth >= bound.MaxDepth {
			return dst, false
		}
		start := len(dst)
		dst = appendArrayHeader(dst, len(v))
		for _, e := range v {
			var ok bool
			if dst, ok = appendAny(dst, e, depth+1); !ok {
				return dst[:start], false
			}
		}
		return dst, true
	case map[string]any:
		if v == nil {
			return append(dst, 0xc0), true
		}
		if depth >= bound.MaxDepth {
			return dst, false
		}
		start := len(dst)
		dst = appendMapHeader(dst, len(v))
		for k, e := range v {
			dst = appendStr(dst, k)
			var ok bool
			if dst, ok = appendAny(dst, e, depth+1); !ok {
				return dst[:start], false
			}
		}
		return dst, true
	}
	return dst, false
}
