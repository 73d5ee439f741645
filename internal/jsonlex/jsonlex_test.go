package jsonlex

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
)

const strict = CheckUTF8 | RefuseLoneSurrogate

var validTests = []struct {
	name string
	in   string
	fl   Flags
	kind FaultKind // 0 = valid
	off  int
	ws   bool
}{
	{name: "object", in: `{"a":[1,-2.5e3,true,false,null,"x"]}`},
	{name: "spaces around", in: " \t\r\n{} \n"},
	{name: "inner space", in: `{ "a" : [ 1 ] }`, ws: true},
	{name: "empty", in: ``, kind: FaultTruncated, off: 0},
	{name: "only space", in: `   `, kind: FaultTruncated, off: 3},
	{name: "trailing", in: `{} x`, kind: FaultTrailing, off: 3},
	{name: "two values", in: `1 2`, kind: FaultTrailing, off: 2},
	{name: "bad start", in: `x`, kind: FaultSyntax, off: 0},
	{name: "open object", in: `{"a":1`, kind: FaultTruncated, off: 6},
	{name: "open object no key", in: `{`, kind: FaultTruncated, off: 1},
	{name: "non-string key", in: `{1:2}`, kind: FaultSyntax, off: 1},
	{name: "missing colon", in: `{"a" 1}`, kind: FaultSyntax, off: 5},
	{name: "missing comma", in: `[1 2]`, kind: FaultSyntax, off: 3},
	{name: "trailing comma", in: `[1,]`, kind: FaultSyntax, off: 3},
	{name: "leading zero", in: `01`, kind: FaultSyntax, off: 1},
	{name: "double dot", in: `1.5.2`, kind: FaultSyntax, off: 3},
	{name: "minus inside", in: `[2-1]`, kind: FaultSyntax, off: 2},
	{name: "bare minus", in: `-`, kind: FaultTruncated, off: 1},
	{name: "minus letter", in: `-x`, kind: FaultSyntax, off: 1},
	{name: "no fraction digits", in: `1.`, kind: FaultTruncated, off: 2},
	{name: "no exponent digits", in: `1e+]`, kind: FaultSyntax, off: 3},
	{name: "bad literal", in: `tru`, kind: FaultTruncated, off: 3},
	{name: "wrong literal", in: `nul1`, kind: FaultSyntax, off: 3},
	{name: "raw control", in: "\"a\x01\"", kind: FaultSyntax, off: 2},
	{name: "open string", in: `"abc`, kind: FaultTruncated, off: 4},
	{name: "bad escape", in: `"\q"`, kind: FaultSyntax, off: 2},
	{name: "open escape", in: `"\`, kind: FaultTruncated, off: 2},
	{name: "bad hex", in: `"\u12g4"`, kind: FaultSyntax, off: 5},
	{name: "short hex", in: `"\u12`, kind: FaultTruncated, off: 5},

	// Where the two dialects differ.
	{name: "invalid utf8 passed over", in: "\"\xff\""},
	{name: "invalid utf8 refused", in: "\"a\xff\"", fl: strict, kind: FaultInvalidUTF8, off: 2},
	{name: "cut utf8 refused", in: "\"\xe2\x82", fl: strict, kind: FaultTruncated, off: 3},
	{name: "lone high accepted", in: `"\ud83d x"`},
	{name: "lone high refused", in: `"a\ud83d x"`, fl: strict, kind: FaultLoneSurrogate, off: 2},
	{name: "lone low refused", in: `"\ude00"`, fl: strict, kind: FaultLoneSurrogate, off: 1},
	{name: "high then non-low refused", in: `"\ud83d\u0041"`, fl: strict, kind: FaultLoneSurrogate, off: 1},
	{name: "high at end refused", in: `"\ud83d`, fl: strict, kind: FaultTruncated, off: 7},
	{name: "pair accepted", in: `"\ud83d\ude00"`, fl: strict},

	{name: "depth at bound", in: strings.Repeat("[", bound.MaxDepth) + strings.Repeat("]", bound.MaxDepth)},
	{name: "depth past bound", in: strings.Repeat("[", bound.MaxDepth+1) + strings.Repeat("]", bound.MaxDepth+1), kind: FaultDepth, off: bound.MaxDepth},
	{name: "object depth past bound", in: strings.Repeat(`{"a":`, bound.MaxDepth+1), kind: FaultDepth, off: 5 * bound.MaxDepth},
}

func TestValid(t *testing.T) {
	for _, tt := range validTests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, ws, f := Valid([]byte(tt.in), tt.fl)
			if tt.kind == 0 {
				if f != nil {
					t.Fatalf("fault %+v", f)
				}
				if ws != tt.ws {
					t.Errorf("ws = %v, want %v", ws, tt.ws)
				}
				return
			}
			if f == nil || f.Kind != tt.kind || f.Offset != tt.off {
				t.Fatalf("fault = %+v, want kind %d at %d", f, tt.kind, tt.off)
			}
			if f.Reason == "" {
				t.Errorf("fault without reason")
			}
		})
	}
}

