package interchange

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// toJSONCases are MessagePack inputs (hex) and the exact JSON expected.
var toJSONCases = []struct {
	name, in, want string
}{
	{"fixint zero", "00", `0`},
	{"fixint max", "7f", `127`},
	{"negative fixint -1", "ff", `-1`},
	{"negative fixint -32", "e0", `-32`},
	{"uint8", "cc ff", `255`},
	{"uint16", "cd ff ff", `65535`},
	{"uint32", "ce ff ff ff ff", `4294967295`},
	{"uint64 max", "cf ff ff ff ff ff ff ff ff", `18446744073709551615`},
	{"uint64 small (not smallest form)", "cf 00 00 00 00 00 00 00 05", `5`},
	{"int8 min", "d0 80", `-128`},
	{"int8 positive", "d0 7f", `127`},
	{"int16 min", "d1 80 00", `-32768`},
	{"int32 min", "d2 80 00 00 00", `-2147483648`},
	{"int64 min", "d3 80 00 00 00 00 00 00 00", `-9223372036854775808`},
	{"int64 max", "d3 7f ff ff ff ff ff ff ff", `9223372036854775807`},
	{"nil", "c0", `null`},
	{"false", "c2", `false`},
	{"true", "c3", `true`},
	{"float32 1 keeps a point", "ca 3f 80 00 00", `1.0`},
	{"float32 0.1 widened exactly", "ca 3d cc cc cd", `0.10000000149011612`},
	{"float64 0.1 shortest", "cb 3f b9 99 99 99 99 99 9a", `0.1`},
	{"float64 negative zero", "cb 80 00 00 00 00 00 00 00", `-0.0`},
	{"float64 1e20 stays a float", "cb 44 15 af 1d 78 b5 8c 40", `100000000000000000000.0`},
	{"float64 1e21 exponent", "cb 44 4b 1a e4 d6 e2 ef 50", `1e+21`},
	{"float64 1e-7 exponent", "cb 3e 7a d7 f2 9a bc af 48", `1e-7`},
	{"float64 smallest subnormal", "cb 00 00 00 00 00 00 00 01", `5e-324`},
	{"float64 max", "cb 7f ef ff ff ff ff ff ff", `1.7976931348623157e+308`},
	{"empty fixstr", "a0", `""`},
	{"fixstr", "a3 61 62 63", `"abc"`},
	{"str8", "d9 03 61 62 63", `"abc"`},
	{"str16", "da 00 03 61 62 63", `"abc"`},
	{"str32", "db 00 00 00 03 61 62 63", `"abc"`},
	{"escapes", "ac 22 5c 0a 0d 09 08 0c 00 1f 7f 2f 3c", `"\"\\\n\r\t\b\f\u0000\u001f` + "\x7f" + `/<"`},
	{"utf-8 passes through", "a6 c3 a9 f0 9f 98 80", `"é😀"`},
	{"line separator passes through", "a3 e2 80 a8", "\"\u2028\""},
	{"empty fixarray", "90", `[]`},
	{"fixarray", "93 01 a1 78 c0", `[1,"x",null]`},
	{"array16", "dc 00 02 01 02", `[1,2]`},
	{"array32", "dd 00 00 00 01 c3", `[true]`},
	{"empty fixmap", "80", `{}`},
	{"fixmap", "82 a1 61 01 a1 62 92 c2 80", `{"a":1,"b":[false,{}]}`},
	{"map16 with str8 key", "de 00 01 d9 01 61 c0", `{"a":null}`},
	{"map32", "df 00 00 00 01 a1 61 90", `{"a":[]}`},
	{"key needing escapes", "81 a3 61 22 0a 01", `{"a\"\n":1}`},
	{"empty key", "81 a0 01", `{"":1}`},
	{"keys equal in other maps", "82 a1 61 81 a1 61 01 a1 62 81 a1 61 02", `{"a":{"a":1},"b":{"a":2}}`},
}

