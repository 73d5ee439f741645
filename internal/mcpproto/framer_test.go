package mcpproto

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// frameAll feeds input to a fresh framer in the given chunk sizes
// (cycled) and collects the lines, each refused line rendered as
// "!KIND@OFFSET/LENGTH:PREFIX".
func frameAll(max int, input []byte, sizes []int) []string {
	f := NewFramer(max)
	var lines []string
	for k := 0; len(input) > 0; k++ {
		n := len(input)
		if len(sizes) > 0 {
			n = sizes[k%len(sizes)]%len(input) + 1
		}
		chunk := append([]byte(nil), input[:n]...) // the framer must not rely on the caller's buffer beyond Next
		input = input[n:]
		f.Push(chunk)
		for {
			line, ff := f.Next()
			if ff != nil {
				lines = append(lines, fmt.Sprintf("!%d@%d/%d:%s", ff.Kind, ff.Offset, ff.Length, line))
				continue
			}
			if line == nil {
				break
			}
			lines = append(lines, string(line))
		}
	}
	return lines
}

var framerTests = []struct {
	name  string
	max   int
	in    string
	lines []string
}{
	{name: "two lines", max: 100, in: "a\nbc\n", lines: []string{"a", "bc"}},
	{name: "crlf", max: 100, in: "a\r\nb\r\n", lines: []string{"a", "b"}},
	{name: "pending held", max: 100, in: "a\nincomplete", lines: []string{"a"}},
	{name: "empty lines", max: 100, in: "\n\n", lines: []string{"", ""}},
	{name: "exactly at cap", max: 3, in: "abc\n", lines: []string{"abc"}},
	{name: "at cap with cr", max: 3, in: "abc\r\n", lines: []string{"abc"}},
	{name: "over cap", max: 3, in: "abcd\nok\n", lines: []string{"!1@3/4:abc", "ok"}},
	{name: "over cap with cr", max: 3, in: "abcd\r\nok\n", lines: []string{"!1@3/5:abc", "ok"}},
	{name: "pending over cap", max: 3, in: "ok\nabcde", lines: []string{"ok"}},
	{name: "long line skipped", max: 3, in: "ok\nabcdefghij\nyes\n", lines: []string{"ok", "!1@3/10:abc", "yes"}},
	{name: "utf8 ok", max: 100, in: "héllo €\n", lines: []string{"héllo €"}},
	{name: "invalid utf8", max: 100, in: "a\nb\xffc\nd\n", lines: []string{"a", "!2@1/0:b\xffc", "d"}},
	{name: "invalid utf8 pending", max: 100, in: "b\xff", lines: nil},
	{name: "truncated rune before newline", max: 100, in: "b\xe2\x82\n", lines: []string{"!2@1/0:b\xe2\x82"}},
	{name: "surrogate encoded", max: 100, in: "\xed\xa0\x80\n", lines: []string{"!2@0/0:\xed\xa0\x80"}},
	{name: "first bad byte wins", max: 100, in: "ab\xffc\xfe\n", lines: []string{"!2@2/0:ab\xffc\xfe"}},
	{name: "long and bad", max: 4, in: "\xff2345\nok\n", lines: []string{"!1@4/5:\xff234", "ok"}},
}

func TestFramer(t *testing.T) {
	for _, tt := range framerTests {
		for _, sizes := range [][]int{nil, {0}, {1, 2}, {2, 0, 4}} {
			lines := frameAll(tt.max, []byte(tt.in), sizes)
			if strings.Join(lines, "|") != strings.Join(tt.lines, "|") || len(lines) != len(tt.lines) {
				t.Errorf("%s %v: lines = %q, want %q", tt.name, sizes, lines, tt.lines)
			}
		}
	}
}

// TestFramerSkipsLongLineInBoundedMemory pins that a line far over the
// cap is not buffered: only its prefix is kept, and the big pending
// buffer is let go.
func TestFramerSkipsLongLineInBoundedMemory(t *testing.T) {
	const max = 64 << 10
	f := NewFramer(max)
	head := `{"jsonrpc":"2.0","id":7,"result":"`
	f.Push([]byte(head))
	if l, ff := f.Next(); l != nil || ff != nil {
		t.Fatalf("got %q %v before the line ended", l, ff)
	}
	pad := bytes.Repeat([]byte{'x'}, 32<<10)
	for range 1024 { // 32 MiB
		f.Push(pad)
		if l, ff := f.Next(); l != nil || ff != nil {
			t.Fatalf("got %q %v before the line ended", l, ff)
		}
		if f.Buffered() > max+1 || cap(f.pending) > 2*max {
			t.Fatalf("framer holds %d bytes (cap %d) of a skipped line", f.Buffered(), cap(f.pending))
		}
	}
	f.Push([]byte("\"}\nnext\n"))
	l, ff := f.Next()
	if ff == nil || ff.Kind != LineTooLong || ff.Length != len(head)+1024*len(pad)+2 || len(l) != PrefixBytes || !bytes.HasPrefix(l, []byte(head)) {
		t.Fatalf("long line: %q %+v", l[:min(len(l), 64)], ff)
	}
	if cap(f.pending) > PrefixBytes {
		t.Fatalf("pending buffer of %d bytes kept after a skipped line", cap(f.pending))
	}
	if l, ff := f.Next(); string(l) != "next" || ff != nil {
		t.Fatalf("next line: %q %v", l, ff)
	}
}

// TestFramerZeroCopy pins that a line inside one chunk is not copied.
func TestFramerZeroCopy(t *testing.T) {
	f := NewFramer(0)
	chunk := []byte("abc\n")
	f.Push(chunk)
	line, _ := f.Next()
	if &line[0] != &chunk[0] {
		t.Fatal("line inside a chunk was copied")
	}
}

// FuzzFramer: any chunking of an input yields the same lines and the
// same verdict as the whole input, and the lines agree with a naive
// split on '\n'.
func FuzzFramer(f *testing.F) {
	for _, tt := range framerTests {
		f.Add([]byte(tt.in), []byte{1, 2, 3}, uint8(tt.max))
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte, max uint8) {
		m := int(max%64) + 1
		whole := frameAll(m, in, nil)
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		parts := frameAll(m, in, sizes)
		// Lines, refused ones with their kind, offset and prefix, are
		// emitted in order whatever the chunking.
		if strings.Join(whole, "\x00") != strings.Join(parts, "\x00") || len(whole) != len(parts) {
			t.Fatalf("lines differ: whole %q chunked %q", whole, parts)
		}
		naive := bytes.Split(in, []byte("\n"))
		naive = naive[:len(naive)-1] // the last piece is pending
		if len(naive) != len(whole) {
			t.Fatalf("naive %d lines, framer %d", len(naive), len(whole))
		}
		for i, l := range naive {
			raw := len(l)
			l = bytes.TrimSuffix(l, []byte("\r"))
			switch {
			case len(l) > m:
				want := fmt.Sprintf("!%d@%d/%d:%s", LineTooLong, m, raw, l[:min(m, PrefixBytes)])
				if whole[i] != want {
					t.Fatalf("line %d: %q, want %q", i, whole[i], want)
				}
			case !utf8.Valid(l):
				if !strings.HasPrefix(whole[i], fmt.Sprintf("!%d@", InvalidUTF8)) || !strings.HasSuffix(whole[i], ":"+string(l)) {
					t.Fatalf("line %d: %q, want an InvalidUTF8 fault for %q", i, whole[i], l)
				}
			case string(l) != whole[i]:
				t.Fatalf("line %d: naive %q framer %q", i, l, whole[i])
			}
		}
	})
}
