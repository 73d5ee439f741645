package mcpwire

import "sync"

// asides runs a carrier's posts that no caller waits for (cancellations,
// answers to the server's requests), each on a goroutine of its own, so
// that a server that does not take them holds no call: at most
// maxAsidePosts at once (more are dropped: both kinds are advisory), and
// none once closed. The carrier's shutdown closes it, ends the posts
// (their context is the client's life) and waits for them.
//
// Concurrency: every method may be called from any goroutine; mu guards
// the count and closed, so that no post starts once wait may run.
type asides struct {
	mu     sync.Mutex
	n      int
	closed bool
	wg     sync.WaitGroup
}

// run starts post, the message o, or drops it, saying so to c's log,
// when closed or too many are running.
func (a *asides) run(c *Client, o outbound, post func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.n == maxAsidePosts {
		c.log.Debug().Str("method", o.method).Msg("mcpwire: a post no caller waits for dropped (closing, or too many in flight)")
		return
	}
	a.n++
	a.wg.Go(func() {
		post()
		a.mu.Lock()
		a.n--
		a.mu.Unlock()
	})
}

// close refuses every later run.
func (a *asides) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

// wait waits for the posts running; close must have been called.
func (a *asides) wait() { a.wg.Wait() }
