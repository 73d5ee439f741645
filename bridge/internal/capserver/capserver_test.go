package capserver

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestHandshakeRefusals(t *testing.T) {
	hello := func(v any, tok any) []byte { return m("t", "hello", "v", v, "token", tok) }
	tests := []struct {
		name  string
		first []byte // a whole frame, prefix included
		auth  func(*capwire.HelloMsg) ([]string, error)
		code  string
		msg   string // a substring of the fatal message
	}{
		{"bad token", frameOf(hello(1, "nope")), testAuth, capwire.CodeBadToken, "not accepted"},
		{"auth's own fatal", frameOf(hello(1, "good")), func(*capwire.HelloMsg) ([]string, error) {
			return nil, &capwire.FatalMsg{Code: capwire.CodeBadToken, Message: "grant revoked"}
		}, capwire.CodeBadToken, "grant revoked"},
		{"version 2", frameOf(hello(2, "good")), testAuth, capwire.CodeUnsupportedVersion, "not 2"},
		{"token not a string", frameOf(hello(1, 7)), testAuth, capwire.CodeBadHello, "/token"},
		{"call first", frameOf(m("t", "call", "id", 1, "cap", "mcp.fs", "op", "x", "args", m())), testAuth, capwire.CodeBadHello, "not a call"},
		{"no type", frameOf(m("v", 1)), testAuth, capwire.CodeBadHello, `"t"`},
		{"not a map", frameOf(arr("hello")), testAuth, capwire.CodeBadFrame, "not a map"},
		{"zero length", prefix(0), testAuth, capwire.CodeBadFrame, "zero-length"},
		{"too large", prefix(bound.MaxMessage + 1), testAuth, capwire.CodeFrameTooLarge, "exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			result := make(chan error, 1)
			path, ln := listen(t)
			p := &peer{path: path, ln: ln}
			p.serve(func(conn net.Conn) {
				s := New(conn, Config{HandshakeTimeout: waitFor})
				defer s.Close()
				_, err := s.Handshake(context.Background(), tc.auth)
				result <- err
			})
			defer p.stop()
			rc := dialRaw(t, path)
			defer rc.conn.Close()
			if _, err := rc.conn.Write(tc.first); err != nil {
				t.Fatal(err)
			}
			msg, err := rc.recv()
			f, ok := msg.(*capwire.FatalMsg)
			if err != nil || !ok || f.Code != tc.code || !strings.Contains(f.Message, tc.msg) {
				t.Fatalf("client got %#v, %v; want fatal %s mentioning %q", msg, err, tc.code, tc.msg)
			}
			if _, err := rc.recv(); err != io.EOF {
				t.Fatalf("after the fatal frame: %v, want EOF", err)
			}
			if err := <-result; !errors.Is(err, &capwire.FatalMsg{Code: tc.code}) {
				t.Fatalf("Handshake returned %v", err)
			}
		})
	}
}

// A client that never sends its hello is cut off when HandshakeTimeout
// runs out, at exactly that instant on the bubble's fake clock (net.Pipe's
// deadlines are bubbled timers).
func TestHandshakeTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	synctest.Test(t, func(t *testing.T) {
		conn, silent := net.Pipe()
		defer silent.Close()
		s := New(conn, Config{HandshakeTimeout: 100 * time.Millisecond})
		defer s.Close()
		start := time.Now()
		_, err := s.Handshake(context.Background(), testAuth)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a silent client: Handshake returned %v", err)
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Errorf("Handshake gave up after %v, want its 100ms timeout", took)
		}
	})
}

