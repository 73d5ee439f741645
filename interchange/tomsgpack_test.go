package interchange

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// toMsgPackCases are JSON inputs and the exact MessagePack (hex) expected.
var toMsgPackCases = []struct {
	name, in, want string
}{
	{"zero", `0`, "00"},
	{"negative zero is the integer 0", `-0`, "00"},
	{"fixint max", `127`, "7f"},
	{"uint8", `128`, "cc 80"},
	{"uint8 max", `255`, "cc ff"},
	{"uint16", `256`, "cd 01 00"},
	{"uint32", `65536`, "ce 00 01 00 00"},
	{"uint64", `4294967296`, "cf 00 00 00 01 00 00 00 00"},
	{"uint64 max", `18446744073709551615`, "cf ff ff ff ff ff ff ff ff"},
	{"negative fixint", `-1`, "ff"},
	{"negative fixint min", `-32`, "e0"},
	{"int8", `-33`, "d0 df"},
	{"int8 min", `-128`, "d0 80"},
	{"int16", `-129`, "d1 ff 7f"},
	{"int32", `-32769`, "d2 ff ff 7f ff"},
	{"int64", `-2147483649`, "d3 ff ff ff ff 7f ff ff ff"},
	{"int64 min", `-9223372036854775808`, "d3 80 00 00 00 00 00 00 00"},
	{"fraction makes a float", `1.0`, "cb 3f f0 00 00 00 00 00 00"},
	{"exponent makes a float", `1e2`, "cb 40 59 00 00 00 00 00 00"},
	{"capital exponent, sign", `25E-1`, "cb 40 04 00 00 00 00 00 00"},
	{"negative zero float", `-0.0`, "cb 80 00 00 00 00 00 00 00"},
	{"shortest decimal", `0.1`, "cb 3f b9 99 99 99 99 99 9a"},
	{"underflow rounds to zero", `1e-400`, "cb 00 00 00 00 00 00 00 00"},
	{"big exponent still finite", `1.7976931348623157e308`, "cb 7f ef ff ff ff ff ff ff"},
	{"huge integer text as float", `100000000000000000000.0`, "cb 44 15 af 1d 78 b5 8c 40"},
	{"true", `true`, "c3"},
	{"false", `false`, "c2"},
	{"null", `null`, "c0"},
	{"empty string", `""`, "a0"},
	{"string", `"abc"`, "a3 61 62 63"},
	{"raw utf-8", `"é😀"`, "a6 c3 a9 f0 9f 98 80"},
	{"short escapes", `"\"\\\/\b\f\n\r\t"`, "a8 22 5c 2f 08 0c 0a 0d 09"},
	{"u escape", `"\u00e9\u0000\u001F"`, "a4 c3 a9 00 1f"},
	{"surrogate pair joined", `"\ud83d\ude00"`, "a4 f0 9f 98 80"},
	{"surrogate pair upper hex", `"\uD83D\uDE00"`, "a4 f0 9f 98 80"},
	{"str8", `"` + strings.Repeat("a", 32) + `"`, "d9 20" + strings.Repeat(" 61", 32)},
	{"escapes shrink header to fixstr", `"` + strings.Repeat(`\u0041`, 6) + `"`, "a6 41 41 41 41 41 41"},
	{"empty array", `[]`, "90"},
	{"array", `[1,[2],"x"]`, "93 01 91 02 a1 78"},
	{"white space everywhere", " \t\n\r[ 1 ,\n2 ] \n", "92 01 02"},
	{"empty object", `{}`, "80"},
	{"object", `{"a":1,"b":{"c":null}}`, "82 a1 61 01 a1 62 81 a1 63 c0"},
	{"object with spaces", `{ "a" : [ ] , "b" : { } }`, "82 a1 61 90 a1 62 80"},
	{"escaped key decoded", `{"\u0061\n":1}`, "81 a2 61 0a 01"},
	{"same key in sibling objects", `[{"a":1},{"a":2}]`, "92 81 a1 61 01 81 a1 61 02"},
	{"16 elements need array16", `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]`,
		"dc 00 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"},
	{"15 elements stay fixarray", `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]`,
		"9f 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e"},
	{"nested wide containers", `[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],{"a":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]`,
		"92 dc 00 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 81 a1 61 dc 00 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"},
}

