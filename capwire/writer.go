package capwire

import (
	"context"
	"net"
	"sync"
	"time"
)

// maxBatch is how many queued frames one write system call may carry
// (writev). Batching is what lets a thousand replies finishing together
// cost a handful of writes instead of a thousand.
const maxBatch = 64

// writer owns the writing side of a connection: frames are queued by any
// goroutine and written, in queue order, by one goroutine, so writes never
// interleave. The queue is bounded and every write has a deadline: a peer
// that stops reading makes a write time out, and that ends the connection,
// so no sender waits on a dead peer longer than the write timeout plus the
// time to drain what is ahead of it (issue 5: "a client that stops reading
// cannot stall anyone").
type writer struct {
	conn    net.Conn
	timeout time.Duration
	queue   chan *[]byte // bounded; frames owned by the writer once queued
	onFail  func(error)  // called once, from run, when a write fails

	vecs net.Buffers // run's scratch for writev, full capacity; only run uses it
	vec  net.Buffers // the batch being written (WriteTo consumes it, so it is a field, not a local that escapes)

	stopOnce sync.Once
	stop     chan struct{} // closed by close: flush what is queued, then exit
	done     chan struct{} // closed when run has returned
	err      error         // why run returned early; written before done closes
}

func newWriter(conn net.Conn, queueLen int, timeout time.Duration, onFail func(error)) *writer {
	w := &writer{
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

// send queues a framed buffer, waiting while the queue is full until ctx
// is done or the writer has stopped. It takes ownership of buf in every
// case. A nil return means queued, not yet written: a later write failure
// reaches the owner through onFail.
func (w *writer) send(ctx context.Context, buf *[]byte) error {
	select {
	case <-w.stop:
		putBuf(buf)
		return ErrClosed
	case <-w.done:
		putBuf(buf)
		return ErrClosed
	default:
	}
	select {
	case w.queue <- buf:
		return nil
	case <-w.stop:
	case <-w.done:
	case <-ctx.Done():
		putBuf(buf)
		return ctx.Err()
	}
	putBuf(buf)
	return ErrClosed
}

// trySend queues buf if there is room now, reporting whether it did. It
// takes ownership of buf either way.
func (w *writer) trySend(buf *[]byte) bool {
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
	putBuf(buf)
	return false
}

// close asks run to write what is queued (within one write timeout in
// all) and exit, and waits for it. Safe to call more than once and
// concurrently.
func (w *writer) close() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

func (w *writer) run() {
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
func (w *writer) flush(batch []*[]byte) {
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

func (w *writer) write(batch []*[]byte, deadline time.Time) error {
	w.vec = w.vecs[:0]
	for _, b := range batch {
		w.vec = append(w.vec, *b)
	}
	err := w.conn.SetWriteDeadline(deadline)
	if err == nil {
		_, err = w.vec.WriteTo(w.conn)
	}
	for i, b := range batch {
		putBuf(b)
		batch[i] = nil
	}
	return err
}

// failed records a write failure, closes the connection so the reading side
// unblocks too, and tells the owner.
func (w *writer) failed(err error) {
	w.err = err
	w.conn.Close()
	if w.onFail != nil {
		w.onFail(err)
	}
}
