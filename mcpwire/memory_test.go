package mcpwire

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/leakcheck"
)

// script is a hand-driven server over the in-memory transport.
type script struct {
	t  *testing.T
	m  *memPeer
	in *bufio.Reader
}

func (s *script) recv() string {
	s.t.Helper()
	_ = s.m.Stdin.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := s.in.ReadString('\n')
	if err != nil {
		s.t.Fatalf("server recv: %v", err)
	}
	return line
}

func (s *script) send(line string) {
	s.t.Helper()
	_ = s.m.Stdout.SetWriteDeadline(time.Now().Add(10 * time.Second))
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
	c, s, initLine := connectScripted(t, requestedVersion, Config{ClientName: "n\"ame", ClientVersion: "9"})
	want := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"n\"ame","version":"9"}}}` + "\n"
	if initLine != want {
		t.Errorf("initialize line\n got %q\nwant %q", initLine, want)
	}
	s.m.End("")
	c.Close()
}

func TestMemoryVersionRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	conn, m := newMemory(time.Second, 0)
	s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
	errc := make(chan error, 1)
	go func() { _, err := Connect(context.Background(), conn, Config{}); errc <- err }()
	s.recv()
	s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
	err := <-errc
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Offered != "2026-07-28" || !errors.Is(err, ErrVersion) || !errors.Is(err, ErrDead) {
		t.Fatalf("err = %v", err)
	}
}

// TestMemoryBatch: under 2025-03-26 a batch line is accepted; under any
// other revision the same line is a fault that fails no call.
func TestMemoryBatch(t *testing.T) {
	for _, v := range []string{"2025-03-26", "2025-06-18"} {
		t.Run(v, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c, s, _ := connectScripted(t, v, Config{CallIdleTimeout: 2 * time.Second})
			defer func() { s.m.End(""); c.Close() }()
			errc := make(chan error, 1)
			go func() { _, err := c.CallTool(context.Background(), "t", nil, CallOptions{}); errc <- err }()
			s.recv()
			s.send(`[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},{"jsonrpc":"2.0","id":2,"result":{"content":[]}}]`)
			err := <-errc
			lines, _ := c.Stray()
			if v == "2025-03-26" {
				if err != nil || lines != 0 {
					t.Errorf("batch: %v, stray %d", err, lines)
				}
			} else if !errors.Is(err, ErrTimeout) || lines != 1 {
				t.Errorf("batch outside 2025-03-26: %v, stray %d", err, lines)
			}
		})
	}
}

// TestMemoryWriteTimeout: a server that stops reading its stdin makes
// the write time out, which is death for every caller.
func TestMemoryWriteTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	c, s, _ := connectScripted(t, requestedVersion, Config{WriteTimeout: 200 * time.Millisecond})
	defer func() { s.m.End(""); c.Close() }()
	_, err := c.CallTool(context.Background(), "t", nil, CallOptions{})
	if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), "write to server stdin") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.CallTool(context.Background(), "t", nil, CallOptions{}); !errors.Is(err, ErrDead) {
		t.Errorf("after death: %v", err)
	}
}

// TestMemoryCancelNotification: a call given up on is cancelled on the
// wire with its id, and its late reply is ignored.
func TestMemoryCancelNotification(t *testing.T) {
	defer leakcheck.Check(t)()
	c, s, _ := connectScripted(t, requestedVersion, Config{})
	defer func() { s.m.End(""); c.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.CallTool(ctx, "t", []byte(`{"a":1}`), CallOptions{}); errc <- err }()
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
}
