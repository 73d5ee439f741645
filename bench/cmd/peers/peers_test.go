package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

func TestMain(m *testing.M) {
	// The peers' raw servers are this test binary, re-executed.
	rawecho.MaybeServe()
	maybeRelay()
	maybeSample()
	os.Exit(m.Run())
}

// TestQuickRun runs the whole harness once in -quick mode — all nine
// clients (five over stdio, four over HTTP) in every cell, capbridge built from this repository — and checks that
// each output parses and every client produced numbers. It asserts
// nothing about the numbers' size: the machine decides those.
func TestQuickRun(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-quick", "-runs", "1", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	if left := stray(); len(left) > 0 {
		t.Errorf("child processes left behind: %v", left)
	}

	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(clients) != 10 {
		t.Errorf("%d clients, want raw, raw-relay, mcp-go, go-sdk and capbridge, and the five over HTTP (capbridge in both eras)", len(clients))
	}
	if got, want := len(rep.Samples), len(cells)*len(clients); got != want {
		t.Errorf("%d samples, want %d", got, want)
	}
	if len(rep.Rows) != len(cells)*len(clients) {
		t.Errorf("%d summary rows, want %d", len(rep.Rows), len(cells)*len(clients))
	}
	for _, r := range rep.Rows {
		where := r.Cell.String() + ", " + r.Client
		if r.Runs != 1 || r.N <= 0 || r.P50us.Median <= 0 || r.P99us.Median < r.P50us.Median || r.CallsPerS.Median <= 0 {
			t.Errorf("%s: no numbers: %+v", where, r)
		}
		want := []string{"client", "server"}
		if r.Client == "capbridge" || r.Client == "capbridge-http" || r.Client == "capbridge-http-2025" || r.Client == "raw-relay" {
			want = append(want, "bridge")
		}
		for _, role := range want {
			if _, ok := r.CPUus[role]; !ok {
				t.Errorf("%s: no CPU figure for the %s", where, role)
			}
			if s, ok := r.Syscalls[role]; !ok || s.Median <= 0 {
				t.Errorf("%s: no syscall count for the %s", where, role)
			}
			if s, ok := r.CtxSw[role]; !ok || s.Median <= 0 {
				t.Errorf("%s: no context switch count for the %s", where, role)
			}
		}
		if len(r.CPUus) != len(want) {
			t.Errorf("%s: CPU for %d processes, want %d", where, len(r.CPUus), len(want))
		}
	}
	for _, g := range rep.Goals {
		for _, ck := range g.Checks {
			// (d) is the bridge's CPU, read from /proc in 10 ms ticks,
			// which a -quick cell's few hundred calls need not reach: 0
			// is a measurement there; every ratio is above 0.
			if len(ck.PerRun) != 1 || !ck.Measured || ck.Value < 0 || (ck.Value == 0 && g.ID != "d" && g.ID != "http-d") {
				t.Errorf("goal (%s) %s: per run %v, value %v", g.ID, ck.What, ck.PerRun, ck.Value)
			}
		}
	}
	if len(rep.Goals) != 7 {
		t.Errorf("%d goals, want 4 over stdio and 3 over HTTP", len(rep.Goals))
	}
	if len(rep.Floor) != 3 {
		t.Errorf("%d ratios against the floor, want 3", len(rep.Floor))
	}
	for _, fr := range rep.Floor {
		if !fr.Measured || len(fr.PerRun) != 1 || fr.Value <= 0 {
			t.Errorf("%s: %+v", fr.What, fr)
		}
	}

	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if c := strings.Count(string(md), "| "+cl.name+" | 1 |"); c != len(cells) {
			t.Errorf("results.md has %d rows with numbers for %s, want %d", c, cl.name, len(cells))
		}
	}
	for _, id := range []string{"a", "b", "c", "d", "http-a", "http-b", "http-d"} {
		if !strings.Contains(string(md), "- goal ("+id+"): ") {
			t.Errorf("results.md does not judge goal (%s)", id)
		}
	}
	for _, fr := range rep.Floor {
		if !strings.Contains(string(md), "| "+fr.What+" | "+num(fr.PerRun[0])+" | "+num(fr.Value)+" |") {
			t.Errorf("results.md does not give %q", fr.What)
		}
	}

	// chart.svg has the clients over stdio, chart-http.svg those over
	// HTTP: a bar per client, cell and panel.
	over := map[string]int{}
	for _, cl := range clients {
		if strings.Contains(cl.name, "-http") {
			over["chart-http.svg"]++
		} else {
			over["chart.svg"]++
		}
	}
	for file, n := range over {
		svg, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		bars := 0
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s is not XML: %v", file, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "title" {
				bars++
			}
		}
		if want := 2 * len(cells) * n; bars != want {
			t.Errorf("%s has %d bars, want %d", file, bars, want)
		}
	}
}

