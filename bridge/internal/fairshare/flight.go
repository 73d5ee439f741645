package fairshare

import "sync"

// Flight is one account of the calls admitted to a service, from
// wherever they come. A shutdown closes admission with Drain and waits on
// the channel Drain returns, which the last call to retire closes:
// nothing polls a count.
//
// Concurrency: every method may be called from any goroutine. One mutex
// guards the count and the draining flag, so a call is either admitted
// before the drain began, and then counted until it retires, or refused.
// Each admitted call retires exactly once.
type Flight struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed once draining and n is zero
}

// NewFlight returns an account with no call in flight.
func NewFlight() *Flight { return &Flight{idle: make(chan struct{})} }

// Admit counts a new call, or reports false once Drain has begun.
func (f *Flight) Admit() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.n++
	return true
}

// Retire uncounts a call that Admit counted. Retiring a call that was
// never admitted is a defect in the caller, and panics.
func (f *Flight) Retire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		panic("fairshare: a call retired that was never admitted")
	}
	f.n--
	if f.n == 0 && f.draining {
		close(f.idle)
	}
}

// Drain refuses every later Admit and returns a channel that is closed
// once every admitted call has retired. It may be called more than once.
func (f *Flight) Drain() <-chan struct{} {
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

// Draining reports whether Drain has been called.
func (f *Flight) Draining() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining
}

// InFlight is the number of calls admitted and not yet retired.
func (f *Flight) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}