func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		in    string
		float bool
		i     int64
		isInt bool
		over  bool
	}{
		{in: "0", isInt: true},
		{in: "-0", isInt: true},
		{in: "42", i: 42, isInt: true},
		{in: "-9223372036854775808", i: -1 << 63, isInt: true},
		{in: "9223372036854775807", i: 1<<63 - 1, isInt: true},
		{in: "9223372036854775808"},
		{in: "18446744073709551615"},
		{in: "18446744073709551616", over: true},
		{in: "-18446744073709551616", over: true},
		{in: "1.0", float: true},
		{in: "1e2", float: true},
		{in: "1E-2", float: true},
	} {
		n, f := ScanNumber([]byte(tt.in), 0)
		if f != nil || n.End != len(tt.in) || n.Float != tt.float || n.Overflow != tt.over {
			t.Errorf("ScanNumber(%s) = %+v, %+v", tt.in, n, f)
			continue
		}
		if i, ok := n.Int64(); ok != tt.isInt || i != tt.i {
			t.Errorf("%s.Int64() = %d, %v; want %d, %v", tt.in, i, ok, tt.i, tt.isInt)
		}
	}
	for in, want := range map[string]bool{
		"0": true, "7,": true, "123456789012345678]": true, "42 ": true,
		"1234567890123456789": false, "01": false, "1.5": false, "1e2": false, "12-": false, "-1": false, "x": false,
	} {
		end, u, ok := ShortInt([]byte(in), 0)
		n, f := ScanNumber([]byte(in), 0)
		if ok != want || ok && (f != nil || n.End != end || n.Mag != u || n.Float || n.Neg) {
			t.Errorf("ShortInt(%q) = %d, %d, %v; ScanNumber %+v %+v", in, end, u, ok, n, f)
		}
	}
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{
		`"plain"`:              "plain",
		`"a\nb\t\"\\\/"`:       "a\nb\t\"\\/",
		`"\u00e9\u20ac"`:       "é€",
		`"\ud83d\ude00"`:       "😀",
		`"\ud83d x"`:           "\uFFFD x",
		`"\ude00"`:             "\uFFFD",
		`"\u0000\b\f\r"`:       "\x00\b\f\r",
		`"\ud83d\u0041"`:       "\uFFFDA",
		`"tail\ud83d"`:         "tail\uFFFD",
		`"\ud83d\ud83d\ude00"`: "\uFFFD😀",
	} {
		var ref string
		if err := json.Unmarshal([]byte(in), &ref); err != nil {
			t.Fatal(err)
		}
		if got := Unquote([]byte(in)); got != want || got != ref {
			t.Errorf("Unquote(%s) = %q, want %q (encoding/json: %q)", in, got, want, ref)
		}
	}
	if !KeyIs([]byte(`"\u0069d"`), "id") || !KeyIs([]byte(`"id"`), "id") || KeyIs([]byte(`"ids"`), "id") || KeyIs([]byte(`"\u0069"`), "id") {
		t.Errorf("KeyIs disagrees with Unquote")
	}
}

func TestAppend(t *testing.T) {
	if got := AppendQuoted(nil, "a\"\\\n\x01\u2028é"); string(got) != `"a\"\\\n\u0001`+"\u2028é"+`"` {
		t.Errorf("AppendQuoted = %s", got)
	}
	in := "{ \"a b\" : [ 1 ,\n\t\"x\\\" y\" ] }"
	if got := AppendCompact([]byte("<"), []byte(in)); string(got) != `<{"a b":[1,"x\" y"]}` {
		t.Errorf("AppendCompact = %s", got)
	}
}

func TestEach(t *testing.T) {
	obj := []byte(`{ "a" : 1 , "b\n" : { "c" : [ ] } , "d":"}" }`)
	var got []string
	err := EachMember(obj, func(k, v []byte) error {
		got = append(got, Unquote(k)+"="+string(v))
		return nil
	})
	if want := "a=1|b\n={ \"c\" : [ ] }|d=\"}\""; err != nil || strings.Join(got, "|") != want {
		t.Errorf("EachMember = %q, %v; want %q", got, err, want)
	}
	got = got[:0]
	_ = EachElement([]byte(`[ [1, 2] ,"]", {} ]`), func(i int, v []byte) error {
		got = append(got, string(v))
		return nil
	})
	if want := `[1, 2]|"]"|{}`; strings.Join(got, "|") != want {
		t.Errorf("EachElement = %q, want %q", got, want)
	}
	if EachMember([]byte(`{}`), func(k, v []byte) error { t.Error("member in {}"); return nil }) != nil {
		t.Error("EachMember({}) failed")
	}
	if EachElement([]byte(` [ ] `)[1:], func(int, []byte) error { t.Error("element in []"); return nil }) != nil {
		t.Error("EachElement([]) failed")
	}
}

