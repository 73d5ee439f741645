package mcpwire

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// script is a hand-driven server over the in-memory transport.
type script struct {
	t  *testing.T
	m  *memPeer
	in *bufio.Reader
}

// recv returns the next line the client wrote. The deadline is a
// backstop against a client that never writes; inside a bubble it is on
// the fake clock, so it fires only once everything else is blocked.
func (s *script) recv() string {
	s.t.Helper()
	_ = s.m.Stdin.SetReadDeadline(time.Now().Add(time.Minute))
	line, err := s.in.ReadString('\n')
	if err != nil {
		s.t.Fatalf("server recv: %v", err)
	}
	return line
}

// refuseProbe reads the server/discover probe and answers it as a
// legacy server does (-32601), so the client falls back to initialize.
func (s *script) refuseProbe() {
	s.t.Helper()
	if got := s.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":0,"method":"server/discover",`) {
		s.t.Fatalf("first line is not the discover probe: %q", got)
	}
	s.send(`{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}`)
}

func (s *script) send(line string) {
	s.t.Helper()
	_ = s.m.Stdout.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, err := s.m.Stdout.Write([]byte(line + "\n")); err != nil {
		s.t.Fatalf("server send: %v", err)
	}
}

// connectScripted runs the handshake against a scripted server answering
// version and returns the client plus the exact initialize line it sent.
func connectScripted(t *testing.T, version string, cfg Config) (*Client, *script, string) {
	conn, m := newMemory(time.Second, 0)
	s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
	type res struct {
		c   *Client
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := Connect(context.Background(), conn, cfg)
		done <- res{c, err}
	}()
	s.refuseProbe()
	initLine := s.recv()
	s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"` + version + `","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
	if version == requestedVersion || versionSupported(version) {
		if got := s.recv(); got != `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n" {
			t.Errorf("initialized line = %q", got)
		}
	}
	r := <-done
	if r.err != nil {
		return nil, s, initLine
	}
	return r.c, s, initLine
}

// TestDeclaredCapabilitiesAreEmpty pins the exact initialize request:
// capabilities are {} (no sampling, roots or elicitation), clientInfo is
// the caller's. Widening it must break this test.
func TestDeclaredCapabilitiesAreEmpty(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, initLine := connectScripted(t, requestedVersion, Config{ClientName: "n\"ame", ClientVersion: "9"})
		want := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"n\"ame","version":"9"}}}` + "\n"
		if initLine != want {
			t.Errorf("initialize line\n got %q\nwant %q", initLine, want)
		}
		s.m.End("")
		c.Close()
	})
}

func TestMemoryVersionRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		conn, m := newMemory(time.Second, 0)
		s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
		errc := make(chan error, 1)
		go func() { _, err := Connect(context.Background(), conn, Config{}); errc <- err }()
		s.refuseProbe()
		s.recv()
		s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
		err := <-errc
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Offered != "2026-07-28" || !errors.Is(err, ErrVersion) || !errors.Is(err, ErrDead) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestMemoryWriteTimeout: a server that stops reading its stdin makes
// the write time out, which is death for every caller.
func TestMemoryWriteTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{WriteTimeout: 200 * time.Millisecond})
		defer func() { s.m.End(""); c.Close() }()
		start := time.Now()
		_, err := c.CallTool(context.Background(), "t", JSONArgs(nil), CallOptions{})
		if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), "write to server stdin") {
			t.Fatalf("err = %v", err)
		}
		// The deadline is moved lazily (only when less than WriteTimeout
		// is left, then 1.5 × WriteTimeout ahead), so a stalled write
		// dies between one and one and a half timeouts.
		if took := time.Since(start); took < 200*time.Millisecond || took > 300*time.Millisecond {
			t.Errorf("the write gave up after %v, want between its 200ms timeout and 300ms", took)
		}
		if _, err := c.CallTool(context.Background(), "t", JSONArgs(nil), CallOptions{}); !errors.Is(err, ErrDead) {
			t.Errorf("after death: %v", err)
		}
	})
}

// TestMemoryCancelNotification: a call given up on is cancelled on the
// wire with its id, and its late reply is ignored.
func TestMemoryCancelNotification(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{})
		defer func() { s.m.End(""); c.Close() }()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := c.CallTool(ctx, "t", JSONArgs([]byte(`{"a":1}`)), CallOptions{}); errc <- err }()
		req := s.recv()
		if !strings.Contains(req, `"id":2,"method":"tools/call","params":{"_meta":{"progressToken":2},"name":"t","arguments":{"a":1}}`) {
			t.Errorf("request = %q", req)
		}
		cancel()
		if got := s.recv(); got != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"cancelled"}}`+"\n" {
			t.Errorf("cancel line = %q", got)
		}
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
		s.send(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`) // late: ignored
		go func() {
			_ = s.recv()
			s.send(`{"jsonrpc":"2.0","id":3,"result":{}}`)
		}()
		if err := c.Ping(context.Background()); err != nil {
			t.Errorf("ping after late reply: %v", err)
		}
	})
}

// TestMemoryIdleTimeout: a call nobody answers ends by its idle timeout
// at exactly that instant, and the server is told it timed out.
func TestMemoryIdleTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{})
		defer func() { s.m.End(""); c.Close() }()
		start := time.Now()
		errc := make(chan error, 1)
		go func() {
			_, err := c.CallTool(context.Background(), "hang", JSONArgs(nil), CallOptions{IdleTimeout: 200 * time.Millisecond})
			errc <- err
		}()
		s.recv()
		if got := s.recv(); got != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"timed out"}}`+"\n" {
			t.Errorf("cancel line = %q", got)
		}
		if err := <-errc; !errors.Is(err, ErrTimeout) {
			t.Errorf("err = %v, want ErrTimeout", err)
		}
		if took := time.Since(start); took != 200*time.Millisecond {
			t.Errorf("timed out after %v, want 200ms", took)
		}
	})
}
