package msgpk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/bound"
)

func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var headCases = []struct {
	name string
	in   string
	want Head
	err  error
}{
	{"positive fixint", "7f", Head{Uint, 127, 1}, nil},
	{"negative fixint", "e0", Head{NegInt, uint64(math.MaxUint64 - 31), 1}, nil},
	{"fixmap", "82", Head{Map, 2, 1}, nil},
	{"fixarray", "9f", Head{Array, 15, 1}, nil},
	{"fixstr", "a3 616263", Head{Str, 3, 1}, nil},
	{"nil", "c0", Head{Nil, 0, 1}, nil},
	{"false", "c2", Head{False, 0, 1}, nil},
	{"true", "c3", Head{True, 0, 1}, nil},
	{"bin8", "c4 02 0102", Head{Bin, 2, 2}, nil},
	{"bin16", "c5 0001 ff", Head{Bin, 1, 3}, nil},
	{"bin32", "c6 00000000", Head{Bin, 0, 5}, nil},
	{"ext8", "c7 01 05 ff", Head{Ext, 2, 2}, nil},
	{"ext16", "c8 0000 05", Head{Ext, 1, 3}, nil},
	{"ext32", "c9 00000001 05 ff", Head{Ext, 2, 5}, nil},
	{"float32", "ca 3fc00000", Head{Float32, 0x3fc00000, 5}, nil},
	{"float64", "cb 3ff8000000000000", Head{Float64, 0x3ff8000000000000, 9}, nil},
	{"uint8", "cc ff", Head{Uint, 255, 2}, nil},
	{"uint16", "cd 0100", Head{Uint, 256, 3}, nil},
	{"uint32", "ce 00010000", Head{Uint, 65536, 5}, nil},
	{"uint64", "cf ffffffffffffffff", Head{Uint, math.MaxUint64, 9}, nil},
	{"int8 positive folds into uint", "d0 05", Head{Uint, 5, 2}, nil},
	{"int8 negative", "d0 80", Head{NegInt, uint64(1<<64 - 128), 2}, nil},
	{"int16 negative", "d1 8000", Head{NegInt, uint64(1<<64 - 32768), 3}, nil},
	{"int32 positive", "d2 7fffffff", Head{Uint, math.MaxInt32, 5}, nil},
	{"int64 min", "d3 8000000000000000", Head{NegInt, 1 << 63, 9}, nil},
	{"fixext1", "d4 01 ff", Head{Ext, 2, 1}, nil},
	{"fixext16", "d8 01" + strings.Repeat("00", 16), Head{Ext, 17, 1}, nil},
	{"str8", "d9 01 61", Head{Str, 1, 2}, nil},
	{"str16", "da 0000", Head{Str, 0, 3}, nil},
	{"str32", "db 00000001 61", Head{Str, 1, 5}, nil},
	{"array16", "dc ffff", Head{Array, 65535, 3}, nil}, // counts are Skip's to check
	{"array32", "dd ffffffff", Head{Array, math.MaxUint32, 5}, nil},
	{"map16", "de 0001", Head{Map, 1, 3}, nil},
	{"map32", "df 00000000", Head{Map, 0, 5}, nil},

	{"empty", "", Head{}, ErrShort},
	{"0xc1", "c1", Head{}, ErrInvalid},
	{"fixstr payload short", "a3 6162", Head{Kind: Str}, ErrShort},
	{"str8 length short", "d9", Head{Kind: Str}, ErrShort},
	{"str32 payload short", "db 00000002 61", Head{Kind: Str}, ErrShort},
	{"str32 length past any input", "db ffffffff", Head{Kind: Str}, ErrShort},
	{"bin8 payload short", "c4 02 01", Head{Kind: Bin}, ErrShort},
	{"ext8 type byte missing", "c7 00", Head{Kind: Ext}, ErrShort},
	{"fixext4 short", "d6 01 000000", Head{Kind: Ext}, ErrShort},
	{"float64 short", "cb 3ff8", Head{Kind: Float64}, ErrShort},
	{"uint16 short", "cd 01", Head{Kind: Uint}, ErrShort},
	{"int32 short", "d2 ff", Head{Kind: NegInt}, ErrShort},
	{"map32 count short", "df 0000", Head{Kind: Map}, ErrShort},
}

func TestReadHead(t *testing.T) {
	for _, tc := range headCases {
		t.Run(tc.name, func(t *testing.T) {
			in := hx(t, tc.in)
			h, err := ReadHead(in, 0)
			if err != tc.err || h != tc.want {
				t.Fatalf("ReadHead(% x) = %+v, %v; want %+v, %v", in, h, err, tc.want, tc.err)
			}
			// The same header further into a buffer.
			h2, err2 := ReadHead(append([]byte{0xc0}, in...), 1)
			if tc.err == nil {
				tc.want.Off++
			}
			if err2 != tc.err || h2 != tc.want {
				t.Fatalf("at offset 1: %+v, %v; want %+v, %v", h2, err2, tc.want, tc.err)
			}
		})
	}
	if _, err := ReadHead([]byte{0x01}, -1); err != ErrShort {
		t.Errorf("negative offset: %v", err)
	}
}

