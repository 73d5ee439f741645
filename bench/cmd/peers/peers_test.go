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

// TestQuickRun runs the whole harness once in -quick mode — all twelve
// clients (six over stdio, six over HTTP) in every cell, capbridge built
// from this repository and the C relay by the machine's C compiler — and
// checks that each output parses and every client produced numbers (the C
// relay's two clients are skipped, saying why, only where there is no
// compiler), and
// that every capbridge serve wrote the profiles -profile asks for. It
// asserts nothing about the numbers' size: the machine decides those.
func TestQuickRun(t *testing.T) {
	out, profiles := t.TempDir(), t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-quick", "-runs", "1", "-out", out, "-profile", profiles}, &stdout, &stderr); code != 0 {
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
	if len(clients) != 12 {
		t.Errorf("%d clients, want raw, raw-relay, c-relay, mcp-go, go-sdk and capbridge, and the six over HTTP (raw-http, c-relay-http, both SDKs, capbridge in both eras)", len(clients))
	}
	if got, want := len(rep.Samples), len(cells)*len(clients); got != want {
		t.Errorf("%d samples, want %d", got, want)
	}
	if len(rep.Rows) != len(cells)*len(clients) {
		t.Errorf("%d summary rows, want %d", len(rep.Rows), len(cells)*len(clients))
	}
	_, noCC := findCC()
	for _, s := range rep.Samples {
		if s.Skipped != "" && (!isCRelay(s.Client) || noCC == "") {
			t.Errorf("%s, %s skipped (%s) on a machine with a C compiler", s.Cell, s.Client, s.Skipped)
		}
	}
	for _, s := range rep.Samples {
		if !strings.HasPrefix(s.Client, "capbridge") {
			continue
		}
		for _, kind := range []string{"cpu", "allocs"} {
			name := profileName(s.Client, s.Cell, 0) + "." + kind + ".pprof"
			if info, err := os.Stat(filepath.Join(profiles, name)); err != nil || info.Size() == 0 {
				t.Errorf("no %s profile of %s, %s: %v", kind, s.Cell, s.Client, err)
			}
		}
	}
	for _, r := range rep.Rows {
		where := r.Cell.String() + ", " + r.Client
		if isCRelay(r.Client) && noCC != "" {
			t.Logf("%s: skipped, as it must be: %s", where, noCC)
			continue
		}
		if r.Runs != 1 || r.N <= 0 || r.P50us.Median <= 0 || r.P99us.Median < r.P50us.Median || r.CallsPerS.Median <= 0 {
			t.Errorf("%s: no numbers: %+v", where, r)
		}
		want := []string{"client", "server"}
		if r.Client == "capbridge" || r.Client == "capbridge-http" || r.Client == "capbridge-http-2025" || r.Client == "raw-relay" || isCRelay(r.Client) {
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
			// Goals 4 and http-d compare CPU read from /proc in 10 ms
			// ticks, which a -quick cell's few hundred calls need not
			// reach: a ratio over 0 ticks is no measurement there.
			cpu := g.ID == "4" || g.ID == "http-d"
			if cpu && !ck.Measured {
				continue
			}
			if noCC != "" && strings.Contains(ck.What, "c-relay") {
				if ck.Measured {
					t.Errorf("goal %s %s: measured against a skipped c-relay", g.ID, ck.What)
				}
				continue
			}
			if len(ck.PerRun) != 1 || !ck.Measured || ck.Value < 0 || (ck.Value == 0 && !cpu) {
				t.Errorf("goal %s %s: per run %v, value %v", g.ID, ck.What, ck.PerRun, ck.Value)
			}
		}
	}
	if len(rep.Goals) != 7 {
		t.Errorf("%d goals, want 4 over stdio and 3 over HTTP", len(rep.Goals))
	}
	if len(rep.Floor) != 8 {
		t.Errorf("%d ratios against the floors, want 8", len(rep.Floor))
	}
	for _, fr := range rep.Floor {
		if noCC != "" && strings.Contains(fr.What, "c-relay") {
			continue
		}
		if !fr.Measured || len(fr.PerRun) != 1 || fr.Value <= 0 {
			t.Errorf("%s: %+v", fr.What, fr)
		}
	}

	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if isCRelay(cl.name) && noCC != "" {
			continue
		}
		if c := strings.Count(string(md), "| "+cl.name+" | 1 |"); c != len(cells) {
			t.Errorf("results.md has %d rows with numbers for %s, want %d", c, cl.name, len(cells))
		}
	}
	for _, id := range []string{"1", "2", "3", "4", "http-a", "http-b", "http-d"} {
		if !strings.Contains(string(md), "- goal "+id+": ") {
			t.Errorf("results.md does not judge goal %s", id)
		}
	}
	for _, fr := range rep.Floor {
		if !fr.Measured {
			continue
		}
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
// taken within a run and judged on their median over runs; a skipped or
// failed sample counts for nothing.
func TestGoals(t *testing.T) {
	small1, small32, large1, large32 := cells[0], cells[1], cells[2], cells[3]
	var ss []sample
	add := func(run int, c cell, client string, p50, cps, bridge, server float64) {
		ss = append(ss, sample{Run: run, Cell: c, Client: client, N: 1, P50us: p50, CallsPerS: cps,
			CPUus: map[string]float64{"client": 1, "bridge": bridge, "server": server}})
	}
	for run, scale := range []float64{1, 2, 100} {
		// Goal 1: 110/100 = 1.1 ≤ 1.15 and 110/120 ≤ 1: met.
		add(run, small1, "c-relay", 100*scale, 0, 20, 10)
		add(run, small1, "mcp-go", 120*scale, 0, 0, 10)
		add(run, small1, "raw-relay", 130*scale, 0, 40, 10)
		add(run, small1, "capbridge", 110*scale, 0, 30, 10) // bridge 1.5 × c-relay's: goal 4 not met
		// Goal 2: 0.8 × c-relay's calls/s, short of 0.85; 2 × mcp-go's.
		add(run, small32, "c-relay", 0, 1000/scale, 0, 0)
		add(run, small32, "mcp-go", 0, 400/scale, 0, 0)
		add(run, small32, "raw-relay", 0, []float64{1600, 800, 400}[run]/scale, 0, 0)
		add(run, small32, "capbridge", 0, 800/scale, 0, 0)
		// Goal 3: 1.25 ≤ 1.3 and 0.9 ≥ 0.8: met.
		add(run, large1, "c-relay", 100*scale, 0, 40, 30)
		add(run, large1, "raw-relay", 150*scale, 0, 0, 0)
		add(run, large1, "capbridge", 125*scale, 0, 60, 30)
		add(run, large32, "c-relay", 0, 1000/scale, 0, 0)
		add(run, large32, "capbridge", 0, 900/scale, 0, 0)
	}
	// A failed and a skipped sample must not count.
	ss = append(ss, sample{Run: 0, Cell: small1, Client: "capbridge", P50us: 1, Err: "broken"},
		sample{Run: 0, Cell: small1, Client: "c-relay", P50us: 1, Skipped: "no compiler"})
	gs := goals(ss, 3)
	want := map[string]bool{"1": true, "2": false, "3": true, "4": false}
	for _, g := range gs {
		if g.Met != want[g.ID] {
			t.Errorf("goal %s met = %v, want %v: %+v", g.ID, g.Met, want[g.ID], g.Checks)
		}
	}
	if v := gs[0].Checks[0].Value; v != 1.1 {
		t.Errorf("capbridge/c-relay p50 = %v, want 1.1 in every run", v)
	}
	if v := gs[1].Checks[1].Value; v != 2 {
		t.Errorf("capbridge/mcp-go calls/s = %v, want 2 in every run", v)
	}
	if gs[1].Checks[0].Met || !gs[1].Checks[1].Met {
		t.Errorf("goal 2 judged wrongly: %+v", gs[1].Checks)
	}
	// Goal 4: bridge 1.5 × at 64 B (not met), 1.5 × at 16 KiB (met, ≤ 1.6),
	// server 1 × in both.
	for i, met := range []bool{false, true, true, true} {
		if ck := gs[3].Checks[i]; !ck.Measured || ck.Met != met {
			t.Errorf("goal 4 check %q: %+v, want met %v", ck.What, ck, met)
		}
	}
	fl := floorRatios(ss, 3)
	for i, want := range []struct {
		per    []float64
		median float64
	}{
		{[]float64{110.0 / 130, 110.0 / 130, 110.0 / 130}, 110.0 / 130},
		{[]float64{0.5, 1, 2}, 1},
		{[]float64{1.3, 1.3, 1.3}, 1.3},
		{[]float64{1.5, 1.5, 1.5}, 1.5},
		{[]float64{100.0 / 120, 100.0 / 120, 100.0 / 120}, 100.0 / 120},
	} {
		if !fl[i].Measured || !slices.Equal(fl[i].PerRun, want.per) || fl[i].Value != want.median {
			t.Errorf("%s = %+v, want per run %v, median %v", fl[i].What, fl[i], want.per, want.median)
		}
	}
}
