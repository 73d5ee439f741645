// Package framewrite writes whole frames to one connection for many
// goroutines, in batches, with a bound on the queue and a deadline on every
// write; it also pools the buffers frames are encoded into. Both ends of
// capwire use it: the Go client (capwire) and the bridge's side
// (internal/capserver).
package framewrite

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// ErrStopped is returned by Send once the Writer has been stopped or a
// write has failed; callers translate it to their own closed-connection
// error.
var ErrStopped = errors.New("framewrite: writer stopped")

// maxPooled bounds the buffers kept for reuse: buffers that grew past it
// are left to the collector so the pool never pins a rare huge frame.
const maxPooled = 2 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// GetBuf returns an empty frame buffer from the pool. Every outgoing frame
// is encoded into one and returned by the Writer once written; the bridge
// also reads calls into them.
func GetBuf() *[]byte { return bufPool.Get().(*[]byte) }

// PutBuf returns b to the pool; b must not be used afterwards.
func PutBuf(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// maxBatch is how many queued frames one write system call may carry
// (writev). Batching is what lets a thousand replies finishing together
// cost a handful of writes instead of a thousand.
const maxBatch = 64

// Writer owns the writing side of a connection: frames are queued by any
// goroutine and written, in queue order, by one goroutine, so writes never
// interleave.
//
// Concurrency: every method may be called by any goroutine at any time.
//
// Bounds: at most queueLen frames wait; every write has a deadline, so a
// peer that stops reading makes a write time out, which ends the Writer
// and closes the connection: no sender waits on a dead peer longer than
// the write timeout plus the time to drain what is ahead of it.
type Writer struct {
	conn    net.Conn
	timeout time.Duration
	queue   chan *[]byte // bounded; frames owned by the writer once queued
	onFail  func(error)  // called once, from run, when a write fails

	vecs net.Buffers // run's scratch for writev, full capacity; only run uses it
	vec  net.Buffers // the batch being written (WriteTo consumes it, so it is a field, not a local that escapes)

	stopOnce sync.Once
	stop     chan struct{} // closed by Stop: flush what is queued, then exit
	done     chan struct{} // closed when run has returned
	err      error         // why run returned early; written before done closes
}

// New starts a Writer for conn with room for queueLen frames, each write
// bounded by timeout. onFail, if not nil, is called once from the writer's
// goroutine when a write fails (after conn is closed). The goroutine exits
// once Stop or Close is called and the queue is flushed, or a write fails;
// the caller keeps ownership of conn otherwise.
func New(conn net.Conn, queueLen int, timeout time.Duration, onFail func(error)) *Writer {
	w := &Writer{
		conn:    conn,
		timeout: timeout,
		queue:   make(chan *[]byte, queueLen),
		onFail:  onFail,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go w.run()
	return w
}

// Send queues a framed buffer (from GetBuf), waiting while the queue is
// full until ctx is done or the Writer has stopped. It takes ownership of
// buf in every case. A nil return means queued, not yet written: a later
// write failure reaches the owner through onFail, Done and Err. Otherwise
// it returns ctx.Err() or ErrStopped.
func (w *Writer) Send(ctx context.Context, buf *[]byte) error {
	select {
	case <-w.stop:
		PutBuf(buf)
		return ErrStopped
	case <-w.done:
		PutBuf(buf)
		return ErrStopped
	default:
	}
	select {
	case w.queue <- buf:
		return nil
	case <-w.stop:
	case <-w.done:
	case <-ctx.Done():
		PutBuf(buf)
		return ctx.Err()
	}
	PutBuf(buf)
	return ErrStopped
}

// TrySend queues buf if there is room now, reporting whether it did. It
// takes ownership of buf either way.
func (w *Writer) TrySend(buf *[]byte) bool {
	select {
	case <-w.stop:
	case <-w.done:
	default:
		select {
		case w.queue <- buf:
			return true
		default:
		}
	}
	PutBuf(buf)
	return false
}

// Stop asks the Writer to write what is queued (within one write timeout
// in all) and exit, without waiting. Later Sends return ErrStopped.
func (w *Writer) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// Close is Stop, then waits for the writer's goroutine to exit.
func (w *Writer) Close() {
	w.Stop()
	<-w.done
}

// Done is closed when the writer's goroutine has exited: after Stop and
// the flush, or after a write failed.
func (w *Writer) Done() <-chan struct{} { return w.done }

// Err is the write failure that stopped the Writer early (a timeout for a
// peer that stopped reading), or nil, including while Done is open.
func (w *Writer) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]*[]byte, 0, maxBatch)
	w.vecs = make(net.Buffers, 0, maxBatch)
	for {
		select {
		case b := <-w.queue:
			batch = append(batch, b)
		case <-w.stop:
			w.flush(batch)
			return
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case b := <-w.queue:
				batch = append(batch, b)
			default:
				break gather
			}
		}
		if err := w.write(batch, time.Now().Add(w.timeout)); err != nil {
			w.failed(err)
			return
		}
		batch = batch[:0]
	}
}

// flush writes everything still queued with one overall deadline.
func (w *Writer) flush(batch []*[]byte) {
	deadline := time.Now().Add(w.timeout)
	for {
		batch = batch[:0]
	gather:
		for len(batch) < maxBatch {
			select {
			case b := <-w.queue:
				batch = append(batch, b)
			default:
				break gather
			}
		}
		if len(batch) == 0 {
			return
		}
		if err := w.write(batch, deadline); err != nil {
			w.failed(err)
			return
		}
	}
}

func (w *Writer) write(batch []*[]byte, deadline time.Time) error {
	w.vec = w.vecs[:0]
	for _, b := range batch {
		w.vec = append(w.vec, *b)
	}
	err := w.conn.SetWriteDeadline(deadline)
	if err == nil {
		_, err = w.vec.WriteTo(w.conn)
	}
	for i, b := range batch {
		PutBuf(b)
		batch[i] = nil
	}
	return err
}

// failed records a write failure, closes the connection so the reading side
// unblocks too, and tells the owner.
func (w *Writer) failed(err error) {
	w.err = err
	w.conn.Close()
	if w.onFail != nil {
		w.onFail(err)
	}
}
