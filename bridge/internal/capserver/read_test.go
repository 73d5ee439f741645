package capserver

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// pipeConn is one server Conn over net.Pipe, inside a synctest bubble,
// past its handshake. client is the test's end.
type pipeConn struct {
	sc     *Conn
	client net.Conn
	cr     *capwire.FrameReader
	got    chan error // the server's first Read result
}

func newPipeConn(t *testing.T, cfg Config) *pipeConn {
	t.Helper()
	srv, client := net.Pipe()
	p := &pipeConn{sc: New(srv, cfg), client: client, cr: capwire.NewFrameReader(client, 0), got: make(chan error, 1)}
	go func() {
		if _, err := p.sc.Handshake(context.Background(), testAuth); err != nil {
			p.got <- err
			return
		}
		_, err := p.sc.Read()
		p.got <- err
	}()
	f, _ := capwire.AppendFrame(nil, &capwire.HelloMsg{V: 1, Token: "good"}, 0)
	if _, err := client.Write(f); err != nil {
		t.Fatal(err)
	}
	if m := p.recv(t); m.Type() != "welcome" {
		t.Fatalf("got %#v, want a welcome", m)
	}
	return p
}

func (p *pipeConn) recv(t *testing.T) capwire.Message {
	t.Helper()
	f, err := p.cr.ReadFrame(nil)
	if err != nil {
		t.Fatalf("reading from the server: %v", err)
	}
	m, err := capwire.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The hello has a cap of its own, far below max_frame: a stranger cannot
// make capbridge hold a 16 MiB first frame.
func TestHelloCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, client := net.Pipe()
		sc := New(srv, Config{})
		done := make(chan error, 1)
		go func() { _, err := sc.Handshake(context.Background(), testAuth); done <- err }()
		// Only the prefix is sent: the length alone is refused.
		go client.Write(prefix(MaxHello + 1))
		f, err := capwire.NewFrameReader(client, 0).ReadFrame(nil)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := capwire.Decode(f)
		if fm, ok := m.(*capwire.FatalMsg); !ok || fm.Code != capwire.CodeFrameTooLarge {
			t.Fatalf("got %#v, want frame_too_large", m)
		}
		var fm *capwire.FatalMsg
		if err := <-done; !errors.As(err, &fm) {
			t.Fatalf("handshake: %v", err)
		}
		client.Close()
	})
}

// A frame that has started must finish within the frame timeout, however
// slowly its bytes trickle; between frames a connection may be quiet.
func TestFrameTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeConn(t, Config{FrameTimeout: 3 * time.Second})
		// Quiet for longer than the frame timeout: nothing happens.
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case err := <-p.got:
			t.Fatalf("an idle connection failed: %v", err)
		default:
		}
		start := time.Now()
		// The prefix and one byte each second: still too slow.
		writer := make(chan struct{})
		go func() {
			defer close(writer)
			if _, err := p.client.Write(prefix(100)); err != nil {
				return
			}
			for {
				time.Sleep(time.Second)
				if _, err := p.client.Write([]byte{0x80}); err != nil {
					return
				}
			}
		}()
		err := <-p.got
		var we *capwire.WireError
		if !errors.As(err, &we) || we.Code != capwire.CodeBadFrame || !we.Fatal {
			t.Fatalf("Read: %v, want a fatal bad_frame", err)
		}
		if took := time.Since(start); took != 3*time.Second {
			t.Fatalf("the frame was cut after %v, want the frame timeout, 3s", took)
		}
		p.sc.Close()
		p.client.Close()
		<-writer
	})
}

