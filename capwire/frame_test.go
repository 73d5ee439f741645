package capwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/capbridge/capbridge/internal/bound"
)

func prefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func frameOf(payload []byte) []byte { return append(prefix(uint32(len(payload))), payload...) }

var frameCases = []struct {
	name   string
	max    int
	in     []byte
	frames [][]byte
	code   string // "" : the stream ends with io.EOF after frames
}{
	{"one frame", 0, frameOf([]byte{0x80}), [][]byte{{0x80}}, ""},
	{"two frames back to back", 0, append(frameOf([]byte{0x80}), frameOf([]byte("abc"))...), [][]byte{{0x80}, []byte("abc")}, ""},
	{"empty stream", 0, nil, nil, ""},
	{"length 0", 0, prefix(0), nil, CodeBadFrame},
	{"length above the cap", 16, append(prefix(17), make([]byte, 17)...), nil, CodeFrameTooLarge},
	{"length exactly the cap", 16, frameOf(make([]byte, 16)), [][]byte{make([]byte, 16)}, ""},
	{"length 2^32-1", 0, append(prefix(1<<32-1), 1, 2, 3), nil, CodeFrameTooLarge},
	{"length 2^32-1 with the largest cap", 1 << 33, append(prefix(1<<32-1), 1, 2, 3), nil, CodeBadFrame},
	{"truncated prefix", 0, []byte{0, 0}, nil, CodeBadFrame},
	{"truncated payload", 0, append(prefix(10), 1, 2, 3), nil, CodeBadFrame},
	{"good frame then truncated", 0, append(frameOf([]byte{1}), 0, 0, 0), [][]byte{{1}}, CodeBadFrame},
	{"large frame across growth steps", 0, frameOf(bytes.Repeat([]byte("0123456789"), 30_000)), [][]byte{bytes.Repeat([]byte("0123456789"), 30_000)}, ""},
}

// readAll reads frames until an error, returning the frames and the error.
func readAll(r io.Reader, max int) ([][]byte, error) {
	fr := NewFrameReader(r, max)
	var out [][]byte
	for {
		f, err := fr.ReadFrame(nil)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

func TestReadFrame(t *testing.T) {
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			// The same stream whole, and in pieces as a socket may deliver it.
			for _, r := range []io.Reader{bytes.NewReader(tc.in), iotest.HalfReader(bytes.NewReader(tc.in)), iotest.OneByteReader(bytes.NewReader(tc.in))} {
				frames, err := readAll(r, tc.max)
				if len(frames) != len(tc.frames) || (len(frames) > 0 && !reflect.DeepEqual(frames, tc.frames)) {
					t.Fatalf("frames = %d, want %d", len(frames), len(tc.frames))
				}
				if tc.code == "" {
					if err != io.EOF {
						t.Fatalf("err = %v, want io.EOF", err)
					}
					continue
				}
				var we *WireError
				if !errors.As(err, &we) || we.Code != tc.code || !we.Fatal {
					t.Fatalf("err = %v, want fatal %s", err, tc.code)
				}
			}
		})
	}
}

// A peer that announces a 16 MiB frame and sends 10 bytes must not make
// the reader allocate 16 MiB.
func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	in := append(prefix(bound.MaxMessage), make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := NewFrameReader(bytes.NewReader(in), 0).ReadFrame(nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want a truncated frame", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("reading 10 bytes of a 16 MiB frame allocated %d bytes", got)
	}
}

