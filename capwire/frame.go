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