func TestReplyText(t *testing.T) {
	for _, tc := range []struct {
		line string
		id   uint64
		want string
		ok   bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"abc"}]}}`, 7, "abc", true},
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\"b\\c"}]}}`, 7, `a"b\c`, true},
		{`{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"abc"}]}}`, 7, "", false},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}`, 7, "", false},
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"abc`, 7, "", false},
	} {
		got, err := replyText([]byte(tc.line), tc.id)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("replyText(%s, %d) = %q, %v; want %q, ok %v", tc.line, tc.id, got, err, tc.want, tc.ok)
		}
	}
}

// TestGoals checks the goal arithmetic on made-up samples: ratios are
// taken within a run and judged on their median over runs.
func TestGoals(t *testing.T) {
	var ss []sample
	add := func(run int, c cell, client string, p50, cps, bridge float64) {
		ss = append(ss, sample{Run: run, Cell: c, Client: client, N: 1, P50us: p50, CallsPerS: cps, CPUus: map[string]float64{"client": 1, "bridge": bridge}})
	}
	for run, scale := range []float64{1, 2, 100} {
		add(run, cells[0], "raw", 40*scale, 0, 0)
		add(run, cells[0], "mcp-go", 200*scale, 0, 0)
		add(run, cells[0], "capbridge", 100*scale, 0, 30)
		add(run, cells[1], "mcp-go", 0, 1200/scale, 0)
		add(run, cells[1], "go-sdk", 0, 200/scale, 0)
		add(run, cells[1], "capbridge", 0, 1500/scale, 25)
		add(run, cells[2], "go-sdk", 1000*scale, 0, 0)
		add(run, cells[2], "capbridge", 200*scale, 0, 0)
		add(run, cells[0], "raw-relay", 50*scale, 0, 0)
		add(run, cells[1], "raw-relay", 0, []float64{3000, 1500, 500}[run]/scale, 0)
	}
	// A failed sample must not count.
	ss = append(ss, sample{Run: 0, Cell: cells[0], Client: "capbridge", P50us: 1, Err: "broken"})
	gs := goals(ss, 3)
	want := map[string]bool{"a": true, "b": false, "c": true, "d": false}
	for _, g := range gs {
		if g.Met != want[g.ID] {
			t.Errorf("goal (%s) met = %v, want %v: %+v", g.ID, g.Met, want[g.ID], g.Checks)
		}
	}
	if v := gs[0].Checks[0].Value; v != 2.5 {
		t.Errorf("capbridge/raw p50 = %v, want 2.5 in every run", v)
	}
	if v := gs[1].Checks[1].Value; v != 7.5 {
		t.Errorf("capbridge/go-sdk calls/s = %v, want 7.5 in every run", v)
	}
	if gs[1].Checks[0].Met || gs[3].Checks[0].Met != true || gs[3].Checks[1].Met {
		t.Errorf("checks judged wrongly: %+v / %+v", gs[1].Checks, gs[3].Checks)
	}
	fl := floorRatios(ss, 3)
	// Run 0's capbridge sample at 64 B, 1 in flight includes a failed one,
	// which must not count; the valid one gives 100/50 in every run.
	for i, want := range []struct {
		per    []float64
		median float64
	}{
		{[]float64{2, 2, 2}, 2},
		{[]float64{0.5, 1, 3}, 1},
		{[]float64{0.25, 0.25, 0.25}, 0.25},
	} {
		if !fl[i].Measured || !slices.Equal(fl[i].PerRun, want.per) || fl[i].Value != want.median {
			t.Errorf("%s = %+v, want per run %v, median %v", fl[i].What, fl[i], want.per, want.median)
		}
	}
}
