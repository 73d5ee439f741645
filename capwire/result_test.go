package capwire

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func structured(t *testing.T, v any) *Result {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &Result{Structured: b}
}

// TestDecodeNames: json tags, msgpack tags and plain field names are all
// honoured, an exact name beats a case-insensitive one, and embedded
// structs are flattened, as encoding/json does.
func TestDecodeNames(t *testing.T) {
	type Inner struct {
		Deep string `json:"deep"`
	}
	type target struct {
		Inner
		JSON     string `json:"json_name,omitempty"`
		Pack     int    `msgpack:"pack_name"`
		Both     string `msgpack:"wire" json:"ignored"`
		Plain    bool
		Folded   float64
		Exact    string `json:"exact"`
		ExactToo string `json:"EXACT"`
		Skipped  string `json:"-"`
		Ptr      *int64 `json:"ptr"`
		List     []string
		Map      map[string]int `json:"map"`
		Any      any            `json:"any"`
	}
	r := structured(t, map[string]any{
		"json_name": "j", "pack_name": 7, "wire": "w", "Plain": true, "folded": 2.5,
		"exact": "e", "EXACT": "E", "Skipped": "no", "-": "no", "ptr": 9, "list": []string{"a"},
		"map": map[string]any{"k": 1}, "any": map[string]any{"x": "y"}, "deep": "d", "unknown": 1,
	})
	var got target
	if err := r.Decode(&got); err != nil {
		t.Fatal(err)
	}
	nine := int64(9)
	want := target{Inner: Inner{Deep: "d"}, JSON: "j", Pack: 7, Both: "w", Plain: true, Folded: 2.5, Exact: "e", ExactToo: "E",
		Ptr: &nine, List: []string{"a"}, Map: map[string]int{"k": 1}, Any: map[string]any{"x": "y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// TestDecodeMismatch: every value that does not fit is an error naming
// its place, never a silent zero or a wrapped number.
func TestDecodeMismatch(t *testing.T) {
	type S struct {
		N  int8     `json:"n"`
		U  uint64   `json:"u"`
		I  int64    `json:"i"`
		F  float32  `json:"f"`
		S  string   `json:"s"`
		L  []int    `json:"l"`
		M  struct{} `json:"m"`
		B  bool     `json:"b"`
		BM map[string]bool
	}
	for _, tc := range []struct {
		name string
		in   any
		path string
	}{
		{"int8 overflow", map[string]any{"n": 300}, "/n"},
		{"negative unsigned", map[string]any{"u": -1}, "/u"},
		{"uint64 into int64", map[string]any{"i": uint64(math.MaxUint64)}, "/i"},
		{"fraction into int", map[string]any{"i": 1.5}, "/i"},
		{"float32 overflow", map[string]any{"f": 1e300}, "/f"},
		{"number into string", map[string]any{"s": 1}, "/s"},
		{"string into list", map[string]any{"l": "x"}, "/l"},
		{"list element", map[string]any{"l": []any{1, "x"}}, "/l/1"},
		{"array into struct", map[string]any{"m": []any{}}, "/m"},
		{"string into bool", map[string]any{"b": "true"}, "/b"},
		{"map value", map[string]any{"BM": map[string]any{"a/b": 1}}, "/BM/a~1b"},
		{"not a map", []any{1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s S
			err := structured(t, tc.in).Decode(&s)
			var de *DecodeError
			if !errors.As(err, &de) || de.Path != tc.path {
				t.Fatalf("err = %v, want a *DecodeError at %q", err, tc.path)
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	var f float64
	if err := structured(t, uint64(math.MaxUint64)).Decode(&f); err != nil || f != math.MaxUint64 {
		t.Errorf("uint64 into float64: %v %v", f, err)
	}
	var u uint64
	if err := structured(t, uint64(math.MaxUint64)).Decode(&u); err != nil || u != math.MaxUint64 {
		t.Errorf("uint64: %v %v", u, err)
	}
	var i int
	if err := structured(t, 3.0).Decode(&i); err != nil || i != 3 {
		t.Errorf("integral float into int: %v %v", i, err)
	}
	p := new(string)
	*p = "kept"
	if err := structured(t, nil).Decode(&p); err != nil || p != nil {
		t.Errorf("nil into a pointer: %v %v", p, err)
	}
	s := "kept"
	if err := structured(t, nil).Decode(&s); err != nil || s != "kept" {
		t.Errorf("nil into a string: %q %v", s, err)
	}
	var b []byte
	if err := structured(t, []byte{1, 2}).Decode(&b); err != nil || !reflect.DeepEqual(b, []byte{1, 2}) {
		t.Errorf("binary: %v %v", b, err)
	}
	var arr [2]int
	if err := structured(t, []any{1, 2, 3}).Decode(&arr); err != nil || arr != [2]int{1, 2} {
		t.Errorf("array: %v %v", arr, err)
	}
	if err := structured(t, 1).Decode(s); err == nil {
		t.Error("a non-pointer target was accepted")
	}
	if err := (&Result{Structured: []byte{0xc1}}).Decode(&i); err == nil || errors.As(err, new(*DecodeError)) {
		t.Errorf("invalid msgpack: %v", err)
	}
}

// BenchmarkResultDecode measures Decode of a typical structured result
// into a tagged struct against a baseline in the same run: msgpack's own
// Unmarshal into the same struct, which is what Decode did before it
// matched json tags and checked every value.
func BenchmarkResultDecode(b *testing.B) {
	type item struct {
		Name  string   `json:"name"`
		Count int64    `json:"count"`
		Tags  []string `json:"tags"`
	}
	type out struct {
		Items []item `json:"items" msgpack:"items"`
		Total int64  `json:"total" msgpack:"total"`
	}
	var items []any
	for i := range 50 {
		items = append(items, map[string]any{"name": fmt.Sprint("item", i), "count": i, "tags": []string{"a", "b"}})
	}
	raw, err := msgpack.Marshal(map[string]any{"items": items, "total": 50})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline-msgpack-unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var v out
			if err := msgpack.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		r := &Result{Structured: raw}
		for b.Loop() {
			var v out
			if err := r.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
