package bridge

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/internal/auditlog"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// With the audit trail batched, every call still gets exactly one audit
// line, and Shutdown writes every line still waiting: here the batch's
// delay never passes and its size is never reached, so all of them.
func TestAuditBatchShutdownFlushes(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	// Room for every call at once: none may be refused overloaded.
	tb := startBridge(t, func(c *config.Config) { c.Servers[0].MaxQueue = 1024; soleGrant(&c.Servers[0]) }, mcptestServer("t", mcptest.Scenario{}))
	tb.auditOut = auditlog.NewBatch(&sink, 1<<20, time.Hour)
	tb.audit = zerolog.New(tb.auditOut)
	token := tb.grant(map[string][]string{"t": nil})
	const conns, perConn = 3, 40
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	var wg sync.WaitGroup
	for i := range conns {
		c := tb.dial(token)
		defer c.Close()
		for j := range perConn {
			wg.Go(func() {
				tool := "echo"
				if j%4 == 0 {
					tool = "no_such_tool"
				}
				_, err := c.Call(ctx, "t", tool, map[string]any{"text": strconv.Itoa(i*perConn + j)})
				if (err == nil) != (tool == "echo") {
					t.Errorf("%s: %v", tool, err)
				}
			})
		}
	}
	wg.Wait()
	if n := len(sink.lines("call")) + len(sink.lines("connect")); n != 0 {
		t.Fatalf("%d audit lines written before the batch was due", n)
	}
	tb.shutdown()

	byOutcome := map[any]int{}
	for _, l := range sink.lines("call") {
		byOutcome[l["outcome"]]++
	}
	if want := conns * perConn / 4; byOutcome["ok"] != conns*perConn-want || byOutcome["unknown_tool"] != want || len(byOutcome) != 2 {
		t.Errorf("audit call lines by outcome %v, want %d ok and %d unknown_tool", byOutcome, conns*perConn-want, want)
	}
	if n := len(sink.lines("connect")); n != conns {
		t.Errorf("%d connect lines, want %d", n, conns)
	}
}
