// Package auditlog holds the plumbing beneath capbridge's audit trail and
// operational log: a writer that batches whole lines into few writes and
// knows when they could not be written, and a rate limit per message so
// that nobody outside can inflate the log.
package auditlog

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Audit batching bounds: a batch is written once it holds BatchBytes, or
// BatchDelay after its first line, whichever comes first. At one call at
// a time a line costs a copy instead of a write system call; at the
// delay's end at most that long of lines is waiting, which is what a
// crash (not a Close, which flushes) may lose.
const (
	BatchBytes = 64 << 10
	BatchDelay = 5 * time.Millisecond
)

// Batch is an io.Writer that gathers the lines written to it (each
// Write one whole line or more, as zerolog writes them) and passes them to
// out in batches: when a batch reaches size bytes, when delay has passed
// since its first line, and at Close. After Close, or when size is 0, it
// writes through, one Write per line.
//
// A write to out that fails loses its lines: Batch counts them (Lost),
// reports them to the OnLost hook, and is Broken until a later write
// succeeds. A write that failed part way left a partial line in out; the
// next write starts with a newline, so every line that follows is whole.
//
// Concurrency: Write, Flush, Swap and Close may be called by any
// goroutine; out is written by one goroutine at a time, in the order lines
// were written. Broken and Lost may be called at any time and cost an
// atomic load.
//
// Bounds: at most size bytes plus one line are buffered; one timer exists
// per batch, not per line.
type Batch struct {
	size  int
	delay time.Duration
	// OnLost, when set before the first Write, hears of every write that
	// failed: how many lines it lost and why. It is called with the
	// batch's lock held, so it must not write to the batch.
	OnLost func(lines int, err error)

	broken atomic.Bool
	lost   atomic.Int64

	mu      sync.Mutex
	out     io.Writer
	buf     []byte
	timer   *time.Timer // armed while buf holds lines, if not closed
	armed   bool
	closed  bool
	partial bool // the last write to out ended inside a line
}

// NewBatch returns a Batch writing to out, in batches of about size bytes
// and at most delay after a batch's first line; size 0 writes each line
// through.
func NewBatch(out io.Writer, size int, delay time.Duration) *Batch {
	l := &Batch{out: out, size: size, delay: delay, buf: make([]byte, 0, size)}
	l.timer = time.AfterFunc(time.Hour, func() { _ = l.Flush() })
	l.timer.Stop()
	return l
}

// Write copies p into the batch (zerolog reuses p), writing the batch out
// once it is full. Its error is the write's when it wrote.
func (l *Batch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.size == 0 {
		return len(p), l.writeOut(p)
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) >= l.size {
		return len(p), l.flushLocked()
	}
	if !l.armed {
		l.armed = true
		l.timer.Reset(l.delay)
	}
	return len(p), nil
}

// Flush writes out what is buffered.
func (l *Batch) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

// Close flushes and makes later writes go straight to out.
func (l *Batch) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.flushLocked()
}

// Swap flushes what is buffered to the current out, then makes w the
// out, and returns the one it replaces, for the caller to close: how a
// reopened file (after logrotate renamed the old one) takes over without
// a line lost or split between the two. The new out starts afresh: no
// partial line of the old one is ended in it.
func (l *Batch) Swap(w io.Writer) (old io.Writer, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err = l.flushLocked()
	old, l.out, l.partial = l.out, w, false
	return old, err
}

// Broken reports whether the last write to out failed.
func (l *Batch) Broken() bool { return l.broken.Load() }

// Lost counts the lines writes to out have lost.
func (l *Batch) Lost() int64 { return l.lost.Load() }

func (l *Batch) flushLocked() error {
	if l.armed {
		l.armed = false
		l.timer.Stop()
	}
	if len(l.buf) == 0 {
		return nil
	}
	err := l.writeOut(l.buf)
	if cap(l.buf) > 2*l.size {
		l.buf = make([]byte, 0, l.size) // one huge line does not stay pinned
	} else {
		l.buf = l.buf[:0]
	}
	return err
}

// writeOut writes whole lines p to out, and accounts for what a failure
// loses. The caller holds mu.
func (l *Batch) writeOut(p []byte) error {
	if l.partial {
		// End the line a failed write cut off, so the lines that follow
		// are read as lines.
		if _, err := l.out.Write([]byte{'\n'}); err != nil {
			return l.failed(p, 0, err)
		}
		l.partial = false
	}
	n, err := l.out.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return l.failed(p, n, err)
	}
	l.broken.Store(false)
	return nil
}

// failed records a write of p that wrote n bytes and failed with err:
// the lines it did not finish are lost.
func (l *Batch) failed(p []byte, n int, err error) error {
	n = max(0, min(n, len(p)))
	lines := bytes.Count(p[n:], []byte{'\n'})
	if n > 0 && p[n-1] != '\n' {
		l.partial = true
	}
	if lines == 0 {
		lines = 1 // a line without its newline is a line too
	}
	l.lost.Add(int64(lines))
	l.broken.Store(true)
	if l.OnLost != nil {
		l.OnLost(lines, err)
	}
	return err
}