// toJSONFaults are MessagePack inputs (hex) that must be refused exactly so.
var toJSONFaults = []struct {
	name, in string
	kind     FaultKind
	path     string
	offset   int
}{
	{"empty input", "", FaultTruncated, "", 0},
	{"never-used byte", "c1", FaultSyntax, "", 0},
	{"never-used byte in array", "92 01 c1", FaultSyntax, "/1", 2},
	{"bin8", "c4 01 00", FaultBinary, "", 0},
	{"bin16 in array", "92 01 c5 00 01 00", FaultBinary, "/1", 2},
	{"bin32 in map", "81 a1 62 c6 00 00 00 00", FaultBinary, "/b", 3},
	{"ext8", "c7 01 05 00", FaultExtension, "", 0},
	{"ext16", "c8 00 01 05 00", FaultExtension, "", 0},
	{"ext32", "c9 00 00 00 01 05 00", FaultExtension, "", 0},
	{"fixext1", "d4 05 00", FaultExtension, "", 0},
	{"fixext2", "d5 05 00 00", FaultExtension, "", 0},
	{"timestamp32", "d6 ff 00 00 00 00", FaultExtension, "", 0},
	{"timestamp64", "d7 ff 00 00 00 00 00 00 00 00", FaultExtension, "", 0},
	{"fixext16", "d8 05 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00", FaultExtension, "", 0},
	{"integer key", "81 01 02", FaultNonStringKey, "", 1},
	{"nil key", "81 c0 02", FaultNonStringKey, "", 1},
	{"bin key", "81 c4 01 61 02", FaultNonStringKey, "", 1},
	{"array key, nested", "81 a1 61 81 91 01 02", FaultNonStringKey, "/a", 4},
	{"duplicate key", "82 a1 61 01 a1 61 02", FaultDuplicateKey, "/a", 4},
	{"duplicate key in other str forms", "82 a1 61 01 d9 01 61 02", FaultDuplicateKey, "/a", 4},
	{"duplicate escaped key", "82 a3 61 7e 2f 01 a3 61 7e 2f 02", FaultDuplicateKey, "/a~0~1", 6},
	{"duplicate key nested", "91 81 a1 78 83 a0 01 a1 79 02 a0 03", FaultDuplicateKey, "/0/x/", 10},
	{"float32 NaN", "ca 7f c0 00 00", FaultNonFinite, "", 0},
	{"float32 +Inf", "ca 7f 80 00 00", FaultNonFinite, "", 0},
	{"float64 NaN", "cb 7f f8 00 00 00 00 00 01", FaultNonFinite, "", 0},
	{"float64 -Inf in array", "91 cb ff f0 00 00 00 00 00 00", FaultNonFinite, "/0", 1},
	{"invalid utf-8", "a1 ff", FaultInvalidUTF8, "", 1},
	{"utf-8 surrogate", "a5 61 62 ed a0 80", FaultInvalidUTF8, "", 3},
	{"overlong utf-8", "a2 c0 80", FaultInvalidUTF8, "", 1},
	{"invalid utf-8 in value", "81 a1 6b a1 80", FaultInvalidUTF8, "/k", 4},
	{"invalid utf-8 in key", "81 a2 61 ff 01", FaultInvalidUTF8, "", 3},
	{"trailing byte", "01 02", FaultTrailing, "", 1},
	{"trailing after map", "80 80", FaultTrailing, "", 1},
	{"truncated uint16", "cd 01", FaultTruncated, "", 2},
	{"truncated float64", "cb 00 00", FaultTruncated, "", 3},
	{"truncated str", "a3 61", FaultTruncated, "", 2},
	{"truncated str8 length", "d9", FaultTruncated, "", 1},
	{"truncated array", "92 01", FaultTruncated, "/1", 2},
	{"truncated array32 header", "dd 00 00", FaultTruncated, "", 3},
	{"huge array count", "dd ff ff ff ff 01", FaultTruncated, "/1", 6},
	{"truncated map before key", "81", FaultTruncated, "", 1},
	{"truncated map key header", "81 d9", FaultTruncated, "", 2},
	{"truncated map key", "81 a2 61", FaultTruncated, "", 3},
	{"truncated map value", "81 a1 61", FaultTruncated, "/a", 3},
	{"huge map count", "df ff ff ff ff a1 61 01", FaultTruncated, "", 8},
}