var toMsgPackFaults = []struct {
	name, in string
	kind     FaultKind
	path     string
	offset   int
}{
	{"empty input", ``, FaultTruncated, "", 0},
	{"only space", "  \n", FaultTruncated, "", 3},
	{"trailing comma in array", `[1,]`, FaultSyntax, "/1", 3},
	{"missing comma", `[1 2]`, FaultSyntax, "", 3},
	{"trailing comma in object", `{"a":1,}`, FaultSyntax, "", 7},
	{"missing colon", `{"a" 1}`, FaultSyntax, "/a", 5},
	{"unquoted key", `{a:1}`, FaultSyntax, "", 1},
	{"number key", `{1:1}`, FaultSyntax, "", 1},
	{"leading zero", `[01]`, FaultSyntax, "/0", 2},
	{"leading zero top", `01`, FaultSyntax, "", 1},
	{"lone minus", `-`, FaultTruncated, "", 1},
	{"minus letter", `-a`, FaultSyntax, "", 1},
	{"point without digits", `1.`, FaultTruncated, "", 2},
	{"point then exponent", `1.e5`, FaultSyntax, "", 2},
	{"exponent without digits", `1e`, FaultTruncated, "", 2},
	{"exponent sign without digits", `1e+`, FaultTruncated, "", 3},
	{"exponent letter", `1ex`, FaultSyntax, "", 2},
	{"second point", `1.5.2`, FaultSyntax, "", 3},
	{"plus sign", `+1`, FaultSyntax, "", 0},
	{"bare fraction", `.5`, FaultSyntax, "", 0},
	{"NaN", `NaN`, FaultSyntax, "", 0},
	{"Infinity", `-Infinity`, FaultSyntax, "", 1},
	{"hex number", `0x10`, FaultTrailing, "", 1},
	{"truncated literal", `tru`, FaultTruncated, "", 3},
	{"misspelt literal", `[nul]`, FaultSyntax, "/0", 4},
	{"capital literal", `True`, FaultSyntax, "", 0},
	{"comment", `/* c */ 1`, FaultSyntax, "", 0},
	{"line comment after value", "1 // c", FaultTrailing, "", 2},
	{"single quotes", `'a'`, FaultSyntax, "", 0},
	{"unterminated string", `"a`, FaultTruncated, "", 2},
	{"unterminated escape", `"\`, FaultTruncated, "", 2},
	{"bad escape", `"\x"`, FaultSyntax, "", 2},
	{"bad hex", `"\u12g4"`, FaultSyntax, "", 5},
	{"short hex", `"\u12`, FaultTruncated, "", 5},
	{"raw tab in string", "\"\t\"", FaultSyntax, "", 1},
	{"raw newline in string", "[\"a\nb\"]", FaultSyntax, "/0", 3},
	{"trailing value", `1 2`, FaultTrailing, "", 2},
	{"trailing bracket", `[] ]`, FaultTrailing, "", 3},
	{"unclosed array", `[1,2`, FaultTruncated, "", 4},
	{"unclosed object", `{"a":1`, FaultTruncated, "", 6},
	{"object missing value", `{"a":`, FaultTruncated, "/a", 5},
	{"unclosed nested", `{"a":[`, FaultTruncated, "/a/0", 6},
	{"invalid utf-8", "\"\xff\"", FaultInvalidUTF8, "", 1},
	{"invalid utf-8 continuation", "[\"a\xe2\x82\"]", FaultInvalidUTF8, "/0", 3},
	{"utf-8 surrogate bytes", "\"\xed\xa0\x80\"", FaultInvalidUTF8, "", 1},
	{"utf-8 cut by end of input", "\"\xe2\x82", FaultTruncated, "", 3},
	{"invalid utf-8 outside a string", "\xff", FaultSyntax, "", 0},
	{"duplicate key", `{"a":1,"a":2}`, FaultDuplicateKey, "/a", 7},
	{"duplicate key after escapes", `{"a":1,"\u0061":2}`, FaultDuplicateKey, "/a", 7},
	{"duplicate key nested, escaped path", `{"x":[{"a~/b":1,"a~/b":2}]}`, FaultDuplicateKey, "/x/0/a~0~1b", 16},
	{"duplicate empty key", `{"":1,"":2}`, FaultDuplicateKey, "/", 6},
	{"integer above 2^64-1", `18446744073709551616`, FaultIntegerRange, "", 0},
	{"integer below -2^63", `-9223372036854775809`, FaultIntegerRange, "", 0},
	{"huge integer in array", `[1,99999999999999999999999]`, FaultIntegerRange, "/1", 3},
	{"float overflow", `1e309`, FaultFloatOverflow, "", 0},
	{"negative float overflow", `{"f":-1.8e308}`, FaultFloatOverflow, "/f", 5},
	{"lone high surrogate", `"\ud800"`, FaultLoneSurrogate, "", 1},
	{"lone low surrogate", `"\udc00"`, FaultLoneSurrogate, "", 1},
	{"high then letter", `"\ud800x"`, FaultLoneSurrogate, "", 1},
	{"high then non-surrogate escape", `"\ud800\u0041"`, FaultLoneSurrogate, "", 1},
	{"high then high", `"\ud800\ud800"`, FaultLoneSurrogate, "", 1},
	{"high then short escape", `"\ud800\n"`, FaultLoneSurrogate, "", 1},
	{"high then end of input", `"\ud800`, FaultTruncated, "", 7},
	{"lone surrogate in value", `{"k":"a\ud800"}`, FaultLoneSurrogate, "/k", 7},
	{"lone surrogate in key", `{"\udc00":1}`, FaultLoneSurrogate, "", 2},
}

func TestToMsgPack(t *testing.T) {
	for _, tc := range toMsgPackCases {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(t, tc.want)
			got, err := ToMsgPack([]byte(tc.in))
			if err != nil {
				t.Fatalf("ToMsgPack(%s): %v", tc.in, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("ToMsgPack(%s) = % x, want % x", tc.in, got, want)
			}
			got, err = AppendMsgPack([]byte{0xee}, []byte(tc.in))
			if err != nil || got[0] != 0xee || !bytes.Equal(got[1:], want) {
				t.Fatalf("AppendMsgPack = % x, %v", got, err)
			}
		})
	}
}

