package bridge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/quota"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// fakeClock is the bridge's clock in a test: time passes when the test
// says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A grant's quotas, over real sockets and a real server: the rate's
// bucket refuses the call past its burst with the wait until its token,
// and refills when (the test's) time passes; an operator's per-tool
// default and the grant's own total refuse at the right count; refused
// calls never reach the server; and the totals revoke returns, and its
// audit line carries, are what the server saw.
func TestQuotasOverTheSocket(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	var sink lockedBuffer
	log := zerolog.New(&sink)
	srv := mcptestServer("t", mcptest.Scenario{})
	srv.ToolQuotas = map[string]quota.Limits{"add": {Calls: 1}}
	tb := startBridgeOpts(t, Options{Log: log, Audit: log, now: clk.now}, func(c *config.Config) {
		c.Quota = quota.Limits{Calls: 1000, Time: time.Hour}
	}, srv)
	ctl := tb.control()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, Quotas: []control.Quota{{Rate: 2, Burst: 2, Calls: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(g.Token)
	echo := func(text string) error {
		_, err := c.Call(ctx, "t", "echo", map[string]any{"text": text})
		return err
	}
	refused := func(err error, name string, retryMS uint64) {
		t.Helper()
		var d *capwire.Denied
		if !errors.As(err, &d) || d.Code != capwire.CodeQuotaExceeded || d.Quota != name || d.RetryMS != retryMS {
			t.Fatalf("got %v, want quota_exceeded of %s with retry_ms %d", err, name, retryMS)
		}
	}

	for i := range 2 {
		if err := echo("burst"); err != nil {
			t.Fatalf("call %d of the burst: %v", i, err)
		}
	}
	refused(echo("past the burst"), "rate", 500)
	clk.advance(499 * time.Millisecond)
	refused(echo("almost"), "rate", 1)
	clk.advance(time.Millisecond)
	if err := echo("refilled"); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	clk.advance(time.Hour)
	if _, err := c.Call(ctx, "t", "add", map[string]any{"a": 1, "b": 2}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctx, "t", "add", map[string]any{"a": 3, "b": 4})
	refused(err, "t/add:calls", 0)
	for _, text := range []string{"five", "six"} {
		clk.advance(time.Second)
		if err := echo(text); err != nil {
			t.Fatalf("call %q: %v", text, err)
		}
	}
	refused(echo("seventh"), "calls", 0)

	st, err := ctl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GrantUsage) != 1 || st.GrantUsage[0].Grant != g.Grant || len(st.GrantUsage[0].Quotas) != 2 {
		t.Fatalf("status grant usage %+v", st.GrantUsage)
	}
	if q := st.GrantUsage[0].Quotas[0]; q.Scope != "" || q.Calls != 6 || q.UsedCalls != 6 || q.Rate != 2 || q.TimeMS != uint64(time.Hour/time.Millisecond) {
		t.Errorf("the grant's quota in status: %+v", q)
	}
	if q := st.GrantUsage[0].Quotas[1]; q.Scope != "t/add" || q.Calls != 1 || q.UsedCalls != 1 {
		t.Errorf("the tool's quota in status: %+v", q)
	}
	// A call's series are counted as its audit line is written, just
	// after its reply.
	for _, want := range []string{
		`capbridge_quota_exceeded_total{quota="rate"} 2`,
		`capbridge_quota_exceeded_total{quota="calls"} 2`,
		`capbridge_grant_calls_total{grant="` + g.Grant + `"} 10`,
		`capbridge_grant_quota_used_ratio{grant="` + g.Grant + `",quota="calls"} 1`,
		`capbridge_calls_total{server="t",tool="echo",outcome="quota_exceeded"} 3`,
	} {
		eventually(t, "metrics with "+want, func() bool {
			var metrics strings.Builder
			tb.WriteMetrics(&metrics)
			return strings.Contains(metrics.String(), want)
		})
	}

	r, err := ctl.Revoke(ctx, &control.RevokeRequest{Grant: g.Grant})
	if err != nil || !r.Found {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	// What the server saw, asked with operator authority after the grant
	// ended: the calls the quotas let through, and their argument bytes.
	args, _ := msgpack.Marshal(map[string]any{})
	seen, err := ctl.Call(ctx, &control.CallRequest{Server: "t", Tool: "calls", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	var server struct {
		Calls    int64 `msgpack:"calls"`
		ArgBytes int64 `msgpack:"arg_bytes"`
	}
	if err := seen.Decode(&server); err != nil {
		t.Fatal(err)
	}
	if r.Calls != 10 || r.Denied != 4 || r.Calls-r.Denied != server.Calls || r.ArgBytes != server.ArgBytes {
		t.Fatalf("revoke's totals %+v; the server saw %d calls of %d argument bytes", r, server.Calls, server.ArgBytes)
	}
	lines := sink.lines("revoke")
	if len(lines) != 1 || lines[0]["calls"] != float64(10) || lines[0]["denied"] != float64(4) || lines[0]["arg_bytes"] != float64(server.ArgBytes) || lines[0]["took_ms"] == nil {
		t.Fatalf("the revoke audit line %v does not carry the totals", lines)
	}
	if g := sink.lines("grant"); len(g) != 1 || !strings.Contains(g[0]["quotas"].([]any)[0].(string), "calls=6") {
		t.Errorf("the grant audit line %v does not carry its quotas", g)
	}
	c.Close()
	ctl.Close()
	tb.shutdown()
}

// A grant that expires, or ends with capbridge, has its totals written
// too; a quota the request gets wrong is refused before any grant.
func TestQuotaGrantEnds(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink lockedBuffer
	log := zerolog.New(&sink)
	tb := startBridgeLog(t, log, nil, mcptestServer("t", mcptest.Scenario{}))
	ctl := tb.control()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	for _, bad := range [][]control.Quota{
		{{Scope: "other", Calls: 1}},
		{{Rate: -1}},
		{{Burst: 3}},
		{{Calls: 1}, {Calls: 2}},
	} {
		if _, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, Quotas: bad}); !errors.Is(err, &control.Error{Code: control.CodeBadRequest}) {
			t.Errorf("quotas %+v: %v, want bad_request", bad, err)
		}
	}
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(g.Token)
	if _, err := c.Call(ctx, "t", "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	tb.grants.end(g.Grant, ErrGrantExpired)
	eventually(t, "the expired grant's grant_end line", func() bool { return len(sink.lines("grant_end")) == 1 })
	if l := sink.lines("grant_end")[0]; l["reason"] != "expired" || l["calls"] != float64(1) || l["arg_bytes"] != float64(len(`{"text":"x"}`)) {
		t.Errorf("grant_end line %v", l)
	}
	c.Close()
	ctl.Close()
	tb.shutdown()
}