func TestToJSON(t *testing.T) {
	for _, tc := range toJSONCases {
		t.Run(tc.name, func(t *testing.T) {
			in := hx(t, tc.in)
			got, err := ToJSON(in)
			if err != nil {
				t.Fatalf("ToJSON(% x): %v", in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("ToJSON(% x) = %s, want %s", in, got, tc.want)
			}
			// Appending keeps the caller's prefix.
			got, err = AppendJSON([]byte("prefix"), in)
			if err != nil || string(got) != "prefix"+tc.want {
				t.Fatalf("AppendJSON = %q, %v", got, err)
			}
		})
	}
}

func TestToJSONFaults(t *testing.T) {
	for _, tc := range toJSONFaults {
		t.Run(tc.name, func(t *testing.T) {
			in := hx(t, tc.in)
			dst := []byte("keep")
			out, err := AppendJSON(dst, in)
			if err == nil {
				t.Fatalf("AppendJSON(% x) = %s, want a %s fault", in, out, tc.kind)
			}
			f := checkFault(t, err, in)
			if f.Kind != tc.kind || f.Path != tc.path || f.Offset != tc.offset {
				t.Fatalf("fault = %s %q @%d, want %s %q @%d (%v)", f.Kind, f.Path, f.Offset, tc.kind, tc.path, tc.offset, err)
			}
			if string(out) != "keep" {
				t.Fatalf("failed conversion returned %q, want the caller's prefix", out)
			}
			var as *Fault
			if !errors.As(fmt.Errorf("wrapped: %w", err), &as) || as != f {
				t.Fatal("errors.As does not find the fault through wrapping")
			}
		})
	}
}

// nested returns depth MessagePack arrays (or maps keyed "k") around 1.
func nestedMsgPack(depth int, maps bool) []byte {
	var b []byte
	for range depth {
		if maps {
			b = append(b, 0x81, 0xa1, 'k')
		} else {
			b = append(b, 0x91)
		}
	}
	return append(b, 0x01)
}

func TestToJSONDepth(t *testing.T) {
	for _, maps := range []bool{false, true} {
		seg, width := "/0", 1
		if maps {
			seg, width = "/k", 3
		}
		ok := nestedMsgPack(MaxDepth, maps)
		if _, err := ToJSON(ok); err != nil {
			t.Fatalf("maps=%v: %d levels refused: %v", maps, MaxDepth, err)
		}
		_, err := ToJSON(nestedMsgPack(MaxDepth+1, maps))
		var f *Fault
		if !errors.As(err, &f) || f.Kind != FaultDepth {
			t.Fatalf("maps=%v: %d levels: %v, want a depth fault", maps, MaxDepth+1, err)
		}
		if want := strings.Repeat(seg, MaxDepth); f.Path != want || f.Offset != MaxDepth*width {
			t.Fatalf("maps=%v: depth fault at %q @%d, want %q @%d", maps, f.Path, f.Offset, want, MaxDepth*width)
		}
	}
}

func TestToJSONMaxOutput(t *testing.T) {
	in := hx(t, "93 a3 61 62 63 a3 64 65 66 a3 67 68 69") // ["abc","def","ghi"]
	if out, err := (Limits{MaxOutput: 19}).AppendJSON(nil, in); err != nil || string(out) != `["abc","def","ghi"]` {
		t.Fatalf("at the bound: %s, %v", out, err)
	}
	_, err := (Limits{MaxOutput: 18}).AppendJSON([]byte("xx"), in)
	f := checkFault(t, err, in)
	if f.Kind != FaultTooLarge {
		t.Fatalf("one byte over: %v, want too_large", err)
	}
	// Stopped before the third element once 13 bytes were out.
	_, err = (Limits{MaxOutput: 10}).AppendJSON(nil, in)
	f = checkFault(t, err, in)
	if f.Kind != FaultTooLarge || f.Path != "/2" || f.Offset != 9 {
		t.Fatalf("early stop: %s %q @%d, want too_large \"/2\" @9", f.Kind, f.Path, f.Offset)
	}
}

func TestFaultMessage(t *testing.T) {
	_, err := ToJSON(hx(t, "82 a1 61 01 a1 61 02"))
	want := `interchange: msgpack: duplicate key at "/a" (byte 4)`
	if err == nil || err.Error() != want {
		t.Fatalf("message %v, want %s", err, want)
	}
	_, err = ToMsgPack([]byte(`[1,]`))
	want = `interchange: json: syntax error at "/1" (byte 3)`
	if err == nil || err.Error() != want {
		t.Fatalf("message %v, want %s", err, want)
	}
	for k := FaultTruncated; k <= FaultTooLarge; k++ {
		if strings.HasPrefix(k.String(), "FaultKind(") || kindTexts[k] == "" {
			t.Errorf("kind %d lacks a name or message", k)
		}
	}
	if FaultKind(0).String() != "FaultKind(0)" {
		t.Errorf("zero kind named %q", FaultKind(0).String())
	}
	// A Fault built by hand with a kind outside the set still prints.
	if got := (&Fault{Kind: 200}).Error(); got != `interchange: msgpack: FaultKind(200) at "" (byte 0)` {
		t.Errorf("unknown kind prints %q", got)
	}
}

func TestAppendJSONReusesBuffer(t *testing.T) {
	in := hx(t, "82 a1 61 01 a1 62 92 c2 80")
	buf := make([]byte, 0, 64)
	out, err := AppendJSON(buf, in)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &buf[:1][0] {
		t.Fatal("conversion did not write into the caller's buffer")
	}
	if !bytes.Equal(out, []byte(`{"a":1,"b":[false,{}]}`)) {
		t.Fatalf("got %s", out)
	}
}

// appendJSONStringRef is appendJSONString one rune at a time.
func appendJSONStringRef(s []byte) ([]byte, int) {
	var out []byte
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			return nil, i
		}
		out = append(out, s[i:i+size]...)
		i += size
	}
	q, err := json.Marshal(string(out))
	if err != nil {
		panic(err)
	}
	return q, -1
}

