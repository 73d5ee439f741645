package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/auditlog"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// lockedBuffer is a log sink written by the bridge's goroutines and read
// by the test.
type lockedBuffer struct{ syncbuf.Buffer }

func (l *lockedBuffer) lines(event string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}

// One audit line per call, with who, what, sizes, time and outcome, and
// argument or result values only when audit_values is set.
func TestAuditLine(t *testing.T) {
	for _, values := range []bool{false, true} {
		t.Run(map[bool]string{false: "sizes only", true: "audit_values"}[values], func(t *testing.T) {
			defer leakcheck.Check(t)()
			var sink lockedBuffer
			tb := startBridge(t, func(c *config.Config) { c.Bridge.AuditValues = values }, mcptestServer("t", mcptest.Scenario{}))
			tb.audit = zerolog.New(&sink)
			g, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
			if err != nil {
				t.Fatal(err)
			}
			c := tb.dial(token)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.Call(ctx, "t", "echo", map[string]any{"text": "secret value"}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Call(ctx, "t", "no_such_tool", nil); err == nil {
				t.Fatal("a call to an unknown tool succeeded")
			}
			c.Close()
			tb.shutdown()

			calls := sink.lines("call")
			if len(calls) != 2 {
				t.Fatalf("%d audit call lines, want 2:\n%s", len(calls), sink.String())
			}
			// A call's audit line is written after its reply, so the two
			// lines may come in either order: find each by its tool.
			byTool := map[any]map[string]any{}
			for _, c := range calls {
				byTool[c["tool"]] = c
			}
			ok, denied := byTool["echo"], byTool["no_such_tool"]
			if ok == nil || denied == nil {
				t.Fatalf("audit lines by tool: %v", byTool)
			}
			if ok["outcome"] != "ok" || denied["outcome"] != "unknown_tool" {
				t.Errorf("outcomes = %v, %v", ok["outcome"], denied["outcome"])
			}
			for _, k := range []string{"grant", "peer_pid", "peer_uid", "server", "tool", "arg_bytes", "result_bytes", "took"} {
				if _, present := ok[k]; !present {
					t.Errorf("audit line lacks %q: %v", k, ok)
				}
			}
			if ok["grant"] != g.ID || strings.Contains(sink.String(), token) {
				t.Errorf("audit names grant %v, want the id %s and never the token", ok["grant"], g.ID)
			}
			if ok["arg_bytes"].(float64) != float64(len(`{"text":"secret value"}`)) {
				t.Errorf("arg_bytes = %v", ok["arg_bytes"])
			}
			if leaked := strings.Contains(sink.String(), "secret value"); leaked != values {
				t.Errorf("values in the audit trail: %v, want %v:\n%s", leaked, values, sink.String())
			}
			if values && ok["result_text"] != "secret value" {
				t.Errorf("result_text = %v", ok["result_text"])
			}
		})
	}
}

// A result large enough to be read into leased memory (1 KiB and up)
// is given back only once its reply is written and its audit line is:
// with calls in flight on several connections at once, every reply and
// every audit line carries its own call's text whole. Released memory is
// zeroed, so a reply or line written after the release would read zeros,
// and one written after the memory's next lease another call's text.
func TestLeasedResultsReachReplyAndAudit(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridge(t, func(c *config.Config) { c.Bridge.AuditValues = true }, mcptestServer("t", mcptest.Scenario{}))
	tb.audit = zerolog.New(&sink)
	_, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	const conns, calls = 4, 24
	textOf := func(c, i int) string {
		// Sizes across the lease classes, from a result owned (under
		// 1 KiB) up, each text its own.
		n := 900 + (c*calls+i)*613
		tag := strconv.Itoa(c*calls+i) + "-"
		return strings.Repeat(tag, n/len(tag)+1)[:n]
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns*calls)
	for c := range conns {
		cl := tb.dial(token)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for i := range calls {
				want := textOf(c, i)
				r, err := cl.Call(ctx, "t", "echo", map[string]any{"text": want})
				switch {
				case err != nil:
					errs <- err
				case len(r.Content) != 1 || r.Content[0].Text != want:
					errs <- fmt.Errorf("call %d/%d: the reply is not its own text", c, i)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tb.shutdown()
	want := map[string]bool{}
	for c := range conns {
		for i := range calls {
			text := textOf(c, i)
			want[text[:min(len(text), maxAuditValue)]] = true // the line's cap
		}
	}
	lines := sink.lines("call")
	if len(lines) != conns*calls {
		t.Fatalf("%d audit lines, want %d", len(lines), conns*calls)
	}
	for _, l := range lines {
		text, _ := l["result_text"].(string)
		if !want[text] {
			t.Errorf("an audit line's result_text is no call's text: %.16q…", text)
		}
		delete(want, text)
	}
}

// A refused hello is audited with its cause and the grant id its token
// named, never the token.
func TestAuditRefusedHandshake(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	tb.audit = zerolog.New(&sink)
	g, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	tb.Revoke(g.ID)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	if c, err := capwire.Dial(ctx, tb.CallSocket(), token); err == nil {
		c.Close()
		t.Fatal("a revoked token was welcomed")
	}
	tb.shutdown()
	refused := sink.lines("refused")
	if len(refused) != 1 || refused[0]["grant"] != g.ID || !strings.Contains(refused[0]["error"].(string), "grant token") {
		t.Fatalf("refused lines: %v", refused)
	}
	if strings.Contains(sink.String(), token[len(token)-22:]) {
		t.Error("the token's secret reached the audit trail")
	}
}

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

// Hellos that name a live grant with a wrong secret are not paid for by
// the grant: its id is no secret, and under audit_fail = "closed" whoever
// reaches the call socket could otherwise spend its audit budget and so
// cut off its calls (100 000 forged hellos took 6 s). They are the
// strangers' lines, rate-limited, and still audited.
func TestForgedHellosSpendNoGrantBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	tb.audit = zerolog.New(&sink)
	g, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	live := tb.grants.live1(g.ID)
	before := live.auditLeft.Load()
	forged := "cbt1." + g.ID + ".AAAAAAAAAAAAAAAAAAAAAA"
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	for range 20 {
		if c, err := capwire.Dial(ctx, tb.CallSocket(), forged); err == nil {
			c.Close()
			t.Fatal("a forged token was welcomed")
		}
	}
	if left := live.auditLeft.Load(); left != before {
		t.Fatalf("20 forged hellos spent %d bytes of the grant's audit budget", before-left)
	}
	c := tb.dial(token)
	if _, err := c.Call(ctx, "t", "echo", map[string]any{"text": "still mine"}); err != nil {
		t.Fatal(err)
	}
	tb.shutdown()
	if refused := sink.lines("refused"); len(refused) == 0 || refused[0]["grant"] != g.ID {
		t.Fatalf("the forged hellos are not audited: %v", refused)
	}
}

// A revoke given a mistyped token (a space before it, its prefix in
// capitals) still revokes the grant, and one given something that is
// neither an id nor a token (the prefix cut off) writes no part of it to
// the audit trail: what was given may hold the token's secret whole.
func TestRevokeMistypedToken(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	tb.audit = zerolog.New(&sink)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := tb.control()
	defer ctl.Close()
	for _, mistype := range []func(string) string{
		func(tok string) string { return " " + tok + "\n" },
		func(tok string) string { return "CBT1." + strings.TrimPrefix(tok, "cbt1.") },
		func(tok string) string { return strings.TrimPrefix(tok, "cbt1.") },
	} {
		g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}})
		if err != nil {
			t.Fatal(err)
		}
		given := mistype(g.Token)
		rv, err := ctl.Revoke(ctx, &control.RevokeRequest{Grant: given})
		if err != nil {
			t.Fatal(err)
		}
		secret := g.Token[strings.LastIndexByte(g.Token, '.')+1:]
		if strings.Contains(sink.String(), secret) {
			t.Errorf("revoke(%q) wrote the token's secret to the audit trail:\n%s", given, sink.String())
		}
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(given)), "cbt1.") != rv.Found {
			t.Errorf("revoke(%q): found %v", given, rv.Found)
		}
		if !rv.Found {
			ctl.Revoke(ctx, &control.RevokeRequest{Grant: g.Grant})
		}
	}
	tb.shutdown()
	if !strings.Contains(sink.String(), `"grant":"(malformed)"`) {
		t.Errorf("the malformed revoke is not audited as such:\n%s", sink.String())
	}
}

// An audit line lists at most maxAuditNames names, each clipped, and
// then how many more there are: a listing of thousands of tools, all
// changed, makes a line of bounded size.
func TestAuditNamesBounded(t *testing.T) {
	many := make([]string, 2000)
	for i := range many {
		many[i] = fmt.Sprintf("%0200d", i)
	}
	got := auditNames(many)
	if len(got) != maxAuditNames+1 || got[maxAuditNames] != "… and 1936 more" {
		t.Errorf("2000 names: %d listed, ending %q", len(got), got[len(got)-1])
	}
	for _, n := range got[:maxAuditNames] {
		if len(n) > maxAuditString+len("…") {
			t.Errorf("a name of %d bytes", len(n))
		}
	}
	if got := auditNames([]string{"a", "b"}); len(got) != 2 || got[1] != "b" {
		t.Errorf("two names: %q", got)
	}
	// A change's classes follow its clipped name whole.
	long := strings.Repeat("n", 200)
	if got := auditFirst([]string{clip(long) + ": description_changed,annotations_changed"}); !strings.HasSuffix(got[0], ": description_changed,annotations_changed") {
		t.Errorf("a long name's change: %q", got[0])
	}
}