// FuzzValid: the lexer agrees with encoding/json on what is JSON (within
// the depth bound); the strict dialect accepts a subset of that, all of
// it UTF-8; and what it accepts decodes, compacts and walks as
// encoding/json says.
func FuzzValid(f *testing.F) {
	for _, tt := range validTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"k\u00e9":"\ud83d\ude00","n":[1e400,-0.0]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _, _, lax := Valid(in, 0)
		start, end, _, st := Valid(in, strict)
		if lax != nil && lax.Kind == FaultDepth {
			return
		}
		if (lax == nil) != json.Valid(in) {
			t.Fatalf("Valid = %+v, encoding/json says %v", lax, json.Valid(in))
		}
		if st == nil && (lax != nil || !utf8.Valid(in)) {
			t.Fatalf("strict accepted what lax refused or invalid UTF-8")
		}
		for i, c := range in {
			if c < '0' || c > '9' {
				continue
			}
			// The fast path accepts only what the full scan accepts.
			if end, u, ok := ShortInt(in, i); ok {
				if n, f := ScanNumber(in, i); f != nil || n.End != end || n.Mag != u || n.Float || n.Neg || n.Overflow {
					t.Fatalf("ShortInt at %d = %d, %d; ScanNumber %+v %+v", i, end, u, n, f)
				}
			}
		}
		if lax != nil && lax.Offset > len(in) || st != nil && st.Offset > len(in) {
			t.Fatalf("fault offset past the input")
		}
		// ScanObject's verdict is ScanValue's under CheckUTF8, and what it
		// hands out is what EachMember walks once that verdict is in.
		if i := SkipSpace(in, 0); i < len(in) {
			var keys, vals [][]byte
			oend, of := ScanObject(in, i, 0, 0, func(k []byte, v Value, off int) bool {
				keys, vals = append(keys, k), append(vals, v.Bytes())
				return true
			})
			vend, vf := ScanValue(in, i, 0, CheckUTF8, nil)
			if oend != vend || (of == nil) != (vf == nil) || of != nil && *of != *vf {
				t.Fatalf("ScanObject = %d, %+v; ScanValue %d, %+v", oend, of, vend, vf)
			}
			if of == nil && in[i] == '{' {
				n := 0
				_ = EachMember(in[i:oend], func(k, v []byte) error {
					if n >= len(keys) || !bytes.Equal(k, keys[n]) || !bytes.Equal(v, vals[n]) {
						t.Fatalf("EachMember member %d = %s:%s; ScanObject %q %q", n, k, v, keys, vals)
					}
					n++
					return nil
				})
				if n != len(keys) {
					t.Fatalf("EachMember found %d members, ScanObject %d", n, len(keys))
				}
			}
		}
		if st != nil {
			return
		}
		v := in[start:end]
		if got := skipValue(v, 0); got != len(v) {
			t.Fatalf("skipValue = %d, want %d", got, len(v))
		}
		var want bytes.Buffer
		if err := json.Compact(&want, v); err != nil {
			t.Fatal(err)
		}
		if got := AppendCompact(nil, v); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("AppendCompact = %s, encoding/json %s", got, want.Bytes())
		}
		switch v[0] {
		case '"':
			var ref string
			if err := json.Unmarshal(v, &ref); err != nil {
				t.Fatal(err)
			}
			if got := Unquote(v); got != ref {
				t.Fatalf("Unquote = %q, encoding/json %q", got, ref)
			}
		case '{':
			var keys []string
			var vals []json.RawMessage
			dec := json.NewDecoder(bytes.NewReader(v))
			_, _ = dec.Token()
			for dec.More() {
				k, _ := dec.Token()
				var mv json.RawMessage
				if err := dec.Decode(&mv); err != nil {
					t.Fatal(err)
				}
				keys, vals = append(keys, k.(string)), append(vals, mv)
			}
			n := 0
			_ = EachMember(v, func(k, mv []byte) error {
				if n >= len(keys) || Unquote(k) != keys[n] || !bytes.Equal(AppendCompact(nil, mv), AppendCompact(nil, vals[n])) {
					t.Fatalf("member %d = %s:%s, encoding/json %q %s", n, k, mv, keys, vals)
				}
				n++
				return nil
			})
			if n != len(keys) {
				t.Fatalf("EachMember found %d members, encoding/json %d", n, len(keys))
			}
		case '[':
			var ref []json.RawMessage
			if err := json.Unmarshal(v, &ref); err != nil {
				t.Fatal(err)
			}
			_ = EachElement(v, func(i int, ev []byte) error {
				if i >= len(ref) || !bytes.Equal(AppendCompact(nil, ev), AppendCompact(nil, ref[i])) {
					t.Fatalf("element %d = %s, encoding/json %s", i, ev, ref)
				}
				return nil
			})
		}
	})
}
