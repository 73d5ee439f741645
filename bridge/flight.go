package bridge

import "sync"

// flight is the bridge's one account of the calls it has admitted, from
// either socket. Shutdown closes admission with drain and waits on the
// channel drain returns, which the last call to retire closes: nothing
// polls a count.
//
// Concurrency: every method may be called from any goroutine. One mutex
// guards the count and the draining flag, so a call is either admitted
// before the drain began, and then counted until it retires, or refused.
// Each admitted call retires exactly once.
type flight struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed once draining and n is zero
}

func newFlight() *flight { return &flight{idle: make(chan struct{})} }

// admit counts a new call, or reports false once drain has begun.
func (f *flight) admit() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.n++
	return true
}

// retire uncounts a call that admit counted.
func (f *flight) retire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		panic("bridge: a call retired that was never admitted")
	}
	f.n--
	if f.n == 0 && f.draining {
		close(f.idle)
	}
}

// drain refuses every later admit and returns a channel that is closed
// once every admitted call has retired. It may be called more than once.
func (f *flight) drain() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.draining {
		f.draining = true
		if f.n == 0 {
			close(f.idle)
		}
	}
	return f.idle
}