// After a non-fatal fault the connection goes on; after a fatal one the
// server says why and closes.
func TestServerReadFaults(t *testing.T) {
	defer leakcheck.Check(t)()
	type event struct {
		msg capwire.Message
		err error
	}
	events := make(chan event, 8)
	path, ln := listen(t)
	p := &peer{path: path, ln: ln}
	p.serve(func(conn net.Conn) {
		s := New(conn, Config{HandshakeTimeout: waitFor})
		defer s.Close()
		if _, err := s.Handshake(context.Background(), testAuth); err != nil {
			t.Errorf("handshake: %v", err)
			return
		}
		for {
			msg, err := s.Read()
			events <- event{msg, err}
			var we *capwire.WireError
			switch {
			case errors.As(err, &we) && !we.Fatal:
				s.Send(context.Background(), we.Denial())
			case errors.As(err, &we):
				s.Fatal(we.Code, we.Msg)
				return
			case err != nil:
				return
			default:
				if c, ok := msg.(*Call); ok {
					s.Send(context.Background(), &capwire.ResultMsg{ID: c.ID, Result: capwire.Result{Content: []capwire.Block{}}})
					c.Release()
				}
			}
		}
	})
	defer p.stop()
	rc := dialRaw(t, path)
	defer rc.conn.Close()
	rc.hello()

	// A malformed call: denied by id, connection lives.
	rc.send(m("t", "call", "cap", "mcp.fs", "op", 5, "args", m(), "id", 77))
	if ev := <-events; ev.err == nil {
		t.Fatalf("malformed call read as %#v", ev.msg)
	}
	msg, err := rc.recv()
	if d, ok := msg.(*capwire.DeniedMsg); err != nil || !ok || d.ID != 77 || d.NoID || d.Denial.Code != capwire.CodeBadRequest || d.Denial.Path != "/op" {
		t.Fatalf("got %#v, %v; want a bad_request denial of call 77 at /op", msg, err)
	}
	// A frame only capbridge may send: bad_request, no id to name.
	rc.sendMsg(&capwire.WelcomeMsg{V: 1, Servers: []string{}})
	<-events
	msg, err = rc.recv()
	if d, ok := msg.(*capwire.DeniedMsg); err != nil || !ok || !d.NoID || d.Denial.Code != capwire.CodeBadRequest {
		t.Fatalf("got %#v, %v; want an id-less bad_request", msg, err)
	}
	// A good call and a cancel still work.
	rc.sendMsg(&capwire.CallMsg{ID: 78, Cap: "mcp.fs", Op: "x", Args: m()})
	if ev := <-events; ev.err != nil || ev.msg.(*Call).ID != 78 {
		t.Fatalf("good call read as %#v, %v", ev.msg, ev.err)
	}
	if msg, err := rc.recv(); err != nil || msg.(*capwire.ResultMsg).ID != 78 {
		t.Fatalf("result: %#v, %v", msg, err)
	}
	rc.sendMsg(&capwire.CancelMsg{ID: 78})
	if ev := <-events; ev.err != nil || ev.msg.(*capwire.CancelMsg).ID != 78 {
		t.Fatalf("cancel read as %#v, %v", ev.msg, ev.err)
	}
	// A zero-length frame: fatal bad_frame, then the connection ends.
	rc.conn.Write(prefix(0))
	<-events
	msg, err = rc.recv()
	if f, ok := msg.(*capwire.FatalMsg); err != nil || !ok || f.Code != capwire.CodeBadFrame {
		t.Fatalf("got %#v, %v; want fatal bad_frame", msg, err)
	}
	if _, err := rc.recv(); err != io.EOF {
		t.Fatalf("after fatal: %v", err)
	}
}