// ReadFix decodes exactly the one-byte headers but fixext, as ReadHead does, and
// declines everything else.
func TestReadFixAgrees(t *testing.T) {
	for c := range 256 {
		for _, tail := range [][]byte{nil, bytes.Repeat([]byte{0}, 40)} {
			in := append([]byte{byte(c)}, tail...)
			full, err := ReadHead(in, 0)
			fix, ok := ReadFix(in, 0)
			oneByte := err == nil && full.Off == 1 && full.Kind != Ext // fixext is rare
			if ok != oneByte || ok && fix != full {
				t.Errorf("% x: ReadFix %+v %v, ReadHead %+v %v", in[:1], fix, ok, full, err)
			}
		}
	}
	if _, ok := ReadFix(nil, 0); ok {
		t.Error("ReadFix of nothing succeeded")
	}
}

// nested is n arrays inside each other around a nil.
func nested(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }

func TestSkip(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		depth int
		end   int
		err   error
	}{
		{"scalar", []byte{0x05, 0xff}, 0, 1, nil},
		{"map of str", hx(t, "82 a161 01 a162 92 c2 c3"), 0, 9, nil},
		{"bounded depth", nested(bound.MaxDepth), 0, bound.MaxDepth + 1, nil},
		{"one too deep", nested(bound.MaxDepth + 1), 0, bound.MaxDepth + 2, ErrTooDeep},
		{"depth counted from the caller's", nested(2), bound.MaxDepth - 1, 3, ErrTooDeep},
		{"far too deep costs no stack", nested(1 << 20), 0, 1<<20 + 1, ErrTooDeep},
		{"too deep and then broken", append(bytes.Repeat([]byte{0x91}, bound.MaxDepth+1), 0xc1), 0, 0, ErrInvalid},
		{"count larger than the input", hx(t, "dd ffffffff c0"), 0, 0, ErrShort},
		{"map count counts pairs", hx(t, "82 01 02 03"), 0, 0, ErrShort},
		{"flat count larger than the input", append(bytes.Repeat([]byte{0x91}, bound.MaxDepth), 0xdd, 0xff, 0xff, 0xff, 0xff), 0, 0, ErrShort},
		{"truncated element", hx(t, "92 01 cd 01"), 0, 0, ErrShort},
		{"invalid element", hx(t, "91 c1"), 0, 0, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			end, err := Skip(tc.in, 0, tc.depth)
			if end != tc.end || err != tc.err {
				t.Fatalf("Skip = %d, %v; want %d, %v", end, err, tc.end, tc.err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	if h, err := Check(hx(t, "81 a161 01")); err != nil || h.Kind != Map {
		t.Errorf("a map: %+v, %v", h, err)
	}
	if _, err := Check(hx(t, "01 02")); err != ErrTrailing {
		t.Errorf("two values: %v", err)
	}
	if _, err := Check(nested(bound.MaxDepth + 1)); err != ErrTooDeep {
		t.Errorf("too deep: %v", err)
	}
	if _, err := Check(nil); err != ErrShort {
		t.Errorf("nothing: %v", err)
	}
}

// FuzzSkip checks Skip against github.com/vmihailenco/msgpack/v5, an
// independent reader: where one finds a well-formed value the other finds
// the same one, ending at the same byte, and ReadFix never disagrees with
// ReadHead.
func FuzzSkip(f *testing.F) {
	for _, tc := range headCases {
		f.Add(hx(f, tc.in))
	}
	for _, v := range []any{
		map[string]any{"a": []any{1, -1, 1.5, float32(2.5), "x", nil, true, []byte{1}}, "b": map[string]any{}},
		strings.Repeat("s", 300), int64(math.MinInt64), uint64(math.MaxUint64), []any{[]any{[]any{}}},
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(nested(bound.MaxDepth + 3))
	f.Add([]byte{0xd4, 0x01, 0x02, 0x92, 0xc7, 0x00, 0x05, 0xc0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if fix, ok := ReadFix(in, 0); ok {
			if full, err := ReadHead(in, 0); err != nil || full != fix {
				t.Fatalf("ReadFix %+v, ReadHead %+v %v", fix, full, err)
			}
		}
		end, err := Skip(in, 0, 0)
		if end < 0 || end > len(in) {
			t.Fatalf("Skip ended at %d of %d", end, len(in))
		}
		r := bytes.NewReader(in)
		theirs := msgpack.NewDecoder(r).Skip()
		theirEnd := len(in) - r.Len()
		switch {
		case err == nil || errors.Is(err, ErrTooDeep):
			if theirs != nil || theirEnd != end {
				t.Fatalf("% x: Skip ends at %d (%v); msgpack at %d (%v)", in, end, err, theirEnd, theirs)
			}
		case theirs == nil:
			t.Fatalf("% x: Skip refuses (%v); msgpack skips %d bytes", in, err, theirEnd)
		}
	})
}
