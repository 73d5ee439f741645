package bridge

import (
	"context"
	"sync"

	"github.com/capbridge/capbridge/bridge/internal/capserver"
)

// maxIdleWorkers bounds the goroutines a bridge keeps waiting for calls
// between them. A worker's stack has grown through the call path; kept,
// the next call reuses it instead of starting a goroutine and growing a
// new stack frame by frame. Beyond this many idle at once (a burst wider
// than the usual calls in flight) a worker exits after its call, so an
// idle bridge holds at most this many grown stacks whatever its number
// of connections.
const maxIdleWorkers = 64

// workerPool runs the calls of every connection of a bridge on goroutines
// kept between calls. A connection's reader hands each call it admits to
// the pool and goes straight back to reading, so a cancel or the next
// call is read while the call runs, and the reader, which never runs a
// call, keeps the small stack an idle connection should cost.
//
// Calls wait in one queue, oldest first, and a worker takes the oldest
// when it runs, whichever worker was woken for it: calls are taken in the
// order they were read, however the scheduler orders the workers. (Which
// of two calls taken together reaches its server first is still the
// scheduler's: a worker can be preempted between taking its call and
// sending it.) Each call queued wakes an idle worker or starts one, so
// the queue holds at most the calls admitted and not yet started. The
// most recently idle worker is woken first, whose stack is warmest.
//
// Concurrency: run and close may be called from any goroutine; close is
// called once, after the last connection has ended (Shutdown), and waits
// for every worker to exit.
type workerPool struct {
	mu     sync.Mutex
	queue  []job // calls not yet taken, oldest at head
	head   int
	idle   []chan struct{} // each idle worker's wake-up, LIFO, at most maxIdleWorkers
	closed bool
	wg     sync.WaitGroup // every worker
}

// A job is one admitted call and the connection it came on.
type job struct {
	c   *callConn
	ctx context.Context
	m   *capserver.Call
}

// run queues j and wakes an idle worker for it, or starts one if none is
// idle. After close, which comes only once no connection is left to call
// it, it runs j in the calling goroutine, so that no goroutine outlives
// close.
func (p *workerPool) run(j job) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		j.c.run(j.ctx, j.m)
		return
	}
	p.queue = append(p.queue, j)
	if n := len(p.idle); n > 0 {
		wake := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		wake <- struct{}{} // room for one, and it was idle: never waits
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.work(make(chan struct{}, 1))
}

// work is a worker's life: run the oldest call queued while there is one,
// then wait, idle, to be woken, unless the pool has as many idle as it
// keeps or is closed.
func (p *workerPool) work(wake chan struct{}) {
	defer p.wg.Done()
	for {
		if j, ok := p.take(wake); ok {
			j.c.run(j.ctx, j.m)
			continue
		}
		if _, ok := <-wake; !ok {
			return
		}
	}
}

// take returns the oldest call queued, or, with none, puts the worker
// whose wake-up is wake among the idle and reports false; it reports
// false with wake closed when the worker is to exit instead.
func (p *workerPool) take(wake chan struct{}) (job, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.head < len(p.queue) {
		j := p.queue[p.head]
		p.queue[p.head] = job{} // the connection may go while the slot waits
		p.head++
		if p.head == len(p.queue) {
			p.queue, p.head = p.queue[:0], 0
		}
		return j, true
	}
	if p.closed || len(p.idle) >= maxIdleWorkers {
		close(wake)
		return job{}, false
	}
	p.idle = append(p.idle, wake)
	return job{}, false
}

// close ends every idle worker and waits for every worker to exit.
func (p *workerPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, wake := range idle {
		close(wake)
	}
	p.wg.Wait()
}
