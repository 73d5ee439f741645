package mcpwire

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// wantMalformed checks that err fails one call with a
// *MalformedResultError whose reason holds reason.
func wantMalformed(t *testing.T, err error, reason string) *MalformedResultError {
	t.Helper()
	var me *MalformedResultError
	if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrProtocol) || errors.Is(err, ErrDead) {
		t.Fatalf("err = %v, want a *MalformedResultError", err)
	}
	if !strings.Contains(me.Reason, reason) {
		t.Fatalf("reason %q lacks %q", me.Reason, reason)
	}
	return me
}

// TestChildBadLineCostsOneCall: each kind of unusable response line from
// a real server fails only the call it answers, with a typed error; a
// call in flight alongside is untouched, the next call succeeds, and the
// line is not counted as noise.
func TestChildBadLineCostsOneCall(t *testing.T) {
	for _, tt := range []struct {
		name, tool, args, reason string
		offset                   int // -1: not pinned
	}{
		{name: "bad utf8", tool: "bad_utf8", reason: "invalid UTF-8", offset: -1},
		{name: "NaN", tool: "nan_result", reason: "invalid character", offset: -1},
		{name: "too deep", tool: "deep_result", args: `{"depth":600}`, reason: "nesting", offset: -1},
		{name: "line over the cap", tool: "long_line", args: `{"bytes":1000000}`, reason: "longer than 65536", offset: 65536},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c, hangSent := startWatched(t, mcptest.Scenario{}, Config{MaxLineBytes: 65536, MaxStrayBytes: 1024}, "hang")
			ctx, cancel := context.WithCancel(context.Background())
			hung := make(chan error, 1)
			go func() { _, err := c.CallTool(ctx, "hang", JSONArgs(nil), CallOptions{}); hung <- err }()
			select {
			case <-hangSent:
			case <-time.After(waitFor):
				t.Fatal("the hang request was never written")
			}
			_, err := callT(t, c, tt.tool, tt.args, CallOptions{})
			me := wantMalformed(t, err, tt.reason)
			if tt.offset >= 0 && me.Offset != tt.offset {
				t.Errorf("offset %d, want %d", me.Offset, tt.offset)
			}
			r, err := callT(t, c, "echo", `{"text":"after"}`, CallOptions{})
			if err != nil || texts(r) != "text:after" {
				t.Fatalf("call after the bad line: %v, %v", r, err)
			}
			if lines, _ := c.Stray(); lines != 0 || c.Err() != nil {
				t.Errorf("stray lines %d, dead %v", lines, c.Err())
			}
			select {
			case err := <-hung:
				t.Fatalf("the call in flight ended: %v", err)
			default:
			}
			cancel()
			if err := <-hung; !errors.Is(err, context.Canceled) {
				t.Errorf("hang: %v", err)
			}
			closeClean(t, c)
		})
	}
}

// TestMemoryBadLines drives the cases a real server cannot be made to
// produce on cue, on the fake clock: every failure is immediate (no time
// passes), never the call's timeout.
func TestMemoryBadLines(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	long := strings.Repeat("x", 2000)
	for _, tt := range []struct {
		name, line string // the answer to call 2, %ID% absent: the id is fixed
		reason     string // "" : the line is stray, and the call times out
		offset     int
	}{
		{name: "late syntax error", line: `{"jsonrpc":"2.0","id":2,"result":{"content":[}`, reason: "invalid character", offset: 45},
		{name: "id after a NaN result", line: `{"result":{"x":NaN},"jsonrpc":"2.0","id":2}`, reason: "invalid character", offset: 15},
		{name: "id after a deep result", line: `{"result":{"x":` + deep + `},"jsonrpc":"2.0","id":2}`, reason: "nesting"},
		{name: "bad utf8 before the id", line: "{\"result\":{\"t\":\"\xc3\"},\"jsonrpc\":\"2.0\",\"id\":2}", reason: "invalid UTF-8", offset: 16},
		{name: "long line, id first", line: `{"jsonrpc":"2.0","id":2,"result":{"t":"` + long + `"}}`, reason: "longer than 1024", offset: 1024},
		// Only a prefix of a long line is kept: an id after the
		// result cannot be read, so the line is noise.
		{name: "long line, id last", line: `{"result":{"t":"` + long + `"},"jsonrpc":"2.0","id":2}`},
		{name: "a request is not a response", line: `{"jsonrpc":"2.0","id":2,"method":"x","params":{"a":NaN}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			inBubble(t, func(t *testing.T) {
				c, s, _ := connectScripted(t, requestedVersion, Config{MaxLineBytes: 1024})
				defer func() { s.m.End(""); c.Close() }()
				start := time.Now()
				errc := make(chan error, 1)
				go func() {
					_, err := c.CallTool(context.Background(), "t", JSONArgs(nil), CallOptions{IdleTimeout: time.Second})
					errc <- err
				}()
				s.recv()
				s.send(tt.line)
				if tt.reason == "" {
					s.recv() // notifications/cancelled
					if err := <-errc; !errors.Is(err, ErrTimeout) {
						t.Fatalf("err = %v, want ErrTimeout", err)
					}
					if lines, _ := c.Stray(); lines != 1 {
						t.Errorf("stray lines %d, want 1", lines)
					}
				} else {
					me := wantMalformed(t, <-errc, tt.reason)
					if tt.offset != 0 && me.Offset != tt.offset {
						t.Errorf("offset %d, want %d", me.Offset, tt.offset)
					}
					if me.ID != 2 {
						t.Errorf("id %d", me.ID)
					}
					if took := time.Since(start); took != 0 {
						t.Errorf("failed after %v, want at once", took)
					}
				}
				go func() {
					for {
						l := s.recv()
						if strings.Contains(l, `"method":"ping"`) {
							s.send(`{"jsonrpc":"2.0","id":3,"result":{}}`)
							return
						}
					}
				}()
				if err := c.Ping(context.Background()); err != nil {
					t.Fatalf("ping after the bad line: %v", err)
				}
			})
		})
	}
}
