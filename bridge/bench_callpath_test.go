package bridge

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/argcheck"
	"github.com/capbridge/capbridge/mcpwire"
)

// echoConn is an in-process MCP server for BenchmarkCallPath: each
// request written to it is answered, at the next Read, with a canned
// line (the initialize result, or a tools/call result of one text
// block), so the benchmark measures the client and the bridge, not a
// pipe or another process. It has SetReadDeadline, so the caller reads
// its own reply as it does over a child's pipe.
type echoConn struct {
	mu       sync.Mutex
	out      []byte
	deadline time.Time
	wake     chan struct{}
	closed   chan struct{}
	once     sync.Once
	result   []byte // `,"result":…}` + "\n", after the id
}

func newEchoConn(text string) *echoConn {
	return &echoConn{
		wake: make(chan struct{}, 1), closed: make(chan struct{}),
		result: []byte(`,"result":{"content":[{"type":"text","text":"` + text + `"}]}}` + "\n"),
	}
}

func (c *echoConn) Write(p []byte) (int, error) {
	i := bytes.Index(p, []byte(`"id":`))
	if i < 0 {
		return len(p), nil // a notification
	}
	j := i + 5
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	c.mu.Lock()
	c.out = append(c.out, `{"jsonrpc":"2.0","id":`...)
	c.out = append(c.out, p[i+5:j]...)
	if bytes.Contains(p, []byte(`"method":"initialize"`)) {
		c.out = append(c.out, `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}}`+"\n"...)
	} else {
		c.out = append(c.out, c.result...)
	}
	c.mu.Unlock()
	c.kick()
	return len(p), nil
}

func (c *echoConn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *echoConn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[:copy(c.out, c.out[n:])]
			c.mu.Unlock()
			return n, nil
		}
		dl := c.deadline
		c.mu.Unlock()
		var expiry <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			expiry = t.C
		}
		select {
		case <-c.wake:
		case <-expiry:
		case <-c.closed:
			return 0, io.EOF
		}
	}
}

func (c *echoConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	c.kick()
	return nil
}

func (c *echoConn) SetWriteDeadline(time.Time) error { return nil }
func (c *echoConn) Done() <-chan struct{}            { return c.closed }
func (c *echoConn) StderrTail() []byte               { return nil }

func (c *echoConn) EndReason() error {
	select {
	case <-c.closed:
		return mcpwire.ErrExited
	default:
		return nil
	}
}

func (c *echoConn) Shutdown() (mcpwire.Exit, error) {
	c.once.Do(func() { close(c.closed) })
	return mcpwire.Exit{How: mcpwire.ExitedOnEOF}, nil
}

// BenchmarkCallPath measures the bridge side of one tools/call whose
// result is one text block of 64 B, 1 KiB and 16 KiB, against an
// in-process server: the arguments converted from MessagePack and sent,
// the arguments checked against the tool's input schema (found by the
// tool's name, as the call path finds it), the result line framed,
// decoded and reduced to the capability result. Everything but the
// server's canned reply is the production code path. 64B_unchecked is
// the same call without the schema check, the baseline its cost is
// measured against in the same run (docs/perf/argcheck.md).
func BenchmarkCallPath(b *testing.B) {
	// {"text": "<64 bytes>"} as MessagePack.
	mp := append([]byte{0x81, 0xa4, 't', 'e', 'x', 't', 0xd9, 64}, strings.Repeat("a", 64)...)
	// The echo tool's schema, as mcptest and most servers declare one.
	schema, err := argcheck.Compile([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	if err != nil {
		b.Fatal(err)
	}
	checks := map[string]*argcheck.Schema{"echo": schema}
	cfg := config.Config{}
	cfg.Bridge.MaxResultText = config.DefaultMaxResultText
	br := &Bridge{cfg: &cfg}
	for _, tc := range []struct {
		name    string
		n       int
		checked bool
	}{{"64B", 64, true}, {"64B_unchecked", 64, false}, {"1024B", 1 << 10, true}, {"16384B", 16 << 10, true}} {
		b.Run(tc.name, func(b *testing.B) {
			text := strings.Repeat("y", tc.n)
			ctx := context.Background()
			c, err := mcpwire.Connect(ctx, newEchoConn(text), mcpwire.Config{Era: mcpwire.EraLegacy})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 0, 4<<10)
			b.ReportAllocs()
			b.SetBytes(int64(tc.n))
			for b.Loop() {
				args, err := callPathArgs(buf[:0], mp)
				if err != nil {
					b.Fatal(err)
				}
				if tc.checked {
					if f := checks["echo"].Check(mp); f != nil {
						b.Fatal(f)
					}
				}
				res, err := c.CallTool(ctx, "echo", args, mcpwire.CallOptions{})
				if err != nil {
					b.Fatal(err)
				}
				o := br.reduce(res)
				if o.result == nil || len(o.result.Content) != 1 || len(o.result.Content[0].Text) != tc.n {
					b.Fatalf("outcome %+v", o)
				}
				o.free() // as a connection's call does once it has replied
			}
		})
	}
}

// BenchmarkCallPathCheck is what the schema check adds to
// BenchmarkCallPath/64B, alone: the tool's schema found by its name and
// the 64-byte call's arguments checked against it, as the call path does.
func BenchmarkCallPathCheck(b *testing.B) {
	mp := append([]byte{0x81, 0xa4, 't', 'e', 'x', 't', 0xd9, 64}, strings.Repeat("a", 64)...)
	schema, err := argcheck.Compile([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	if err != nil {
		b.Fatal(err)
	}
	checks := map[string]*argcheck.Schema{"echo": schema}
	tool := "echo"
	b.ReportAllocs()
	for b.Loop() {
		if f := checks[tool].Check(mp); f != nil {
			b.Fatal(f)
		}
	}
}

// callPathArgs converts the arguments as the bridge's call path does.
func callPathArgs(dst, mp []byte) (mcpwire.Args, error) { return mcpwire.ConvertArgs(dst, mp) }