// TestAppendJSONStringRuns: validating text beyond ASCII a run at a time
// finds the same first invalid byte as one rune at a time, and the JSON
// it writes is the text's (encoding/json reads back the same string), for
// strings to past the block scan's threshold mixing ASCII, two-, three-
// and four-byte characters, bytes to escape and broken runes.
func TestAppendJSONStringRuns(t *testing.T) {
	pieces := []string{"a", "é", "漢", "😀", "\n", "\"", "\\", "\x01", " ", "~"}
	broken := []string{"\x80", "\xe6a", "\xe6", "\xed\xa0\x80", "\xff", "\xf0\x9f\x98"}
	r := rand.New(rand.NewPCG(5, 6))
	for k := range 30000 {
		var b []byte
		for n := r.IntN(100); len(b) < n; {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		if k%3 == 0 {
			p := r.IntN(len(b) + 1)
			b = append(b[:p:p], append([]byte(broken[r.IntN(len(broken))]), b[p:]...)...)
		}
		got, bad := appendJSONString(nil, b)
		_, wantBad := appendJSONStringRef(b)
		if bad != wantBad {
			t.Fatalf("appendJSONString(%q): invalid at %d, rune at a time %d", b, bad, wantBad)
		}
		if bad >= 0 {
			continue
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != string(b) {
			t.Fatalf("appendJSONString(%q) = %s, reads back %q (%v)", b, got, back, err)
		}
	}
}
