// Package netlimit bounds how many connections a listener holds open at
// once.
package netlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener accepts at most n connections at once: Accept waits while n
// are open, leaving further ones in the kernel's backlog, where they
// cost the process no descriptor. A connection gives its slot back when
// closed. Its methods may be called concurrently; Close makes a waiting
// Accept return net.ErrClosed.
type Listener struct {
	net.Listener
	slots chan struct{}
	open  *atomic.Int64
	done  chan struct{} // closed by Close
	once  sync.Once
}

// New bounds l to n open connections; open, when not nil, counts them.
func New(l net.Listener, n int, open *atomic.Int64) *Listener {
	if open == nil {
		open = new(atomic.Int64)
	}
	return &Listener{Listener: l, slots: make(chan struct{}, n), open: open, done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Add(1)
	return &conn{Conn: c, l: l}, nil
}

// Close closes the listener; connections accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn gives its slot back when closed, once.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
