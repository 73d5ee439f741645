package sse

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

type want struct {
	typ, data, id string
	retry         int64
}

func collect(t testing.TB, r io.Reader, lim Limits) ([]want, error) {
	t.Helper()
	d := NewDecoder(r, lim)
	var out []want
	for range 10000 {
		ev, err := d.Next()
		if err != nil {
			return out, err
		}
		out = append(out, want{ev.Type, string(ev.Data), ev.ID, ev.Retry})
	}
	t.Fatal("decoder never ended")
	return nil, nil
}

var big = Limits{MaxLine: 1 << 10, MaxEvent: 1 << 12}

// decodeTests are TestDecode's cases, and FuzzDecode's seeds.
var decodeTests = []struct {
	name, in string
	out      []want
}{
	{"one", "data: {}\n\n", []want{{"message", "{}", "", -1}}},
	{"crlf and cr", "data: a\r\n\r\ndata: b\r\rdata: c\n\n", []want{{"message", "a", "", -1}, {"message", "b", "", -1}, {"message", "c", "", -1}}},
	{"multi-line data", "data: a\ndata: b\ndata\n\n", []want{{"message", "a\nb\n", "", -1}}},
	{"no space", "data:x\n\n", []want{{"message", "x", "", -1}}},
	{"two spaces keep one", "data:  x\n\n", []want{{"message", " x", "", -1}}},
	{"event type", "event: endpoint\ndata: /m?s=1\n\n", []want{{"endpoint", "/m?s=1", "", -1}}},
	{"type resets", "event: e\ndata: 1\n\ndata: 2\n\n", []want{{"e", "1", "", -1}, {"message", "2", "", -1}}},
	{"id persists", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []want{{"message", "a", "7", -1}, {"message", "b", "7", -1}, {"message", "c", "", -1}}},
	{"priming event without data", "id: 1\ndata\n\nid: 2\n\n", []want{{"message", "", "1", -1}}},
	{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", []want{{"message", "a", "1", -1}, {"message", "b", "1", -1}}},
	{"retry", "retry: 1500\ndata: a\n\nretry: 1x\ndata: b\n\nretry: 9999999999999\ndata: c\n\n", []want{{"message", "a", "", 1500}, {"message", "b", "", 1500}, {"message", "c", "", 1500}}},
	{"comments and unknown fields", ": keep-alive\nfoo: bar\ndata: a\n\n", []want{{"message", "a", "", -1}}},
	{"bom", "\xEF\xBB\xBFdata: a\n\n", []want{{"message", "a", "", -1}}},
	{"unterminated event dropped", "data: a\n\ndata: b\n", []want{{"message", "a", "", -1}}},
	{"unterminated line dropped", "data: a\n\ndata: b", []want{{"message", "a", "", -1}}},
	{"empty", "", nil},
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeTests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := collect(t, r, big)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("err = %v, want EOF", err)
				}
				if len(got) != len(tc.out) {
					t.Fatalf("got %+v, want %+v", got, tc.out)
				}
				for i := range got {
					if got[i] != tc.out[i] {
						t.Fatalf("event %d = %+v, want %+v", i, got[i], tc.out[i])
					}
				}
			}
		})
	}
}

// faultTests are TestFaults' cases, and FuzzDecode's seeds.
var faultTests = []struct {
	name, in string
	kind     FaultKind
	at       int64 // where the line that went wrong starts
}{
	{"line too long", "data: " + strings.Repeat("x", 2000) + "\n\n", LineTooLong, 0},
	{"line too long without break", ": c\ndata: " + strings.Repeat("x", 2000), LineTooLong, 4},
	{"event too large", strings.Repeat("data: "+strings.Repeat("y", 900)+"\n", 5) + "\n", EventTooLarge, 4 * 907},
	{"invalid utf-8", "data: \xff\n\n", InvalidUTF8, 0},
	{"invalid utf-8 after a comment", ": ok\r\ndata: \xff\n\n", InvalidUTF8, 6},
}

func TestFaults(t *testing.T) {
	for _, tc := range faultTests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				d := NewDecoder(r, big)
				_, err := d.Next()
				var f *Fault
				if !errors.As(err, &f) || f.Kind != tc.kind || f.Offset != tc.at || !errors.Is(err, ErrFault) {
					t.Fatalf("err = %v, want fault kind %d at byte %d", err, tc.kind, tc.at)
				}
				if _, again := d.Next(); again != err {
					t.Fatalf("second Next = %v, want the same fault", again)
				}
			}
		})
	}
}

// A reader that never makes progress ends the stream rather than spin.
func TestNoProgress(t *testing.T) {
	d := NewDecoder(zeroReader{}, big)
	if _, err := d.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// FuzzDecode: total, bounded, and the same events and ending whether
// the stream arrives whole or a byte at a time (a server's SSE comes in
// whatever pieces the network makes).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "id: 1\nretry: 10\ndata\n\n", "\xEF\xBB\xBFevent: endpoint\r\ndata: /x\r\r", ": c\n", "data: a\ndata: b\n\n"} {
		f.Add([]byte(s))
	}
	for _, tc := range decodeTests {
		f.Add([]byte(tc.in))
	}
	for _, tc := range faultTests {
		f.Add([]byte(tc.in))
	}
	lim := Limits{MaxLine: 64, MaxEvent: 128}
	decode := func(t *testing.T, r io.Reader, n int) ([]want, error) {
		d := NewDecoder(r, lim)
		var out []want
		for range n + 2 {
			ev, err := d.Next()
			if err != nil {
				var f *Fault
				if !errors.Is(err, io.EOF) && !errors.As(err, &f) {
					t.Fatalf("untyped error %v", err)
				}
				return out, err
			}
			if len(ev.Data) > lim.MaxEvent {
				t.Fatalf("event of %d bytes past the cap", len(ev.Data))
			}
			out = append(out, want{ev.Type, string(ev.Data), ev.ID, ev.Retry})
		}
		t.Fatal("more events than input bytes")
		return nil, nil
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		whole, werr := decode(t, strings.NewReader(string(b)), len(b))
		bytewise, berr := decode(t, iotest.OneByteReader(strings.NewReader(string(b))), len(b))
		if !slices.Equal(whole, bytewise) || (werr == nil) != (berr == nil) || werr != nil && werr.Error() != berr.Error() {
			t.Fatalf("whole: %+v, %v; a byte at a time: %+v, %v", whole, werr, bytewise, berr)
		}
	})
}