func TestToMsgPackFaults(t *testing.T) {
	for _, tc := range toMsgPackFaults {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendMsgPack([]byte{0xee}, []byte(tc.in))
			if err == nil {
				t.Fatalf("AppendMsgPack(%q) = % x, want a %s fault", tc.in, out, tc.kind)
			}
			f := checkFault(t, err, []byte(tc.in))
			if f.Kind != tc.kind || f.Path != tc.path || f.Offset != tc.offset {
				t.Fatalf("fault = %s %q @%d, want %s %q @%d (%v)", f.Kind, f.Path, f.Offset, tc.kind, tc.path, tc.offset, err)
			}
			if !bytes.Equal(out, []byte{0xee}) {
				t.Fatalf("failed conversion returned % x, want the caller's prefix", out)
			}
		})
	}
}

func TestToMsgPackDepth(t *testing.T) {
	nested := func(n int, open, close, seg string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, shape := range []struct{ open, close, seg string }{{"[", "]", "/0"}, {`{"k":`, "}", "/k"}} {
		if _, err := ToMsgPack([]byte(nested(MaxDepth, shape.open, shape.close, shape.seg))); err != nil {
			t.Fatalf("%s: %d levels refused: %v", shape.open, MaxDepth, err)
		}
		_, err := ToMsgPack([]byte(nested(MaxDepth+1, shape.open, shape.close, shape.seg)))
		var f *Fault
		if !errors.As(err, &f) || f.Kind != FaultDepth {
			t.Fatalf("%s: %d levels: %v, want a depth fault", shape.open, MaxDepth+1, err)
		}
		if want := strings.Repeat(shape.seg, MaxDepth); f.Path != want || f.Offset != MaxDepth*len(shape.open) {
			t.Fatalf("depth fault at %q @%d, want %q @%d", f.Path, f.Offset, want, MaxDepth*len(shape.open))
		}
	}
}

// TestDepthAgrees checks the shared bound: the deepest value one
// direction produces is exactly the deepest the other accepts.
func TestDepthAgrees(t *testing.T) {
	js, err := ToJSON(nestedMsgPack(MaxDepth, true))
	if err != nil {
		t.Fatal(err)
	}
	mp, err := ToMsgPack(js)
	if err != nil {
		t.Fatalf("JSON of the deepest MessagePack value refused: %v", err)
	}
	if !bytes.Equal(mp, nestedMsgPack(MaxDepth, true)) {
		t.Fatalf("round trip changed the value")
	}
}

func TestToMsgPackMaxOutput(t *testing.T) {
	in := []byte(`["abc","def","ghi"]`)
	if out, err := (Limits{MaxOutput: 13}).AppendMsgPack(nil, in); err != nil || len(out) != 13 {
		t.Fatalf("at the bound: % x, %v", out, err)
	}
	if _, err := (Limits{MaxOutput: 12}).AppendMsgPack(nil, in); checkFault(t, err, in).Kind != FaultTooLarge {
		t.Fatalf("one byte over: %v", err)
	}
	// Headers widened at the end count too: 16 elements, 17 bytes as
	// written, 19 once the header is array16.
	wide := []byte(`[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]`)
	if _, err := (Limits{MaxOutput: 18}).AppendMsgPack(nil, wide); checkFault(t, err, wide).Kind != FaultTooLarge {
		t.Fatalf("widened header not counted: %v", err)
	}
}

// TestWideContainers checks header widening at the 15/16 and 65535/65536
// boundaries, nested, against the reference decoder.
func TestWideContainers(t *testing.T) {
	list := func(n int) string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('0' + byte(i%10))
		}
		b.WriteByte(']')
		return b.String()
	}
	obj := func(n int, val string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strings.Repeat("x", i%7) + hex.EncodeToString([]byte{byte(i >> 16), byte(i >> 8), byte(i)}) + `":` + val)
		}
		b.WriteByte('}')
		return b.String()
	}
	docs := []string{
		list(65535), list(65536), obj(65536, "[]"),
		"[" + list(16) + "," + obj(16, list(3)) + "," + list(20) + "]",
		obj(17, obj(16, list(17))),
	}
	for _, doc := range docs {
		mp, err := ToMsgPack([]byte(doc))
		if err != nil {
			t.Fatalf("%.40s…: %v", doc, err)
		}
		want, err := canonJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		got, err := canonMsgPack(mp)
		if err != nil {
			t.Fatalf("%.40s…: reference decoder: %v", doc, err)
		}
		if !canonEqual(got, want) {
			t.Fatalf("%.40s…: decoded value differs", doc)
		}
		back, err := ToJSON(mp)
		if err != nil || string(back) != doc {
			t.Fatalf("%.40s…: round trip changed the text (%v)", doc, err)
		}
	}
}
