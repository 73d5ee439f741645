package capwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/capbridge/capbridge/internal/bound"
)

// frameLimit turns a configured limit into the one in force: 0 or less
// means bound.MaxMessage, and nothing can exceed what a u32 prefix encodes.
func frameLimit(n int) int {
	switch {
	case n <= 0:
		return bound.MaxMessage
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return n
}

// growStep is how much of a frame is allocated before its bytes arrive.
// Past it the buffer grows only as bytes come in, by at most the size
// already received, so a peer that announces 16 MiB and sends 10 bytes
// makes the reader hold 64 KiB, not 16 MiB (the length is still checked
// against the limit before anything is allocated).
const growStep = 64 << 10

// readBufSize is the FrameReader's read-ahead. Small frames (most calls and
// results) then cost one read system call for prefix and payload together.
const readBufSize = 16 << 10

// FrameReader reads length-prefixed frames: a 4-byte big-endian length N,
// then N bytes of payload, 1 ≤ N ≤ the limit. The Client, the bridge's
// server and the control plane read with it. It is not safe for
// concurrent use: one goroutine owns a connection's reading side.
type FrameReader struct {
	r   *bufio.Reader
	max int
	hdr [4]byte
}

// NewFrameReader reads frames from r, refusing payloads longer than
// maxFrame bytes (0 means bound.MaxMessage, 16 MiB: docs/capwire.md,
// "Frames"). It buffers: bytes after a frame may be read from r ahead of
// time.
func NewFrameReader(r io.Reader, maxFrame int) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, readBufSize), max: frameLimit(maxFrame)}
}

// ReadFrame reads one frame and appends its payload to dst, returning the
// extended slice. At a clean end of stream (no byte of a new frame read)
// it returns io.EOF itself. A zero length, a truncated frame or a length
// above the limit is a fatal *WireError (bad_frame, frame_too_large); any
// other read error is returned wrapped. On error the returned slice holds
// what dst held plus any partial payload; callers should drop it.
func (fr *FrameReader) ReadFrame(dst []byte) ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		switch {
		case err == io.EOF:
			return dst, io.EOF
		case errors.Is(err, io.ErrUnexpectedEOF):
			return dst, badFrame(-1, "stream ended inside a length prefix", err)
		}
		return dst, fmt.Errorf("capwire: reading frame: %w", err)
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	if n == 0 {
		return dst, badFrame(-1, "zero-length frame", nil)
	}
	if uint64(n) > uint64(fr.max) {
		return dst, &WireError{Code: CodeFrameTooLarge, Fatal: true, Offset: -1,
			Msg: "frame of " + strconv.FormatUint(uint64(n), 10) + " bytes exceeds the limit of " + strconv.Itoa(fr.max)}
	}
	start := len(dst)
	want := start + int(n)
	for got := start; got < want; {
		next := min(want, got+max(growStep, got-start))
		if cap(dst) < next {
			dst = slices.Grow(dst[:got], next-got)
		}
		dst = dst[:next]
		if _, err := io.ReadFull(fr.r, dst[got:next]); err != nil {
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
				return dst, badFrame(-1, "stream ended inside a frame of "+strconv.FormatUint(uint64(n), 10)+" bytes", io.ErrUnexpectedEOF)
			}
			return dst, fmt.Errorf("capwire: reading frame: %w", err)
		}
		got = next
	}
	return dst, nil
}

// frameIn cuts frames out of a byte stream handed to it chunk by chunk.
// Unlike FrameReader it never loses a byte to a failed read: a Client's
// reading side passes between goroutines and a read interrupted by a
// deadline resumes exactly where it stopped. A payload read whole into
// the read-ahead is returned in place, valid until the next fill; one
// that spans reads is assembled in a fresh allocation. The same bounds
// as FrameReader hold: the length is checked before anything is
// allocated, and a large frame's buffer grows only as its bytes arrive.
// Owned by the holder of the reading side.
type frameIn struct {
	max  int
	buf  []byte // read-ahead; unread bytes are buf[r:w]
	r, w int
	cur  []byte // the payload being assembled
	want int    // its length; 0 while reading a length prefix
}

func newFrameIn(maxFrame int) *frameIn {
	return &frameIn{max: frameLimit(maxFrame), buf: make([]byte, readBufSize)}
}

// next returns the next complete payload from the bytes read so far, or
// nil when it needs more, or a fatal *WireError. inPlace says the
// payload lies in the read-ahead: the caller must copy what it keeps of
// it before the next fill. Otherwise the payload is the caller's.
func (f *frameIn) next() (p []byte, inPlace bool, err error) {
	if f.want == 0 {
		if f.w-f.r < 4 {
			return nil, false, nil
		}
		n := binary.BigEndian.Uint32(f.buf[f.r:])
		if n == 0 {
			return nil, false, badFrame(-1, "zero-length frame", nil)
		}
		if uint64(n) > uint64(f.max) {
			return nil, false, &WireError{Code: CodeFrameTooLarge, Fatal: true, Offset: -1,
				Msg: "frame of " + strconv.FormatUint(uint64(n), 10) + " bytes exceeds the limit of " + strconv.Itoa(f.max)}
		}
		f.r += 4
		if end := f.r + int(n); end <= f.w {
			p, f.r = f.buf[f.r:end:end], end
			return p, true, nil
		}
		f.want = int(n)
		f.cur = make([]byte, 0, min(f.want, growStep))
	}
	take := min(f.want-len(f.cur), f.w-f.r)
	f.cur = append(f.cur, f.buf[f.r:f.r+take]...) // grows by at most what arrived
	f.r += take
	if len(f.cur) < f.want {
		return nil, false, nil
	}
	p = f.cur
	f.cur, f.want = nil, 0
	return p, false, nil
}

// fill performs one read from r into the read-ahead. Only call it once
// next has returned nil. A clean end of stream (between frames) is
// io.EOF; an end inside a frame is a fatal *WireError; any other error is
// returned as is (a deadline's included: nothing is lost).
func (f *frameIn) fill(r io.Reader) error {
	if f.r == f.w {
		f.r, f.w = 0, 0
	} else if f.w == len(f.buf) {
		f.w = copy(f.buf, f.buf[f.r:f.w])
		f.r = 0
	}
	n, err := r.Read(f.buf[f.w:])
	f.w += n
	if err == io.EOF && (f.want != 0 || f.w > f.r) {
		if n > 0 {
			return nil // the bytes first; the next read reports the end
		}
		return badFrame(-1, "stream ended inside a frame", io.ErrUnexpectedEOF)
	}
	if n > 0 {
		return nil
	}
	return err
}

// preload hands frameIn bytes already read from the stream (what a
// FrameReader buffered past the last frame it returned).
func (f *frameIn) preload(b []byte) {
	f.w = copy(f.buf, b)
	f.r = 0
}
