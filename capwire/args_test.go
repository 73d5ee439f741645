package capwire

import (
	"math"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/bound"
)

// encoderArgs is args as the msgpack Encoder writes them, configured as
// appendArgs configures it: the reference appendAny must agree with.
func encoderArgs(t *testing.T, args any) []byte {
	t.Helper()
	var w appendWriter
	enc := msgpack.NewEncoder(&w)
	enc.UseCompactInts(true)
	if err := enc.Encode(args); err != nil {
		t.Fatal(err)
	}
	return w.b
}

// deepMap is a map[string]any nested n maps deep.
func deepMap(n int) map[string]any {
	m := map[string]any{}
	for range n - 1 {
		m = map[string]any{"k": m}
	}
	return m
}

// A map[string]any of plain values is written without reflection, and
// reads back as what the Encoder writes for it; anything else in it
// leaves the whole of args to the Encoder.
func TestAppendAnyAgreesWithEncoder(t *testing.T) {
	var nilBytes []byte
	var nilAny []any
	var nilStrings []string
	var nilMap map[string]any
	for _, tc := range []struct {
		name string
		args map[string]any
		fast bool // written by appendAny, not the Encoder
	}{
		{"empty", map[string]any{}, true},
		{"scalars", map[string]any{"n": nil, "t": true, "f": false, "s": "x", "long": string(make([]byte, 300))}, true},
		{"ints", map[string]any{"a": 0, "b": -1, "c": -33, "d": 127, "e": 128, "f": math.MinInt64, "g": math.MaxInt64,
			"h": int8(-128), "i": int16(-300), "j": int32(math.MinInt32), "k": int64(1 << 40)}, true},
		{"uints", map[string]any{"a": uint(0), "b": uint8(255), "c": uint16(65535), "d": uint32(1 << 31), "e": uint64(math.MaxUint64)}, true},
		{"floats", map[string]any{"a": 1.5, "b": float32(-2.25), "c": math.Inf(1), "d": 0.0}, true},
		{"bytes", map[string]any{"b": []byte{0, 1, 2}, "empty": []byte{}, "nil": nilBytes}, true},
		{"nil containers", map[string]any{"a": nilAny, "s": nilStrings, "m": nilMap}, true},
		{"nested", map[string]any{"a": []any{1, "x", []any{true, map[string]any{"k": []string{"p", "q"}}}}, "raw": msgpack.RawMessage{0x91, 0x01}}, true},
		{"deepest written", deepMap(bound.MaxDepth), true},
		{"too deep for it", deepMap(bound.MaxDepth + 1), false},
		{"a struct inside", map[string]any{"s": struct{ A int }{1}}, false},
		{"a typed map inside", map[string]any{"m": map[string]string{"a": "b"}}, false},
		{"a typed slice inside", map[string]any{"l": []int{1, 2}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := appendAny([]byte{0xee}, tc.args, 0)
			if ok != tc.fast {
				t.Fatalf("appendAny wrote it: %v, want %v", ok, tc.fast)
			}
			if !ok {
				if !reflect.DeepEqual(got, []byte{0xee}) {
					t.Fatalf("appendAny refused but left %x, want dst as it was", got)
				}
				return
			}
			var fast, want any
			if err := msgpack.Unmarshal(got[1:], &fast); err != nil {
				t.Fatal(err)
			}
			if err := msgpack.Unmarshal(encoderArgs(t, tc.args), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Errorf("appendAny wrote what reads back as\n%#v\nthe Encoder's reads back as\n%#v", fast, want)
			}
		})
	}
}

// appendArgs writes every kind of args it accepts the same way through
// both paths, refuses the same ones, and writes a map of plain values
// without allocating.
func TestAppendArgsPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		args any
		err  bool
	}{
		{"plain map", map[string]any{"text": "x", "n": 3}, false},
		{"map with a struct", map[string]any{"s": struct{ A int }{1}}, false},
		{"too deep", deepMap(bound.MaxDepth + 1), true},
		{"nil map", map[string]any(nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := appendArgs([]byte{0xee}, tc.args)
			if tc.err {
				if err == nil || !reflect.DeepEqual(out, []byte{0xee}) {
					t.Fatalf("got %x, %v; want an error and dst as it was", out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := msgpack.Unmarshal(out[1:], &got); err != nil || got == nil {
				t.Fatalf("args read back as %#v, %v; want a map", got, err)
			}
		})
	}
	args := map[string]any{"text": "0123456789", "n": 3, "tags": []any{"a", "b"}}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := appendArgs(buf, args); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("appendArgs of a plain map: %v allocations, want 0", allocs)
	}
}
