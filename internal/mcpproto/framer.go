package mcpproto

import (
	"bytes"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
)

// PrefixBytes is how much of a line longer than the cap the framer keeps:
// enough for the envelope members a server writes before its result
// ("jsonrpc", "id"), so the one call the line answers can be failed,
// and nothing close to the line itself.
const PrefixBytes = 4 << 10

// Framer cuts a byte stream into newline-delimited lines. Push hands it a
// chunk; Next then returns the chunk's complete lines one by one. A line
// lying wholly inside a chunk is returned as a sub-slice of the chunk (no
// copy); only a line split across chunks is assembled in the framer's own
// buffer. Returned lines exclude the '\n' and a '\r' before it, and are
// valid until the next call of Next or Push.
//
// A line that breaks the stdio rule (every line is one UTF-8 message of at
// most the cap) costs that line only: Next returns it with a *FramingFault
// and the stream goes on at the next line. A line over the cap is
// LineTooLong, detected as soon as its pending part passes the cap; from
// then on its bytes are skipped up to its newline, not buffered, and Next
// returns only its first PrefixBytes (or the cap, if smaller). A line with
// bytes that are not UTF-8 is InvalidUTF8, returned whole with the offset
// of the first bad byte; an incomplete sequence of at most three bytes at
// the end of a chunk is held until the next chunk completes or refutes
// it, so where the pipe cuts never changes the verdict. Work is linear in
// the input: every byte is searched for '\n' once and UTF-8-checked at
// most once. Memory is bounded by the cap plus one chunk.
//
// A Framer is owned by one goroutine.
type Framer struct {
	max     int
	pending []byte // start of a line split across chunks; its prefix while skipping
	checked int    // prefix of pending already UTF-8-validated
	bad     int    // offset of the line's first byte that is not UTF-8, or -1
	chunk   []byte // unread rest of the current chunk
	// skipped > 0: the current line passed the cap; it counts the
	// line's bytes seen so far.
	skipped int
}

// NewFramer returns a framer with the given line cap (<= 0 means
// bound.MaxMessage, the same ceiling as a capability frame, so one
// hostile message has one cost everywhere).
func NewFramer(maxLine int) *Framer {
	if maxLine <= 0 {
		maxLine = bound.MaxMessage
	}
	return &Framer{max: maxLine, bad: -1}
}

// Push hands the framer the next chunk of the stream. The caller must
// drain Next (until it returns nil, nil) before pushing again, and must
// not modify chunk until then.
func (f *Framer) Push(chunk []byte) {
	f.chunk = chunk
}

// Next returns the next complete line, or (nil, nil) when the framer
// needs another chunk. A line that breaks the stdio rule comes with its
// fault (see Framer); the line is then its kept prefix (LineTooLong) or
// the whole line (InvalidUTF8).
func (f *Framer) Next() ([]byte, *FramingFault) {
	if len(f.chunk) == 0 {
		return nil, nil
	}
	i := bytes.IndexByte(f.chunk, '\n')
	if f.skipped > 0 {
		if i < 0 {
			f.skipped += len(f.chunk)
			f.chunk = nil
			return nil, nil
		}
		f.skipped += i
		f.chunk = f.chunk[i+1:]
		return f.tooLong(f.pending, f.skipped)
	}
	if i < 0 {
		// No end of line in this chunk: it all becomes pending.
		// One byte of slack for a '\r' that the next chunk's '\n' may
		// turn into a line ending; without it, where the stream happens
		// to be cut would decide the verdict.
		n := len(f.pending) + len(f.chunk)
		if n > f.max+1 || (n == f.max+1 && f.chunk[len(f.chunk)-1] != '\r') {
			f.startSkip(f.chunk)
			f.chunk = nil
			return nil, nil
		}
		f.pending = append(f.pending, f.chunk...)
		f.chunk = nil
		f.checkPending()
		return nil, nil
	}
	var line []byte
	if len(f.pending) == 0 {
		line = f.chunk[:i]
		f.chunk = f.chunk[i+1:]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) > f.max {
			return f.tooLong(line, i)
		}
		f.check(line, 0)
	} else {
		if len(f.pending)+i > f.max+1 {
			f.startSkip(f.chunk[:i])
			f.chunk = f.chunk[i+1:]
			return f.tooLong(f.pending, f.skipped)
		}
		f.pending = append(f.pending, f.chunk[:i]...)
		f.chunk = f.chunk[i+1:]
		line = f.pending
		f.check(line[f.checked:], f.checked)
		f.pending = f.pending[:0]
		f.checked = 0
		if n := len(line); line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) > f.max {
			return f.tooLong(line, len(line))
		}
	}
	if f.bad >= 0 {
		off := f.bad
		f.bad = -1
		return line, &FramingFault{Kind: InvalidUTF8, Offset: off}
	}
	return line, nil
}

// startSkip turns the pending line, whose next bytes are rest, into a
// skipped one: only its prefix is kept, in a buffer of its own, so the
// one that grew toward the cap is let go.
func (f *Framer) startSkip(rest []byte) {
	keep := min(f.max, PrefixBytes)
	p := make([]byte, 0, keep)
	p = append(p, f.pending[:min(len(f.pending), keep)]...)
	p = append(p, rest[:min(len(rest), keep-len(p))]...)
	f.skipped = len(f.pending) + len(rest)
	f.pending = p
}

// tooLong ends a line over the cap: it returns the line's prefix with
// the fault and makes the framer ready for the next line.
func (f *Framer) tooLong(line []byte, length int) ([]byte, *FramingFault) {
	line = line[:min(len(line), f.max, PrefixBytes)]
	f.pending = f.pending[:0]
	f.checked, f.bad, f.skipped = 0, -1, 0
	return line, &FramingFault{Kind: LineTooLong, Limit: f.max, Offset: f.max, Length: length}
}

// checkPending validates the newly pending bytes, holding back an
// incomplete UTF-8 sequence at the very end (the pipe may have cut a
// character in half).
func (f *Framer) checkPending() {
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
	f.check(p[f.checked:end], f.checked)
	f.checked = end
}

// check records the offset of b's first byte that is not UTF-8, unless
// the line already has one: the first is the one reported.
func (f *Framer) check(b []byte, base int) {
	if f.bad >= 0 || utf8.Valid(b) {
		return
	}
	off := 0
	for off < len(b) {
		r, n := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	f.bad = base + off
}

// Buffered reports how many bytes of an incomplete line the framer
// holds.
func (f *Framer) Buffered() int { return len(f.pending) }