// A client that stops reading cannot stall the server: a Send blocked on a
// full queue returns capwire.ErrClosed once the write deadline passes, and Done
// and Err say why. It runs over net.Pipe in a synctest bubble, where a
// write blocks until the peer reads (no kernel buffer to fill first) and
// the deadline is on the fake clock: it fires at exactly 200 ms.
func TestServerSlowReader(t *testing.T) {
	defer leakcheck.Check(t)()
	synctest.Test(t, func(t *testing.T) {
		conn, client := net.Pipe()
		defer client.Close()
		s := New(conn, Config{WriteQueue: 2, WriteTimeout: 200 * time.Millisecond})
		defer s.Close()
		handshook := make(chan error, 1)
		go func() { _, err := s.Handshake(context.Background(), testAuth); handshook <- err }()
		rc := &rawClient{t: t, conn: client, fr: capwire.NewFrameReader(client, 0)}
		rc.hello() // and then never read again
		if err := <-handshook; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		big := &capwire.ResultMsg{ID: 1, Result: capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: strings.Repeat("x", 1<<20)}}}}
		var err error
		for err == nil {
			err = s.Send(context.Background(), big)
		}
		if !errors.Is(err, capwire.ErrClosed) {
			t.Fatalf("Send to a client that stopped reading: %v, want capwire.ErrClosed", err)
		}
		if took := time.Since(start); took != 200*time.Millisecond {
			t.Errorf("Send gave up after %v, want the 200ms write timeout", took)
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("Done is not closed")
		}
		if !errors.Is(s.Err(), os.ErrDeadlineExceeded) {
			t.Fatalf("Err() = %v, want a write deadline", s.Err())
		}
	})
}

func TestSendTooLarge(t *testing.T) {
	defer leakcheck.Check(t)()
	a, b := net.Pipe()
	defer b.Close()
	s := New(a, Config{MaxFrame: 64})
	defer s.Close()
	big := &capwire.ResultMsg{ID: 1, Result: capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: strings.Repeat("x", 100)}}}}
	if err := s.Send(context.Background(), big); !errors.Is(err, capwire.ErrFrameTooLarge) {
		t.Fatalf("Send of an oversized result: %v", err)
	}
}

// The Go client and this server agree end to end: calls made concurrently
// by a capwire.Client come back to their callers, and a Call's Args survive
// until Release.
func TestWithClient(t *testing.T) {
	defer leakcheck.Check(t)()
	path, ln := listen(t)
	p := &peer{path: path, ln: ln}
	p.serve(func(conn net.Conn) {
		s := New(conn, Config{HandshakeTimeout: waitFor})
		defer s.Close()
		if _, err := s.Handshake(context.Background(), testAuth); err != nil {
			return // the bad-token dial below
		}
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			c := msg.(*Call)
			res := &capwire.ResultMsg{ID: c.ID, Result: capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: c.Op}}, Structured: c.Args}}
			err = s.Send(context.Background(), res)
			c.Release()
			if c.Args != nil {
				t.Error("Release left Args in place")
			}
			if err != nil {
				return
			}
		}
	})
	defer p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := capwire.Dial(ctx, path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			op := "op" + strconv.Itoa(i)
			res, err := c.Call(ctx, "fs", op, map[string]any{"i": i})
			if err != nil {
				t.Error(err)
				return
			}
			var got map[string]int
			if res.Text() != op || res.Decode(&got) != nil || got["i"] != i {
				t.Errorf("call %d got %q, %v", i, res.Text(), got)
			}
		})
	}
	wg.Wait()
	if _, err := capwire.Dial(ctx, path, "bad"); !errors.Is(err, capwire.ErrBadToken) {
		t.Errorf("bad token: %v", err)
	}
}

// A fatal frame is sent whatever its message quotes: text that is not
// UTF-8 is made valid and a long message is cut, so the client learns why
// its connection ended instead of seeing it merely close.
func TestFatalAlwaysEncodes(t *testing.T) {
	defer leakcheck.Check(t)()
	conn, client := net.Pipe()
	defer client.Close()
	s := New(conn, Config{})
	got := make(chan capwire.Message, 1)
	go func() {
		rc := &rawClient{t: t, conn: client, fr: capwire.NewFrameReader(client, 0)}
		m, _ := rc.recv()
		got <- m
	}()
	if err := s.Fatal(capwire.CodeBadFrame, "bad key \"k\xc3\" "+strings.Repeat("x", 4096)); err != nil {
		t.Fatal(err)
	}
	f, ok := (<-got).(*capwire.FatalMsg)
	if !ok || f.Code != capwire.CodeBadFrame || !strings.HasPrefix(f.Message, "bad key \"k\uFFFD\" xxx") || len(f.Message) > maxFatalMessage+len("…") {
		t.Fatalf("fatal frame = %+v", f)
	}
}
