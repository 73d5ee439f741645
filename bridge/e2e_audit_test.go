package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// counter reads one series of the bridge's metrics, 0 when absent.
func (tb *testBridge) counter(series string) float64 {
	var b strings.Builder
	tb.WriteMetrics(&b)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(b.String())
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// A program cannot write its own text into the audit trail, nor fill the
// disk through it: server and tool names it makes up are clipped (a call
// naming a 256 KiB tool of a 256 KiB server costs the trail a few
// hundred bytes), and a grant's lines stop at its audit budget, after
// which, under audit_fail closed, its calls are refused, every line it
// lost counted. Under open, its calls are served and the lines counted.
func TestAuditCannotBeFlooded(t *testing.T) {
	for _, mode := range []string{config.AuditFailClosed, config.AuditFailOpen} {
		t.Run(mode, func(t *testing.T) {
			defer leakcheck.Check(t)()
			var sink lockedBuffer
			log := zerolog.New(&sink)
			const budget = 64 << 10
			tb := startBridgeOpts(t, Options{Log: zerolog.Nop(), Audit: log}, func(c *config.Config) {
				c.Bridge.AuditFail, c.Bridge.AuditGrantBudget = mode, budget
			}, mcptestServer("t", mcptest.Scenario{}))
			c := tb.dial(tb.grant(map[string][]string{"t": nil}))
			ctx, cancel := context.WithTimeout(context.Background(), backstop)
			defer cancel()

			huge := strings.Repeat("A", 256<<10)
			for range 8 {
				if _, err := c.Call(ctx, huge, huge, map[string]any{}); denial(t, err).Code != capwire.CodeUnknownCapability {
					t.Fatalf("a made-up server: %v", err)
				}
			}
			size := sink.Len()
			if size > 8*1024 {
				t.Fatalf("8 calls naming 256 KiB names wrote %d bytes of audit trail", size)
			}

			served, refused := 0, 0
			for range 2000 {
				_, err := c.Call(ctx, "t", "echo", map[string]any{"text": "x"})
				switch {
				case err == nil:
					served++
				case mode == config.AuditFailClosed && strings.Contains(denial(t, err).Message, "audit budget"):
					refused++
				default:
					t.Fatalf("call: %v", err)
				}
				if refused > 10 {
					break
				}
			}
			// A call's line is written after its reply: the first one
			// the budget drops may come after the loop.
			eventually(t, "a line counted lost", func() bool {
				return tb.counter(`capbridge_audit_lines_lost_total{reason="budget"}`) > 0
			})
			size = sink.Len()
			lost := tb.counter(`capbridge_audit_lines_lost_total{reason="budget"}`)
			switch {
			case size > budget+4096:
				t.Errorf("the grant wrote %d bytes of audit trail, its budget is %d", size, budget)
			case mode == config.AuditFailClosed && (refused == 0 || served > 400):
				t.Errorf("closed: %d served, %d refused; want calls refused once the budget is spent", served, refused)
			case mode == config.AuditFailOpen && served != 2000:
				t.Errorf("open: %d of 2000 served", served)
			case lost == 0 || len(sink.lines("audit_budget_spent")) != 1:
				t.Errorf("%v lines counted lost, %d announcements; want some, and one", lost, len(sink.lines("audit_budget_spent")))
			}
			c.Close()
			tb.shutdown()
		})
	}
}

// A token that names no live grant costs no grant's budget, so its
// refusals are what a stranger can make the trail write: they are
// rate-limited, and what is dropped is counted.
func TestAuditRefusalsRateLimited(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridgeOpts(t, Options{Log: zerolog.Nop(), Audit: zerolog.New(&sink)}, nil, mcptestServer("t", mcptest.Scenario{}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	const tries = 200
	for range tries {
		var id [8]byte
		_, _ = rand.Read(id[:])
		forged := tokenPrefix + hex.EncodeToString(id[:]) + "." + strings.Repeat("A", 22)
		if c, err := capwire.Dial(ctx, tb.CallSocket(), forged); err == nil {
			c.Close()
			t.Fatal("a forged token was welcomed")
		}
	}
	tb.shutdown()
	logged := len(sink.lines("refused"))
	dropped := tb.counter(`capbridge_audit_lines_lost_total{reason="rate"}`)
	if logged == 0 || logged > 40 || float64(logged)+dropped != tries {
		t.Fatalf("%d refusals audited, %v counted dropped; want a few, and %d in all", logged, dropped, tries)
	}
}

// failingWriter is a disk that can fill up: while full, every write
// fails as write(2) on a full disk does.
type failingWriter struct {
	mu   sync.Mutex
	full *os.File // /dev/full
	good lockedBuffer
	fail bool
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail {
		return w.full.Write(p)
	}
	return w.good.Write(p)
}

func (w *failingWriter) setFull(full bool) {
	w.mu.Lock()
	w.fail = full
	w.mu.Unlock()
}

// When the audit trail cannot be written, nothing is silent: every line
// lost is counted and the failure logged. Under audit_fail closed, calls
// are refused from the failure until a write succeeds again, so no call
// is served unrecorded beyond the batch that was in flight; under open
// they are served and the loss counted.
func TestAuditWriteFailure(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	for _, mode := range []string{config.AuditFailClosed, config.AuditFailOpen} {
		t.Run(mode, func(t *testing.T) {
			defer leakcheck.Check(t)()
			w := &failingWriter{full: full}
			var logs lockedBuffer
			tb := startBridgeOpts(t, Options{Log: zerolog.New(&logs), Audit: zerolog.New(io.Discard), AuditWriter: w}, func(c *config.Config) {
				c.Bridge.AuditFail = mode
			}, mcptestServer("t", mcptest.Scenario{}))
			c := tb.dial(tb.grant(map[string][]string{"t": nil}))
			ctx, cancel := context.WithTimeout(context.Background(), backstop)
			defer cancel()
			call := func() error {
				_, err := c.Call(ctx, "t", "echo", map[string]any{"text": "x"})
				return err
			}
			if err := call(); err != nil {
				t.Fatal(err)
			}
			w.setFull(true)
			_ = call() // served: its line is written after its reply, and fails
			eventually(t, "the audit write failing", func() bool { _ = tb.auditOut.Flush(); return tb.auditOut.Broken() })
			err := call()
			switch {
			case mode == config.AuditFailClosed && (err == nil || denial(t, err).Code != capwire.CodeOverloaded || !strings.Contains(err.Error(), "audit trail")):
				t.Fatalf("closed, the trail failing: %v; want overloaded", err)
			case mode == config.AuditFailOpen && err != nil:
				t.Fatalf("open, the trail failing: %v", err)
			}
			if lost := tb.counter(`capbridge_audit_lines_lost_total{reason="write"}`); lost < 1 || tb.counter("capbridge_audit_writable") != 0 {
				t.Fatalf("%v lines counted lost, writable %v", lost, tb.counter("capbridge_audit_writable"))
			}
			logged := logs.String()
			if !strings.Contains(logged, "cannot write the audit trail") {
				t.Fatalf("no error logged:\n%s", logged)
			}
			// Room again: the next write succeeds and calls are served.
			w.setFull(false)
			_ = call() // refused or not, its line's write finds room
			eventually(t, "an audit write succeeding", func() bool { _ = tb.auditOut.Flush(); return !tb.auditOut.Broken() })
			if err := call(); err != nil {
				t.Fatalf("after the disk has room again: %v", err)
			}
			c.Close()
			tb.shutdown()
			good := w.good.String()
			if !strings.Contains(good, `"event":"call"`) {
				t.Fatalf("nothing audited once there was room:\n%s", good)
			}
		})
	}
}
