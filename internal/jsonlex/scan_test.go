package jsonlex

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// plainRunRef and specialRunRef are PlainRun's and SpecialRun's
// specifications, one byte at a time.
func plainRunRef(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
	}
	return i
}

func specialRunRef(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}

// tricky are the bytes next to every boundary the word-at-a-time test
// draws: the class edges, and the neighbours of the bytes it looks for,
// where a borrow or a carry between lanes would show.
var tricky = []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7e, 0x7f, 0x80, 0x81, 0xa0, 0xc3, 0xfe, 0xff, 'a'}

// TestPlainRunAgrees: PlainRun and SpecialRun stop exactly where the
// byte loops do, for every byte value at every lane and alignment of the
// word scan, for pairs of tricky bytes, for the tricky bytes in long runs
// (where the block scan takes over), and for random buffers drawn mostly
// from the tricky bytes, short and long. The block scan itself is held
// to the byte loops by TestStopBlocks: here a block scan that stopped
// early would go unseen, since the word scan finishes the run.
func TestPlainRunAgrees(t *testing.T) {
	check := func(b []byte, i int) {
		t.Helper()
		if got, want := PlainRun(b, i), plainRunRef(b, i); got != want {
			t.Fatalf("PlainRun(%q, %d) = %d, byte loop %d", b, i, got, want)
		}
		if got, want := SpecialRun(b, i), specialRunRef(b, i); got != want {
			t.Fatalf("SpecialRun(%q, %d) = %d, byte loop %d", b, i, got, want)
		}
	}
	for c := 0; c < 256; c++ {
		for p := 0; p < 24; p++ {
			b := bytes.Repeat([]byte("a"), 24)
			b[p] = byte(c)
			for i := 0; i <= 8; i++ {
				check(b, i)
				check(b[:p+1], i)
			}
		}
	}
	for _, x := range tricky {
		for _, y := range tricky {
			for p := 0; p < 16; p++ {
				for q := p + 1; q < 17; q++ {
					b := bytes.Repeat([]byte("b"), 17)
					b[p], b[q] = x, y
					check(b, 0)
					check(b, p+1)
				}
			}
		}
	}
	// Long runs, where the blocks are scanned: one hit anywhere (the
	// first 16 bytes, each lane of both blocks of a pair, the lone
	// block, the tail), or none, from starts at every alignment.
	for _, c := range tricky {
		for n := longRun - 1; n <= longRun+80; n++ {
			for p := 0; p < n; p++ {
				b := bytes.Repeat([]byte("~"), n)
				b[p] = c
				for _, i := range []int{0, 1, 7, 15} {
					check(b, min(i, n))
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for k := range 40000 {
		size := r.IntN(40)
		if k%2 == 1 {
			size = r.IntN(300)
		}
		b := make([]byte, size)
		for k := range b {
			if r.IntN(4*(1+size/40)) == 0 {
				b[k] = tricky[r.IntN(len(tricky))]
			} else {
				b[k] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(b, r.IntN(len(b)+1))
	}
}

// stopBlocksRef is stopBlocks' specification: the byte loop's answer
// within the whole 16-byte blocks.
func stopBlocksRef(b []byte, high uint64) int {
	whole := len(b) &^ 15
	if high != 0 {
		return plainRunRef(b[:whole], 0)
	}
	return specialRunRef(b[:whole], 0)
}

// TestStopBlocks: the block scan alone (SSE2 on amd64, the word scan
// under purego) stops where the byte loops do within its whole blocks,
// with and without the high-bit test, for every byte value in every
// lane of every block of buffers of 0 to 100 bytes, alone and with a
// second hit after it.
func TestStopBlocks(t *testing.T) {
	for _, high := range []uint64{nonASCII, 0} {
		for c := range 256 {
			for n := 0; n <= 100; n++ {
				for p := 0; p < n; p++ {
					b := bytes.Repeat([]byte("~"), n)
					b[p] = byte(c)
					if got, want := stopBlocks(b, high), stopBlocksRef(b, high); got != want {
						t.Fatalf("stopBlocks(%q, %#x) = %d, byte loop %d", b, high, got, want)
					}
					if p+1 < n {
						b[n-1] = '"'
						if got, want := stopBlocks(b, high), stopBlocksRef(b, high); got != want {
							t.Fatalf("stopBlocks(%q, %#x) = %d, byte loop %d", b, high, got, want)
						}
					}
				}
			}
		}
	}
}

// FuzzPlainRun: the word and block scans of PlainRun and SpecialRun, and
// the block scan alone, agree with the byte loops on any input and start.
func FuzzPlainRun(f *testing.F) {
	f.Add([]byte(`abcdefgh"ijklmnop`), 0)
	f.Add([]byte("abcdefg\x1fhijklmno\\"), 3)
	f.Add([]byte("\x7f\x80\x21\x20\x5b\x5d\x23\x22"), 0)
	f.Add([]byte(strings.Repeat("plain text ", 12)+"\x01"), 3)
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if i < 0 || i > len(b) {
			return
		}
		if got, want := PlainRun(b, i), plainRunRef(b, i); got != want {
			t.Fatalf("PlainRun(%q, %d) = %d, byte loop %d", b, i, got, want)
		}
		if got, want := SpecialRun(b, i), specialRunRef(b, i); got != want {
			t.Fatalf("SpecialRun(%q, %d) = %d, byte loop %d", b, i, got, want)
		}
		for _, high := range []uint64{nonASCII, 0} {
			if got, want := stopBlocks(b[i:], high), stopBlocksRef(b[i:], high); got != want {
				t.Fatalf("stopBlocks(%q, %#x) = %d, byte loop %d", b[i:], high, got, want)
			}
		}
	})
}

// scanStringRef is ScanString's specification for strings without
// escapes' surrogate rules: one rune at a time.
func scanStringRef(b []byte, i int, fl Flags) (int, *Fault) {
	for i++; ; {
		i = plainRunRef(b, i)
		if i >= len(b) {
			return i, fault(FaultTruncated, len(b), "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			n, f := escape(b, i, fl)
			if f != nil {
				return i, f
			}
			i += n
		case c < 0x20:
			return i, fault(FaultSyntax, i, "control character in string")
		case fl&CheckUTF8 == 0:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				if !utf8.FullRune(b[i:]) {
					return i, fault(FaultTruncated, len(b), "unterminated string")
				}
				return i, fault(FaultInvalidUTF8, i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// TestScanStringRuns: validating text beyond ASCII a run at a time finds
// the same end, and the same fault at the same offset, as validating it
// one rune at a time: for strings of every length to past the block
// scan's threshold, mixing ASCII, two-, three- and four-byte characters,
// escapes, and a broken rune (a stray continuation byte, a lead byte cut
// short inside the string or by its end, an encoded surrogate).
func TestScanStringRuns(t *testing.T) {
	pieces := []string{"a", "é", "漢", "😀", `\n`, `\u00e9`, " ", "~"}
	broken := []string{"\x80", "\xe6a", "\xe6", "\xed\xa0\x80", "\xff", "\xf0\x9f\x98"}
	r := rand.New(rand.NewPCG(3, 4))
	for k := range 30000 {
		var sb strings.Builder
		sb.WriteByte('"')
		for n := r.IntN(longRun + 40); sb.Len() < n; {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		b := []byte(sb.String())
		if k%3 == 0 {
			p := 1 + r.IntN(len(b))
			b = append(b[:p:p], append([]byte(broken[r.IntN(len(broken))]), b[p:]...)...)
		}
		if k%5 != 0 {
			b = append(b, '"')
		}
		for _, fl := range []Flags{0, CheckUTF8} {
			end, _, f := ScanString(b, 0, fl)
			wantEnd, wantF := scanStringRef(b, 0, fl)
			if (f == nil) != (wantF == nil) || f != nil && (f.Kind != wantF.Kind || f.Offset != wantF.Offset) || f == nil && end != wantEnd {
				t.Fatalf("ScanString(%q, %v) = %d, %v; rune at a time %d, %v", b, fl, end, f, wantEnd, wantF)
			}
		}
	}
}

func TestScanObject(t *testing.T) {
	in := []byte(`{ "a" : [1, {"x":"}"}] , "b\"" : "q\\" ,"c":null}`)
	var got []string
	end, f := ScanObject(in, 0, 0, 0, func(k []byte, v Value, off int) bool {
		if !bytes.Equal(in[off:off+len(v.Bytes())], v.Bytes()) {
			t.Errorf("offset %d does not locate %s", off, v.Bytes())
		}
		got = append(got, Unquote(k)+"="+string(v.Bytes()))
		return len(got) < 2
	})
	if want := `a=[1, {"x":"}"}]|b"="q\\"`; f != nil || end != len(in) || strings.Join(got, "|") != want {
		t.Errorf("ScanObject = %d, %v, %q; want %d, nil, %q", end, f, got, len(in), want)
	}
	// Stopping early does not stop validation: a fault after the last
	// member handed out is still found, with its offset.
	bad := []byte("{\"a\":1,\"b\":\"\xff\"}")
	_, f = ScanObject(bad, 0, 0, 0, func([]byte, Value, int) bool { return false })
	if f == nil || f.Kind != FaultInvalidUTF8 || f.Offset != 12 {
		t.Errorf("ScanObject on invalid UTF-8 = %+v", f)
	}
	if v := (Value{}); !v.IsZero() || v.Clone().Bytes() != nil {
		t.Error("zero Value is not zero")
	}
}

// TestSkipValue: the walkers' skip over validated values ends where the
// validating scan does.
func TestSkipValue(t *testing.T) {
	for _, in := range []string{`"a\\"`, `"\\\""`, `"\"\\\\\""`, `[1,"]",{"a":"\\\\"}]`, `-1.5e+3`, `true`, `null`, `{"a":{"b":["}"]}}`} {
		want, f := ScanValue([]byte(in), 0, 0, 0, nil)
		if f != nil {
			t.Fatalf("%s: %v", in, f)
		}
		if got := skipValue([]byte(in+",x"), 0); got != want {
			t.Errorf("skipValue(%s) = %d, want %d", in, got, want)
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("%s is not JSON", in)
		}
	}
}

// TestValueStr: an owned Value hands out text cut from its one copy, and
// anything that is not part of it is copied.
func TestValueStr(t *testing.T) {
	line := []byte(`{"a":"hello","b":[1]}`)
	var v Value
	if _, f := ScanObject(line, 0, 0, 0, func(k []byte, mv Value, off int) bool {
		if Unquote(k) == "a" {
			v = mv
		}
		return true
	}); f != nil {
		t.Fatal(f)
	}
	own := v.Own()
	if !own.Owned() || v.Owned() || string(own.Bytes()) != `"hello"` {
		t.Fatalf("Own = %q (owned %v)", own.Bytes(), own.Owned())
	}
	line[6] = 'X' // the owned copy does not see the line change
	body := own.Bytes()[1:6]
	if s := own.Str(body); s != "hello" || unsafe.StringData(s) != &own.Bytes()[1] {
		t.Errorf("Str of a part = %q, not shared", s)
	}
	foreign := []byte("hello")
	if s := own.Str(foreign); s != "hello" || unsafe.StringData(s) == &foreign[0] {
		t.Errorf("Str of foreign bytes = %q", s)
	}
	if s := v.Str(v.Bytes()); s != `"Xello"` {
		t.Errorf("Str of an unowned Value = %q", s)
	}
	if s := own.Str(nil); s != "" {
		t.Errorf("Str(nil) = %q", s)
	}
}
