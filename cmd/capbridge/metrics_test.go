package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// parseMetrics parses an exposition with the Prometheus project's parser.
func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing the metrics: %v\n%s", err, text)
	}
	return fams
}

// callCount is capbridge_calls_total for server demo, tool and outcome.
func callCount(fams map[string]*dto.MetricFamily, tool, outcome string) float64 {
	for _, m := range fams["capbridge_calls_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["server"] == "demo" && labels["tool"] == tool && labels["outcome"] == outcome {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// capbridge metrics against a real capbridge serve: the counters follow
// the calls made through the CLI, and the metrics_listen listener, whose
// address the ready line names, serves the same text.
func TestMetricsCLI(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := shortTempDir(t)
	cfg := filepath.Join(dir, "capbridge.toml")
	toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
		"metrics_listen = \"127.0.0.1:0\"\n\n[mcp.demo]\ncommand = \"" + bin + "\"\nargs = [\"demo-server\"]\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, line := startServe(t, bin, nil, "serve", "-c", cfg)
	var ready struct{ Metrics string }
	if err := json.Unmarshal([]byte(line), &ready); err != nil || !strings.HasPrefix(ready.Metrics, "127.0.0.1:") {
		t.Fatalf("ready line %q: %v, want the metrics address", line, err)
	}

	for range 2 {
		if out, errOut, code := runCLI(t, bin, nil, "call", "-c", cfg, "demo", "echo", "text=hi"); code != exitOK || out != "hi\n" {
			t.Fatalf("call echo: exit %d, %q, %q", code, out, errOut)
		}
	}
	if _, errOut, code := runCLI(t, bin, nil, "call", "-c", cfg, "demo", "add", "a=1", "b=2"); code != exitOK {
		t.Fatalf("call add: exit %d, %q", code, errOut)
	}

	text, errOut, code := runCLI(t, bin, nil, "metrics", "-c", cfg)
	if code != exitOK {
		t.Fatalf("capbridge metrics: exit %d, %s", code, errOut)
	}
	fams := parseMetrics(t, text)
	if got := callCount(fams, "echo", "result"); got != 2 {
		t.Errorf("echo results = %v, want 2", got)
	}
	if got := callCount(fams, "add", "result"); got != 1 {
		t.Errorf("add results = %v, want 1", got)
	}
	var demoReady bool
	for _, m := range fams["capbridge_server_state"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		demoReady = demoReady || (labels["server"] == "demo" && labels["state"] == "ready" && m.GetGauge().GetValue() == 1)
	}
	if !demoReady {
		t.Error(`capbridge_server_state{server="demo",state="ready"} is not 1`)
	}

	// The listener serves the same counters; the call counts have not
	// moved since (the scrape itself is no call).
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + ready.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	scraped := parseMetrics(t, string(body))
	if got := callCount(scraped, "echo", "result"); got != 2 {
		t.Errorf("scraped echo results = %v, want 2", got)
	}

	if _, errOut, code := runCLI(t, bin, nil, "metrics", "extra"); code != exitUsage || !strings.Contains(errOut, "takes only flags") {
		t.Errorf("metrics extra: exit %d, %q", code, errOut)
	}
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, more stdout %q", err, rest)
	}
}
