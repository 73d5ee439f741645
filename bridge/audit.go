package bridge

import (
	"io"
	"sync"
	"time"
)

// Audit batching bounds: a batch is written once it holds auditBatchBytes,
// or auditBatchDelay after its first line, whichever comes first. At one
// call at a time a line costs a copy instead of a write system call; at
// the delay's end at most that long of lines is waiting, which is what a
// crash (not a Shutdown, which flushes) may lose.
const (
	auditBatchBytes = 64 << 10
	auditBatchDelay = 5 * time.Millisecond
)

// lineBatch is an io.Writer that gathers the lines written to it (each
// Write one whole line or more, as zerolog writes them) and passes them to
// out in batches: when a batch reaches size bytes, when delay has passed
// since its first line, and at Close. After Close it writes through.
//
// Concurrency: Write, Flush and Close may be called by any goroutine; out
// is written by one goroutine at a time, in the order lines were written.
//
// Bounds: at most size bytes plus one line are buffered; one timer exists
// per batch, not per line.
type lineBatch struct {
	out   io.Writer
	size  int
	delay time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer // armed while buf holds lines, if not closed
	armed  bool
	closed bool
}

func newLineBatch(out io.Writer, size int, delay time.Duration) *lineBatch {
	l := &lineBatch{out: out, size: size, delay: delay, buf: make([]byte, 0, size)}
	l.timer = time.AfterFunc(time.Hour, func() { _ = l.Flush() })
	l.timer.Stop()
	return l
}

// Write copies p into the batch (zerolog reuses p), writing the batch out
// once it is full. Its error is the write's when it wrote.
func (l *lineBatch) Write(p []byte) (int, error) {
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
func (l *lineBatch) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

// Close flushes and makes later writes go straight to out.
func (l *lineBatch) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.flushLocked()
}

func (l *lineBatch) flushLocked() error {
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