// Partial frames share one budget; when it runs out the largest is
// refused (frame_too_large), whichever connection asks, and its charge is
// returned at once. A frame that arrives whole is never charged.
func TestPartialBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 1 << 20
		budget := NewBudget(limit)
		cfg := Config{Budget: budget, FrameTimeout: time.Hour}
		big, small, third := newPipeConn(t, cfg), newPipeConn(t, cfg), newPipeConn(t, cfg)
		// Each announces a length and sends part of it: big 300 KiB of
		// 16 MiB, small 20 KiB of 40 KiB.
		send := func(p *pipeConn, announce uint32, n int) {
			go func() {
				p.client.Write(append(prefix(announce), make([]byte, n)...))
			}()
			synctest.Wait() // the server has read them all and waits for more
		}
		send(big, 16<<20, 300<<10)
		send(small, 40<<10, 20<<10)
		used := budget.Used()
		if used < 320<<10 || used > limit {
			t.Fatalf("charged %d bytes for 320 KiB of partial frames, limit %d", used, limit)
		}
		if n := charged(budget, big.sc.fr); n < 300<<10 || n > 2*(300<<10)+growStep {
			t.Fatalf("big frame charged %d for 300 KiB received: not following the bytes", n)
		}
		// The third frame needs room: the largest, big's, is refused,
		// though big was not the one asking (the bridge then sends the
		// fatal frame).
		send(third, 16<<20, 200<<10)
		var we *capwire.WireError
		if err := <-big.got; !errors.As(err, &we) || we.Code != capwire.CodeFrameTooLarge {
			t.Fatalf("big's Read: %v", err)
		}
		if budget.Refused() != 1 {
			t.Fatalf("refused %d frames, want 1", budget.Refused())
		}
		if got, want := budget.Used(), charged(budget, small.sc.fr)+charged(budget, third.sc.fr); got != want || got > limit {
			t.Fatalf("budget says %d, the survivors hold %d (limit %d)", got, want, limit)
		}
		select {
		case err := <-small.got:
			t.Fatalf("small frame failed: %v", err)
		case err := <-third.got:
			t.Fatalf("third frame failed: %v", err)
		default:
		}
		// A whole frame that arrives in one read is not charged, and a
		// finished partial frame returns its charge.
		before := budget.Used()
		go small.client.Write(make([]byte, 20<<10))
		// Zero bytes are no map: bad_frame, but only once the whole
		// frame was read.
		if err := <-small.got; !errors.As(err, &we) || we.Code != capwire.CodeBadFrame {
			t.Fatalf("small's Read: %v", err)
		}
		if after := budget.Used(); after >= before || after != charged(budget, third.sc.fr) {
			t.Fatalf("after the small frame finished the budget holds %d (before %d)", after, before)
		}
		for _, p := range []*pipeConn{big, small, third} {
			p.sc.Close()
			p.client.Close()
		}
		<-third.got
		if budget.Used() != 0 {
			t.Fatalf("%d bytes still charged after every connection closed", budget.Used())
		}
	})
}

func charged(b *Budget, fr *frameReader) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fr.charged
}

// A connection holds a read-ahead buffer only while bytes it read wait to
// be consumed: one waiting for its peer's next frame holds none. A call
// with a 16 KiB text, sent in one write, is read whole from the buffer,
// and one split across writes is still read whole.
func TestIdleHoldsNoBuffer(t *testing.T) {
	defer leakcheck.Check(t)()
	path, ln := listen(t)
	p := &peer{path: path, ln: ln}
	defer p.stop()
	conns := make(chan net.Conn, 1)
	p.serve(func(c net.Conn) { conns <- c })
	c := dialRaw(t, path)
	defer c.conn.Close()
	var sc *Conn
	select {
	case nc := <-conns:
		sc = New(nc, Config{})
	case <-time.After(waitFor):
		t.Fatal("no connection accepted")
	}
	defer sc.Close()
	if sc.fr.rc == nil {
		t.Fatal("a Unix socket is not read on the raw path")
	}
	done := make(chan error, 1)
	go func() {
		_, err := sc.Handshake(context.Background(), testAuth)
		done <- err
	}()
	c.hello()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 16<<10)
	call := frameOf(m("t", "call", "id", 1, "cap", "mcp.s", "op", "echo", "args", m("text", text)))
	for _, split := range []int{len(call), 3, len(call) - 100} {
		go func() {
			c.conn.Write(call[:split])
			c.conn.Write(call[split:])
		}()
		got, err := sc.Read()
		if err != nil {
			t.Fatalf("split at %d: %v", split, err)
		}
		if cl, ok := got.(*Call); !ok || cl.ID != 1 || !strings.Contains(string(cl.Args), text) {
			t.Fatalf("split at %d: read %#v", split, got)
		}
		got.(*Call).Release()
	}
	// The next Read finds nothing buffered: it gives the buffer back
	// before it waits (here, for a deadline already past).
	if err := sc.conn.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v", err)
	}
	if sc.fr.ahead != nil || sc.fr.buf != nil {
		t.Errorf("a reader waiting for a frame holds a %d-byte buffer", len(sc.fr.buf))
	}
}
