package netlimit

import (
	"errors"
	"net"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// At most n connections are accepted at once; closing one lets the next
// in; Close ends a waiting Accept.
func TestListener(t *testing.T) {
	defer leakcheck.Check(t)()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, 2, nil)
	accepted := make(chan net.Conn)
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				ended <- err
				return
			}
			accepted <- c
		}
	}()
	var dialed []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String()) // the backlog takes the third
		if err != nil {
			t.Fatal(err)
		}
		dialed = append(dialed, c)
	}
	first, second := <-accepted, <-accepted
	// The third waits for a slot, not accepted: open counts it only once
	// Accept has returned it.
	if n := l.open.Load(); n != 2 {
		t.Fatalf("%d open, want 2", n)
	}
	first.Close()
	first.Close() // a second Close gives back nothing more
	third := <-accepted
	if n := l.open.Load(); n != 2 {
		t.Fatalf("%d open, want 2", n)
	}
	second.Close()
	third.Close()
	if n := l.open.Load(); n != 0 {
		t.Fatalf("%d open after closing all, want 0", n)
	}
	l.Close()
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	for _, c := range dialed {
		c.Close()
	}
}

// Close ends an Accept that waits for a slot.
func TestCloseWhileFull(t *testing.T) {
	defer leakcheck.Check(t)()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, 1, nil)
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		ended <- err
	}()
	l.Close()
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the waiting Accept: %v", err)
	}
}
