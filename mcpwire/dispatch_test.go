package mcpwire

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// TestMemoryBatch: under 2025-03-26 a batch line is accepted; under any
// other revision the same line is a fault that fails no call, so the call
// runs into its idle timeout — exactly 2 s after it was sent, on the
// bubble's clock.
func TestMemoryBatch(t *testing.T) {
	for _, v := range []string{"2025-03-26", "2025-06-18"} {
		t.Run(v, func(t *testing.T) {
			defer leakcheck.Check(t)()
			inBubble(t, func(t *testing.T) {
				c, s, _ := connectScripted(t, v, Config{CallIdleTimeout: 2 * time.Second})
				defer func() { s.m.End(""); c.Close() }()
				errc := make(chan error, 1)
				start := time.Now()
				go func() { _, err := c.CallTool(context.Background(), "t", JSONArgs(nil), CallOptions{}); errc <- err }()
				s.recv()
				s.send(`[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},{"jsonrpc":"2.0","id":2,"result":{"content":[]}}]`)
				var err error
				if v != "2025-03-26" {
					// The timed-out call is cancelled on the wire; the
					// script must read that line for the client to go on.
					if got := s.recv(); !strings.Contains(got, `"method":"notifications/cancelled","params":{"requestId":2,"reason":"timed out"}`) {
						t.Errorf("after the timeout: %q, want the call cancelled", got)
					}
				}
				err = <-errc
				lines, _ := c.Stray()
				if v == "2025-03-26" {
					if err != nil || lines != 0 {
						t.Errorf("batch: %v, stray %d", err, lines)
					}
					return
				}
				if !errors.Is(err, ErrTimeout) || lines != 1 {
					t.Errorf("batch outside 2025-03-26: %v, stray %d", err, lines)
				}
				if took := time.Since(start); took != 2*time.Second {
					t.Errorf("the call timed out after %v, want its idle timeout of 2s", took)
				}
			})
		})
	}
}

// progressLine is the notification a server sends for the call whose
// progress token is token.
func progressLine(token, n int) string {
	return `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + strconv.Itoa(token) + `,"progress":` + strconv.Itoa(n) + `}}`
}

// TestMemoryProgressExtendsIdle: six progress notifications 150 ms apart
// keep a call with a 400 ms idle timeout alive for 1050 ms, because each
// one resets the idle deadline.
func TestMemoryProgressExtendsIdle(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{})
		defer func() { s.m.End(""); c.Close() }()
		start := time.Now()
		type res struct {
			r   *CallToolResult
			err error
		}
		done := make(chan res, 1)
		go func() {
			r, err := c.CallTool(context.Background(), "p", JSONArgs(nil), CallOptions{IdleTimeout: 400 * time.Millisecond})
			done <- res{r, err}
		}()
		s.recv()
		for i := range 6 {
			time.Sleep(150 * time.Millisecond)
			s.send(progressLine(2, i+1))
		}
		time.Sleep(150 * time.Millisecond)
		s.send(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"done"}]}}`)
		r := <-done
		if r.err != nil || texts(r.r) != "text:done" {
			t.Fatalf("progress with idle reset: %v %v", r.r, r.err)
		}
		if took := time.Since(start); took != 1050*time.Millisecond {
			t.Errorf("the call took %v, want 1050ms", took)
		}
	})
}

// TestMemoryProgressNeverPastMax: the same progress against a 500 ms
// hard maximum ends the call at exactly 500 ms: progress resets the idle
// deadline only up to the maximum, never past it.
func TestMemoryProgressNeverPastMax(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s, _ := connectScripted(t, requestedVersion, Config{})
		defer func() { s.m.End(""); c.Close() }()
		start := time.Now()
		errc := make(chan error, 1)
		go func() {
			_, err := c.CallTool(context.Background(), "p", JSONArgs(nil), CallOptions{IdleTimeout: 400 * time.Millisecond, MaxTimeout: 500 * time.Millisecond})
			errc <- err
		}()
		s.recv()
		// Progress keeps coming every 150 ms until the client gives up
		// and says so; a client that let progress extend the call past
		// its maximum would get the result sent at 3 s instead.
		lines := make(chan string, 1)
		go func() {
			line, _ := s.in.ReadString('\n') // "" once the test ends the peer
			lines <- line
		}()
		var cancelLine string
	progress:
		for i := range 20 {
			select {
			case cancelLine = <-lines:
				break progress
			case <-time.After(150 * time.Millisecond):
				s.send(progressLine(2, i+1))
			}
		}
		if cancelLine == "" {
			s.send(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
		}
		if err := <-errc; !errors.Is(err, ErrTimeout) {
			t.Fatalf("progress past max: %v, want ErrTimeout", err)
		}
		if !strings.Contains(cancelLine, `"requestId":2,"reason":"timed out"`) {
			t.Errorf("after the timeout: %q, want the call cancelled", cancelLine)
		}
		if took := time.Since(start); took != 500*time.Millisecond {
			t.Errorf("the call ended after %v, want its 500ms maximum", took)
		}
	})
}
