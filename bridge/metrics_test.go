package bridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/mcpwire"
)

// families parses an exposition with the Prometheus project's own parser,
// so what is checked is what a Prometheus server would read.
func families(t *testing.T, body io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// sample returns the value of the series of family name whose labels are
// exactly labels, and whether there is one. A histogram's value is its
// sample count.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		// A label with an empty value is no label (as Prometheus reads it).
		n := 0
		for _, l := range m.GetLabel() {
			if l.GetValue() == "" {
				continue
			}
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
			n++
		}
		if n != len(labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func wantSample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := sample(fams, name, labels)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// A known sequence of calls against a real bridge and mcptest server,
// scraped over real loopback HTTP: results, an isError result, denials
// (an unlisted tool, a tool the grant does not allow, an unknown server),
// an operator call, a refused token and a revoked grant each show in the
// counters, and no name a caller made up becomes a label.
func TestMetricsScrape(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- tb.ServeMetrics(l) }()

	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	all := tb.dial(tb.grant(map[string][]string{"t": nil}))
	for range 3 {
		if _, err := all.Call(ctx, "t", "echo", map[string]any{"text": "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		r, err := all.Call(ctx, "t", "fail", map[string]any{"message": "no"})
		if err != nil || !r.IsError {
			t.Fatalf("fail: %+v, %v", r, err)
		}
	}
	for _, tool := range []string{"nope", "made_up_by_the_caller"} {
		if _, err := all.Call(ctx, "t", tool, map[string]any{}); !errors.Is(err, capwire.ErrUnknownTool) {
			t.Fatalf("%s: %v, want unknown_tool", tool, err)
		}
	}
	if _, err := all.Call(ctx, "no_such_server", "echo", map[string]any{}); !errors.Is(err, capwire.ErrUnknownCapability) {
		t.Fatalf("unknown server: %v", err)
	}
	echoOnly := tb.grant(map[string][]string{"t": {"echo"}})
	narrow := tb.dial(echoOnly)
	if _, err := narrow.Call(ctx, "t", "add", map[string]any{"a": 1, "b": 2}); !errors.Is(err, capwire.ErrNotGranted) {
		t.Fatalf("add under an echo-only grant: %v", err)
	}
	args, _ := msgpack.Marshal(map[string]int{"a": 2, "b": 3})
	ctl := tb.control()
	if r, err := ctl.Call(ctx, &control.CallRequest{Server: "t", Tool: "add", Args: args}); err != nil || r.IsError {
		t.Fatalf("operator add: %+v, %v", r, err)
	}
	if _, err := capwire.Dial(ctx, tb.CallSocket(), "cbt1.0000000000000000.AAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, capwire.ErrBadToken) {
		t.Fatalf("dial with a bad token: %v", err)
	}
	if !tb.Revoke(echoOnly) {
		t.Fatal("revoke found no grant")
	}
	// A call is counted as it is audited, after its reply is sent; its
	// connection is untracked only once every call on it was, so once
	// the call socket has no connection every count is in.
	all.Close()
	eventually(t, "the call connections to close", func() bool { return tb.openConns(false) == 0 })

	scraper := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := scraper.Get("http://" + l.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != MetricsContentType {
		t.Errorf("Content-Type %q", ct)
	}
	fams := families(t, bytes.NewReader(body))

	calls := func(tool, outcome string) map[string]string {
		return map[string]string{"server": "t", "tool": tool, "outcome": outcome}
	}
	wantSample(t, fams, "capbridge_calls_total", calls("echo", "result"), 3)
	wantSample(t, fams, "capbridge_calls_total", calls("fail", "is_error"), 2)
	wantSample(t, fams, "capbridge_calls_total", calls("add", "not_granted"), 1)
	wantSample(t, fams, "capbridge_calls_total", calls("add", "result"), 1)
	wantSample(t, fams, "capbridge_calls_total", map[string]string{"server": "t", "outcome": "unknown_tool"}, 2)
	if n := len(fams["capbridge_calls_total"].GetMetric()); n != 5 {
		t.Errorf("capbridge_calls_total has %d series, want 5:\n%s", n, body)
	}
	for _, made := range []string{"nope", "made_up_by_the_caller", "no_such_server"} {
		if strings.Contains(string(body), made) {
			t.Errorf("the caller's name %q became a label", made)
		}
	}
	wantSample(t, fams, "capbridge_call_duration_seconds", map[string]string{"server": "t"}, 9)
	wantSample(t, fams, "capbridge_denials_total", map[string]string{"code": "unknown_tool"}, 2)
	wantSample(t, fams, "capbridge_denials_total", map[string]string{"code": "not_granted"}, 1)
	wantSample(t, fams, "capbridge_denials_total", map[string]string{"code": "unknown_capability"}, 1)
	wantSample(t, fams, "capbridge_denials_total", map[string]string{"code": "overloaded"}, 0)
	wantSample(t, fams, "capbridge_connections_accepted_total", map[string]string{"socket": "call"}, 3)
	wantSample(t, fams, "capbridge_connections_accepted_total", map[string]string{"socket": "control"}, 1)
	wantSample(t, fams, "capbridge_connections_refused_total", map[string]string{"socket": "call", "reason": "bad_token"}, 1)
	wantSample(t, fams, "capbridge_connections_open", map[string]string{"socket": "call"}, 0)
	wantSample(t, fams, "capbridge_connections_open", map[string]string{"socket": "control"}, 1)
	wantSample(t, fams, "capbridge_grants_issued_total", nil, 2)
	wantSample(t, fams, "capbridge_grants_live", nil, 1)
	wantSample(t, fams, "capbridge_grants_ended_total", map[string]string{"reason": "revoked"}, 1)
	wantSample(t, fams, "capbridge_grants_ended_total", map[string]string{"reason": "expired"}, 0)
	wantSample(t, fams, "capbridge_server_state", map[string]string{"server": "t", "state": "ready"}, 1)
	wantSample(t, fams, "capbridge_server_state", map[string]string{"server": "t", "state": "dead"}, 0)
	wantSample(t, fams, "capbridge_server_boots_total", map[string]string{"server": "t", "outcome": "ready"}, 1)
	wantSample(t, fams, "capbridge_server_restarts_total", map[string]string{"server": "t"}, 0)
	wantSample(t, fams, "capbridge_calls_inflight", map[string]string{"server": "t"}, 0)
	wantSample(t, fams, "capbridge_calls_queued", map[string]string{"server": "t"}, 0)
	if v, _ := sample(fams, "capbridge_server_boot_seconds", map[string]string{"server": "t"}); v <= 0 {
		t.Errorf("capbridge_server_boot_seconds = %v", v)
	}
	// Bytes: each of the 8 call-socket calls crossed as a call frame in
	// and a reply out, besides the hellos and welcomes.
	for _, dir := range []string{"in", "out"} {
		if v, _ := sample(fams, "capbridge_call_socket_bytes_total", map[string]string{"direction": dir}); v < 8*16 {
			t.Errorf("capbridge_call_socket_bytes_total{direction=%q} = %v", dir, v)
		}
	}
	if f := fams["capbridge_call_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("capbridge_call_duration_seconds is a %v", f.GetType())
	}
	if fams["go_goroutines"] == nil {
		t.Error("no Go runtime series")
	}
	// Every local user can read a TCP port: no grant's id is on it,
	// where the control socket's metrics name the live one.
	if strings.Contains(string(body), `grant="`) || fams["capbridge_grant_calls_total"] != nil {
		t.Errorf("the TCP port shows per-grant series:\n%s", body)
	}
	full, err := ctl.Metrics(ctx)
	if err != nil || !strings.Contains(full.Text, `capbridge_grant_calls_total{grant="`) {
		t.Errorf("the control socket's metrics lack the per-grant series: %v", err)
	}
	// A web page the operator visits may reach the port through a name
	// it rebinds to 127.0.0.1: a Host that is not the loopback is refused.
	for host, want := range map[string]int{"attacker.example": http.StatusForbidden, "attacker.example:80": http.StatusForbidden,
		"localhost:9464": http.StatusOK, "[::1]:9464": http.StatusOK, "127.0.0.1": http.StatusOK} {
		req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/metrics", nil)
		req.Host = host
		resp, err := scraper.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("a scrape with Host %q: %s, want %d", host, resp.Status, want)
		}
	}

	narrow.Close()
	ctl.Close()
	tb.shutdown()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// Tool labels name only tools a server listed, escaped whatever their
// bytes, with nothing a terminal would act on (an operator reads them
// with curl), and at most maxToolSeries of them: past the budget, calls
// are counted in the server's series with an empty tool label.
func TestMetricsToolLabels(t *testing.T) {
	cfg := config.Defaults()
	cfg.Servers = []config.Server{config.NewServer("s", "/bin/true")}
	b := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	m, s := b.metrics, b.srv("s")
	hostile := "q\"uote\\back\nline\xff\x1b]0;T\x07\u009b\u202e"
	tb := &table{tools: map[string]mcpwire.Tool{"ok": {}, hostile: {}, "late": {}}}
	s.metrics.booted(time.Now(), tb)
	ok := outcome{result: &capwire.Result{}}
	m.retired("s", "ok", ok, time.Millisecond)
	m.retired("s", hostile, outcome{result: &capwire.Result{IsError: true}}, time.Millisecond)
	m.retired("s", "unlisted", ok, time.Millisecond)
	m.toolSeries = maxToolSeries // the budget is spent: "late" gets no series of its own
	m.retired("s", "late", ok, time.Millisecond)
	m.retired("s", "ok", ok, time.Millisecond) // an existing series still counts

	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	fams := families(t, &buf)
	wantSample(t, fams, "capbridge_calls_total", map[string]string{"server": "s", "tool": "ok", "outcome": "result"}, 2)
	wantSample(t, fams, "capbridge_calls_total", map[string]string{"server": "s", "tool": "q\"uote\\back\nline\uFFFD\uFFFD]0;T\uFFFD\uFFFD\uFFFD", "outcome": "is_error"}, 1)
	wantSample(t, fams, "capbridge_calls_total", map[string]string{"server": "s", "outcome": "result"}, 2)
	if n := len(fams["capbridge_calls_total"].GetMetric()); n != 3 {
		t.Errorf("%d calls_total series, want 3", n)
	}
	wantSample(t, fams, "capbridge_server_boots_total", map[string]string{"server": "s", "outcome": "ready"}, 1)

	// A second boot is a restart; the listed tool keeps its series.
	s.metrics.booted(time.Now(), tb)
	m.retired("s", "ok", ok, time.Millisecond)
	buf.Reset()
	b.WriteMetrics(&buf)
	fams = families(t, &buf)
	wantSample(t, fams, "capbridge_server_restarts_total", map[string]string{"server": "s"}, 1)
	wantSample(t, fams, "capbridge_calls_total", map[string]string{"server": "s", "tool": "ok", "outcome": "result"}, 3)
}

// Every denial code capwire defines has its own outcome, and each
// outcome's name is a valid label value.
func TestMetricsOutcomes(t *testing.T) {
	seen := map[string]bool{}
	for i, name := range outcomeNames {
		if seen[name] {
			t.Errorf("outcome %q twice", name)
		}
		seen[name] = true
		if i >= firstDenialOutcome && codeOutcome(name) != i {
			t.Errorf("codeOutcome(%q) = %d, want %d", name, codeOutcome(name), i)
		}
		if capwire.IsFatalCode(name) {
			t.Errorf("%q is a fatal code, not a denial", name)
		}
	}
	if codeOutcome("from_a_newer_capwire") != outcomeOther {
		t.Error("an unknown code is not counted as other")
	}
}
