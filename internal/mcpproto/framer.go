package mcpproto

import (
	"bytes"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
)

// Framer cuts a byte stream into newline-delimited lines. Push hands it a
// chunk; Next then returns the chunk's complete lines one by one. A line
// lying wholly inside a chunk is returned as a sub-slice of the chunk (no
// copy); only a line split across chunks is assembled in the framer's own
// buffer. Returned lines exclude the '\n' and a '\r' before it, and are
// valid until the next Push.
//
// Bounds and faults (each a *FramingFault, and sticky: after one, Next
// returns it forever): a pending or complete line longer than the cap is
// LineTooLong, detected as soon as the pending part passes the cap; bytes
// that are not UTF-8 are InvalidUTF8, detected as soon as they arrive
// except for an incomplete sequence of at most three bytes at the end of
// a chunk, which is held until the next chunk completes or refutes it.
// Work is linear in the input: every byte is searched for '\n' once and
// UTF-8-checked once.
//
// A Framer is owned by one goroutine.
type Framer struct {
	max     int
	pending []byte // start of a line split across chunks
	checked int    // prefix of pending already UTF-8-validated
	chunk   []byte // unread rest of the current chunk
	err     error
}

// NewFramer returns a framer with the given line cap (<= 0 means
// bound.MaxMessage, the same ceiling as a capability frame, so one
// hostile message has one cost everywhere).
func NewFramer(maxLine int) *Framer {
	if maxLine <= 0 {
		maxLine = bound.MaxMessage
	}
	return &Framer{max: maxLine}
}

// Push hands the framer the next chunk of the stream. The caller must
// drain Next (until it returns nil) before pushing again, and must not
// modify chunk until then.
func (f *Framer) Push(chunk []byte) {
	f.chunk = chunk
}

// Next returns the next complete line, or (nil, nil) when the framer
// needs another chunk, or the framing fault.
func (f *Framer) Next() ([]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	if len(f.chunk) == 0 {
		return nil, nil
	}
	i := bytes.IndexByte(f.chunk, '\n')
	if i < 0 {
		// No end of line in this chunk: it all becomes pending.
		// One byte of slack for a '\r' that the next chunk's '\n' may
		// turn into a line ending; without it, where the stream happens
		// to be cut would decide the verdict.
		n := len(f.pending) + len(f.chunk)
		if n > f.max+1 || (n == f.max+1 && f.chunk[len(f.chunk)-1] != '\r') {
			return nil, f.fail(&FramingFault{Kind: LineTooLong, Limit: f.max})
		}
		f.pending = append(f.pending, f.chunk...)
		f.chunk = nil
		return nil, f.checkPending()
	}
	var line []byte
	if len(f.pending) == 0 {
		line = f.chunk[:i]
		if len(line) > f.max+1 {
			return nil, f.fail(&FramingFault{Kind: LineTooLong, Limit: f.max})
		}
		if err := f.checkUTF8(line, 0); err != nil {
			return nil, err
		}
	} else {
		if len(f.pending)+i > f.max+1 {
			return nil, f.fail(&FramingFault{Kind: LineTooLong, Limit: f.max})
		}
		f.pending = append(f.pending, f.chunk[:i]...)
		line = f.pending
		if err := f.checkUTF8(line[f.checked:], f.checked); err != nil {
			return nil, err
		}
		f.pending = f.pending[:0]
		f.checked = 0
	}
	f.chunk = f.chunk[i+1:]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > f.max {
		return nil, f.fail(&FramingFault{Kind: LineTooLong, Limit: f.max})
	}
	return line, nil
}

// checkPending validates the newly pending bytes, holding back an
// incomplete UTF-8 sequence at the very end (the pipe may have cut a
// character in half).
func (f *Framer) checkPending() error {
	p := f.pending
	end := len(p)
	// Back up over at most three bytes to the start of a possibly
	// incomplete final sequence.
	for k := 1; k <= 3 && end-k >= f.checked; k++ {
		c := p[end-k]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[end-k:]) {
				end -= k
			}
			break
		}
	}
	if err := f.checkUTF8(p[f.checked:end], f.checked); err != nil {
		return err
	}
	f.checked = end
	return nil
}

func (f *Framer) checkUTF8(b []byte, base int) error {
	if utf8.Valid(b) {
		return nil
	}
	off := 0
	for off < len(b) {
		r, n := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return f.fail(&FramingFault{Kind: InvalidUTF8, Offset: base + off})
}

func (f *Framer) fail(err *FramingFault) error {
	f.err = err
	f.chunk = nil
	f.pending = nil
	return err
}

// Buffered reports how many bytes of an incomplete line the framer
// holds.
func (f *Framer) Buffered() int { return len(f.pending) }
