// Package auditlog holds the plumbing beneath capbridge's audit trail and
// operational log: a writer that batches whole lines into few writes, and
// a rate limit per message so that nobody outside can inflate the log.
package auditlog

import (
	"io"
	"sync"
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
// since its first line, and at Close. After Close it writes through.
//
// Concurrency: Write, Flush and Close may be called by any goroutine; out
// is written by one goroutine at a time, in the order lines were written.
//
// Bounds: at most size bytes plus one line are buffered; one timer exists
// per batch, not per line.
type Batch struct {
	out   io.Writer
	size  int
	delay time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer // armed while buf holds lines, if not closed
	armed  bool
	closed bool
}

// NewBatch returns a Batch writing to out, in batches of about size bytes
// and at most delay after a batch's first line.
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
	if l.closed {
		return l.out.Write(p)
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

func (l *Batch) flushLocked() error {
	if l.armed {
		l.armed = false
		l.timer.Stop()
	}
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.out.Write(l.buf)
	if cap(l.buf) > 2*l.size {
		l.buf = make([]byte, 0, l.size) // one huge line does not stay pinned
	} else {
		l.buf = l.buf[:0]
	}
	return err
}
