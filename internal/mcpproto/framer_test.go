package mcpproto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// frameAll feeds input to a fresh framer in the given chunk sizes
// (cycled) and collects the lines and the fault.
func frameAll(max int, input []byte, sizes []int) ([]string, error) {
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
			line, err := f.Next()
			if err != nil {
				return lines, err
			}
			if line == nil {
				break
			}
			lines = append(lines, string(line))
		}
	}
	return lines, nil
}

var framerTests = []struct {
	name  string
	max   int
	in    string
	lines []string
	fault FramingKind
}{
	{name: "two lines", max: 100, in: "a\nbc\n", lines: []string{"a", "bc"}},
	{name: "crlf", max: 100, in: "a\r\nb\r\n", lines: []string{"a", "b"}},
	{name: "pending held", max: 100, in: "a\nincomplete", lines: []string{"a"}},
	{name: "empty lines", max: 100, in: "\n\n", lines: []string{"", ""}},
	{name: "exactly at cap", max: 3, in: "abc\n", lines: []string{"abc"}},
	{name: "at cap with cr", max: 3, in: "abc\r\n", lines: []string{"abc"}},
	{name: "over cap", max: 3, in: "abcd\n", fault: LineTooLong},
	{name: "pending over cap", max: 3, in: "ok\nabcde", lines: []string{"ok"}, fault: LineTooLong},
	{name: "utf8 ok", max: 100, in: "héllo €\n", lines: []string{"héllo €"}},
	{name: "invalid utf8", max: 100, in: "a\nb\xffc\n", lines: []string{"a"}, fault: InvalidUTF8},
	{name: "invalid utf8 pending", max: 100, in: "b\xff", fault: InvalidUTF8},
	{name: "truncated rune before newline", max: 100, in: "b\xe2\x82\n", fault: InvalidUTF8},
	{name: "surrogate encoded", max: 100, in: "\xed\xa0\x80\n", fault: InvalidUTF8},
}

func TestFramer(t *testing.T) {
	for _, tt := range framerTests {
		for _, sizes := range [][]int{nil, {0}, {1, 2}, {2, 0, 4}} {
			lines, err := frameAll(tt.max, []byte(tt.in), sizes)
			var ff *FramingFault
			if tt.fault != 0 {
				if !errors.As(err, &ff) || ff.Kind != tt.fault {
					t.Errorf("%s %v: err = %v, want kind %d", tt.name, sizes, err, tt.fault)
				}
			} else if err != nil {
				t.Errorf("%s %v: %v", tt.name, sizes, err)
			}
			if strings.Join(lines, "|") != strings.Join(tt.lines, "|") || len(lines) != len(tt.lines) {
				t.Errorf("%s %v: lines = %q, want %q", tt.name, sizes, lines, tt.lines)
			}
		}
	}
}

func TestFramerFaultIsSticky(t *testing.T) {
	f := NewFramer(2)
	f.Push([]byte("abc"))
	_, err1 := f.Next()
	f.Push([]byte("\nok\n"))
	_, err2 := f.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("fault not sticky: %v then %v", err1, err2)
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
		whole, werr := frameAll(m, in, nil)
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		parts, perr := frameAll(m, in, sizes)
		// Lines before a fault are emitted in order whatever the
		// chunking, so the line lists must be identical; which kind of
		// fault is reported may differ when a line has several.
		if strings.Join(whole, "\x00") != strings.Join(parts, "\x00") || len(whole) != len(parts) {
			t.Fatalf("lines differ: whole %q (%v) chunked %q (%v)", whole, werr, parts, perr)
		}
		if (werr == nil) != (perr == nil) {
			t.Fatalf("verdicts differ: whole %v chunked %v", werr, perr)
		}
		if werr == nil {
			naive := bytes.Split(in, []byte("\n"))
			naive = naive[:len(naive)-1] // the last piece is pending
			if len(naive) != len(whole) {
				t.Fatalf("naive %d lines, framer %d", len(naive), len(whole))
			}
			for i, l := range naive {
				if string(bytes.TrimSuffix(l, []byte("\r"))) != whole[i] {
					t.Fatalf("line %d: naive %q framer %q", i, l, whole[i])
				}
			}
		}
	})
}
