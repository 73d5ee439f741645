// Package framewrite writes whole frames to one connection for many
// goroutines, in batches, with a bound on the queue and a deadline on every
// write; it also pools the buffers frames are encoded into. Writer has a
// goroutine of its own that senders hand frames to; Inline has none: the
// sender that finds the connection idle writes, for itself and for those
// queued behind it. The Go client (capwire) and the bridge's side
// (bridge/internal/capserver) use them.
package framewrite

import (
	"context"
	"errors"
	"net"
	"runtime"
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

// Inline writes whole frames to one connection for many goroutines, like
// Writer, but with no goroutine of its own: a sender that finds the
// connection idle writes its frame itself, and frames sent while it
// writes are queued and written by it, all that are waiting in one writev,
// before it returns (group commit). With one frame at a time in flight
// that is one write system call and no hand-over between goroutines; under
// contention the frames that piled up behind a write cost one more.
//
// Concurrency: every method may be called by any goroutine at any time.
// Send may block its caller for a write (the writer it became) or while
// the queue is full.
//
// Bounds: at most queueLen frames wait. Writes carry a deadline, renewed
// lazily: a write starts with at least three quarters of timeout left
// and at most timeout, so the deadline is set about once per quarter
// timeout rather than once per write. A peer that stops reading makes a
// write time out, which ends the Inline and closes the connection, so no
// sender waits on a dead peer longer than about one timeout per batch
// ahead of it. Once Stop is called, everything still queued must be
// written within one timeout in all.
type Inline struct {
	conn    net.Conn
	timeout time.Duration
	max     int

	mu       sync.Mutex
	queue    []*[]byte     // frames waiting for the current writer
	spare    []*[]byte     // the other of two batch slices; only the writer swaps them
	writing  bool          // a sender is writing and will drain queue before it returns
	room     chan struct{} // made by a sender waiting for room; closed when the queue is taken
	stopped  bool          // Stop was called: no more Sends
	deadline time.Time     // the write deadline set on conn; renewed only while not stopped
	ended    bool          // done is closed (or about to be, by the writer)
	err      error         // why writing ended early; set before done closes
	vec      net.Buffers   // the batch being written, owned by the writer
	vw       vecWriter     // the raw path for conn, or nil: vec.WriteTo

	done chan struct{}
}

// vecWriter writes every byte of a batch of buffers, consuming it.
type vecWriter interface {
	writeVec(bufs [][]byte) error
}

// NewInline returns an Inline for conn with room for queueLen queued
// frames, writes bounded by timeout. It starts nothing. On a failed write
// it closes conn; otherwise the caller keeps ownership of conn. The queue
// grows when frames first wait behind a write, so a connection whose
// writes never overlap (an idle one, a program making one call at a time)
// holds none.
func NewInline(conn net.Conn, queueLen int, timeout time.Duration) *Inline {
	return &Inline{
		conn:    conn,
		timeout: timeout,
		max:     queueLen,
		vw:      newVecWriter(conn),
		done:    make(chan struct{}),
	}
}

// Send writes a framed buffer (from GetBuf), or queues it behind the
// write in progress, waiting while the queue is full until ctx is done or
// the Inline has ended. It takes ownership of buf in every case. A nil
// return means written or queued: a write failure ends the Inline (Done,
// Err) and closes the connection. Otherwise it returns ctx.Err() or
// ErrStopped.
func (w *Inline) Send(ctx context.Context, buf *[]byte) error {
	return w.send(ctx, buf, false)
}

// SendGathering is Send for a sender that knows others are about to send
// (replies to calls answered together): if it takes the writer's role, it
// first yields its processor once, so that senders already runnable
// queue behind it and their frames go out in the same write. With one
// processor, as the bridge runs by default, each of them would otherwise
// find the writer idle and make a write system call of its own, and
// wake the peer once per frame.
func (w *Inline) SendGathering(ctx context.Context, buf *[]byte) error {
	return w.send(ctx, buf, true)
}

func (w *Inline) send(ctx context.Context, buf *[]byte, gather bool) error {
	w.mu.Lock()
	for {
		if w.stopped || w.ended {
			w.mu.Unlock()
			PutBuf(buf)
			return ErrStopped
		}
		if len(w.queue) < w.max {
			break
		}
		if w.room == nil {
			w.room = make(chan struct{})
		}
		room := w.room
		w.mu.Unlock()
		select {
		case <-room:
		case <-w.done:
		case <-ctx.Done():
			PutBuf(buf)
			return ctx.Err()
		}
		w.mu.Lock()
	}
	w.queue = append(w.queue, buf)
	if !w.writing {
		w.writing = true
		if gather {
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
		}
		w.drain()
	}
	w.mu.Unlock()
	return nil
}

// drain writes batches until the queue is empty, then gives up the
// writer's role; if Stop came meanwhile, it ends the Inline. The caller
// holds mu and set writing; drain returns with mu held.
func (w *Inline) drain() {
	for len(w.queue) > 0 && !w.ended {
		batch := w.queue
		w.queue, w.spare = w.spare[:0], nil
		if w.room != nil {
			close(w.room)
			w.room = nil
		}
		stopped := w.stopped
		w.mu.Unlock()
		err := w.write(batch, !stopped)
		w.mu.Lock()
		w.spare = batch[:0]
		if err != nil {
			w.fail(err)
		}
	}
	w.writing = false
	if w.stopped {
		w.end()
	}
}

// write writes batch with writev and returns its buffers to the pool. It
// renews the deadline first when less than three quarters of timeout is
// left (renew is false once stopped: the flush then has Stop's deadline).
func (w *Inline) write(batch []*[]byte, renew bool) error {
	var err error
	if renew {
		if now := time.Now(); w.deadline.Sub(now) < w.timeout-w.timeout/4 {
			w.deadline = now.Add(w.timeout)
			err = w.conn.SetWriteDeadline(w.deadline)
		}
	}
	w.vec = w.vec[:0]
	for _, b := range batch {
		w.vec = append(w.vec, *b)
	}
	if err == nil {
		if w.vw != nil {
			err = w.vw.writeVec(w.vec)
		} else {
			_, err = w.vec.WriteTo(w.conn)
		}
	}
	clear(w.vec)
	for i, b := range batch {
		PutBuf(b)
		batch[i] = nil
	}
	return err
}

// fail records a write failure, drops what is queued and closes the
// connection so the reading side unblocks too. The caller holds mu.
func (w *Inline) fail(err error) {
	w.err = err
	w.conn.Close()
	for i, b := range w.queue {
		PutBuf(b)
		w.queue[i] = nil
	}
	w.queue = w.queue[:0]
	w.end()
}

// end closes done once. The caller holds mu.
func (w *Inline) end() {
	if !w.ended {
		w.ended = true
		close(w.done)
	}
}

// Stop refuses later Sends and bounds the flush of what is queued to one
// timeout from now; it does not wait. If no write is in progress the
// Inline ends at once (nothing can be queued without a writer).
func (w *Inline) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.ended {
		return
	}
	w.stopped = true
	if !w.writing {
		w.end()
		return
	}
	// The writer stops renewing deadlines once it sees stopped; this one
	// bounds the rest of its flush. An error here surfaces as the
	// writer's own write error.
	_ = w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
}

// Close is Stop, then waits until the write in progress, and the flush of
// what was queued behind it, is over.
func (w *Inline) Close() {
	w.Stop()
	<-w.done
}

// Done is closed when the Inline has ended: after Stop and the flush, or
// after a write failed.
func (w *Inline) Done() <-chan struct{} { return w.done }

// Err is the write failure that ended the Inline early (a timeout for a
// peer that stopped reading), or nil, including while Done is open.
func (w *Inline) Err() error {
	select {
	case <-w.done:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.err
	default:
		return nil
	}
}