func TestReadFrameAppendsToDst(t *testing.T) {
	dst := make([]byte, 2, 64)
	copy(dst, "ab")
	got, err := NewFrameReader(bytes.NewReader(frameOf([]byte("cd"))), 0).ReadFrame(dst)
	if err != nil || string(got) != "abcd" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, tc := range frameCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1 << 10
		whole, errWhole := readAll(bytes.NewReader(in), max)
		for _, fr := range whole {
			if len(fr) == 0 || len(fr) > max {
				t.Fatalf("frame of %d bytes returned", len(fr))
			}
		}
		var we *WireError
		if errWhole != io.EOF && (!errors.As(errWhole, &we) || !we.Fatal) {
			t.Fatalf("error %v is neither io.EOF nor a fatal WireError", errWhole)
		}
		// Delivery in single bytes must not change the outcome.
		pieces, errPieces := readAll(iotest.OneByteReader(bytes.NewReader(in)), max)
		if !reflect.DeepEqual(whole, pieces) || (errWhole == io.EOF) != (errPieces == io.EOF) {
			t.Fatalf("one-byte reads differ: %d frames %v vs %d frames %v", len(whole), errWhole, len(pieces), errPieces)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, tc := range hostile {
		// The megabyte-deep nestings stay in the unit test: as seeds they
		// would make every mutation megabytes long and starve the fuzzer.
		if len(tc.in) <= 64<<10 {
			f.Add([]byte(tc.in))
		}
	}
	for _, tc := range roundTrips {
		b, _ := appendMessage(nil, tc.msg)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		msg, err := Decode(in)
		if err != nil {
			var we *WireError
			if !errors.As(err, &we) {
				t.Fatalf("Decode error %T is not a *WireError", err)
			}
			// Fatal exactly for the fatal codes; a non-fatal fault always
			// yields a denial that encodes.
			if we.Fatal != IsFatalCode(we.Code) {
				t.Fatalf("code %s with Fatal %v", we.Code, we.Fatal)
			}
			if !we.Fatal {
				if _, err := appendMessage(nil, we.Denial()); err != nil {
					t.Fatalf("denial does not encode: %v", err)
				}
			}
			return
		}
		// What decodes and re-encodes must decode to the same message and
		// re-encode to the same bytes. (Re-encoding may refuse what a newer
		// peer may send: unknown codes and block types.)
		enc, err := appendMessage(nil, msg)
		if err != nil {
			return
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(again), normalize(msg)) {
			t.Fatalf("round trip changed the message:\n%#v\n%#v", again, msg)
		}
		enc2, _ := appendMessage(nil, again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable")
		}
	})
}

// normalize erases differences a round trip may legitimately make: an
// empty Structured is nil, and a structured nil is none.
func normalize(m Message) Message {
	if r, ok := m.(*ResultMsg); ok {
		c := *r
		if len(c.Result.Structured) == 0 || (len(c.Result.Structured) == 1 && c.Result.Structured[0] == 0xc0) {
			c.Result.Structured = nil
		}
		return &c
	}
	return m
}

func TestAppendFramed(t *testing.T) {
	out, err := AppendFramed([]byte("x"), 0, func(b []byte) ([]byte, error) { return append(b, 0x80), nil })
	if err != nil || string(out) != "x\x00\x00\x00\x01\x80" {
		t.Fatalf("AppendFramed = %q, %v", out, err)
	}
	out, err = AppendFramed([]byte("x"), 2, func(b []byte) ([]byte, error) { return append(b, 1, 2, 3), nil })
	if !errors.Is(err, ErrFrameTooLarge) || string(out) != "x" {
		t.Fatalf("over the limit: %q, %v", out, err)
	}
	boom := errors.New("boom")
	out, err = AppendFramed([]byte("x"), 0, func(b []byte) ([]byte, error) { return append(b, 1), boom })
	if err != boom || string(out) != "x" {
		t.Fatalf("body error: %q, %v", out, err)
	}
}

// frameInAll cuts frames out of r with the client's frameIn, as its
// reading side does: next until it needs more, then one fill.
func frameInAll(r io.Reader, max int) ([][]byte, error) {
	f := newFrameIn(max)
	var out [][]byte
	for range 1 << 20 {
		p, inPlace, err := f.next()
		if err != nil {
			return out, err
		}
		if p != nil {
			if inPlace {
				p = bytes.Clone(p) // valid only until the next fill
			}
			out = append(out, p)
			continue
		}
		if err := f.fill(r); err != nil {
			return out, err
		}
	}
	panic("frameIn made no progress")
}

// FuzzFrameIn: the client's frame reader, fed in pieces of any size,
// cuts the same frames as FrameReader and ends the same way: io.EOF
// between frames, a fatal *WireError inside one or for a bad length.
func FuzzFrameIn(f *testing.F) {
	for _, tc := range frameCases {
		f.Add(tc.in, uint8(1))
		f.Add(tc.in, uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, piece uint8) {
		const max = 1 << 10
		want, wantErr := readAll(bytes.NewReader(in), max)
		var r io.Reader = bytes.NewReader(in)
		switch piece {
		case 0: // whole
		case 1:
			r = iotest.OneByteReader(r)
		default:
			r = &pieceReader{r: r, n: int(piece)}
		}
		got, err := frameInAll(r, max)
		var we *WireError
		if err != io.EOF && (!errors.As(err, &we) || !we.Fatal) {
			t.Fatalf("error %v is neither io.EOF nor a fatal WireError", err)
		}
		if !reflect.DeepEqual(got, want) || (err == io.EOF) != (wantErr == io.EOF) {
			t.Fatalf("frameIn: %d frames, %v; FrameReader: %d frames, %v", len(got), err, len(want), wantErr)
		}
	})
}

// pieceReader reads at most n bytes at a time.
type pieceReader struct {
	r io.Reader
	n int
}

func (p *pieceReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }
