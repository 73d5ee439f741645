package main

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestParseClients(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []string // nil: an error naming the valid clients
	}{
		{strings.Join(clientNames(clients), ","), clientNames(clients)},
		{"raw", []string{"raw"}},
		{"capbridge,raw", []string{"raw", "capbridge"}}, // nominal order
		{" raw , capbridge ,raw", []string{"raw", "capbridge"}},
		{"raw,", []string{"raw"}},
		{"raw,nope", nil},
		{"Raw", nil},
		{"", nil},
		{",", nil},
	} {
		got, err := parseClients(tc.list)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), strings.Join(clientNames(clients), ",")) {
				t.Errorf("parseClients(%q) = %v, %v; want an error listing the valid clients", tc.list, clientNames(got), err)
			}
			continue
		}
		if err != nil || !slices.Equal(clientNames(got), tc.want) {
			t.Errorf("parseClients(%q) = %v, %v; want %v", tc.list, clientNames(got), err, tc.want)
		}
	}
}

func TestParseCells(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []cell // nil: an error naming the valid cells
	}{
		{"64B/1,64B/32,16KiB/1,16KiB/32", cells},
		{"64B/1,16KiB/32", []cell{{64, 1}, {16 << 10, 32}}},
		{"16KiB/32,64B/1", []cell{{64, 1}, {16 << 10, 32}}},
		{"16KiB/1", []cell{{16 << 10, 1}}},
		{"64B/2", nil},
		{"64 B/1", nil},
		{"16384B/1", nil},
		{"", nil},
	} {
		got, err := parseCells(tc.list)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), "64B/1,64B/32,16KiB/1,16KiB/32") {
				t.Errorf("parseCells(%q) = %v, %v; want an error listing the valid cells", tc.list, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseCells(%q) = %v, %v; want %v", tc.list, got, err, tc.want)
		}
	}
}

// TestRunUsage checks that a bad selection is a usage error (exit 2)
// caught before anything is built or started.
func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-clients", "raw,grpc"}, `unknown client "grpc"; valid: ` + strings.Join(clientNames(clients), ",")},
		{[]string{"-cells", "64B/1,1KiB/1"}, `unknown cell "1KiB/1"; valid: 64B/1,64B/32,16KiB/1,16KiB/32`},
		{[]string{"-clients", ""}, "no client named"},
		{[]string{"-runs", "0"}, "usage: peers"},
		{[]string{"extra"}, "usage: peers"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestGoalsNotMeasured checks that a goal whose samples a selection left
// out (or that failed in every run) is "not measured": no value, no
// ratio against a missing client, never "met".
func TestGoalsNotMeasured(t *testing.T) {
	small1, small32, large1, large32 := cells[0], cells[1], cells[2], cells[3]
	ok := func(c cell, client string, p50, cps, bridge float64) sample {
		return sample{Cell: c, Client: client, N: 1, P50us: p50, CallsPerS: cps, CPUus: map[string]float64{"bridge": bridge, "server": 10, "client": bridge}}
	}
	everything := []sample{
		ok(small1, "c-relay", 100, 0, 30), ok(small1, "mcp-go", 200, 0, 0), ok(small1, "capbridge", 110, 0, 30),
		ok(small32, "c-relay", 0, 1000, 10), ok(small32, "mcp-go", 0, 500, 0), ok(small32, "capbridge", 0, 900, 10),
		ok(large1, "c-relay", 100, 0, 30), ok(large1, "capbridge", 120, 0, 40),
		ok(large32, "c-relay", 0, 1000, 10), ok(large32, "capbridge", 0, 900, 10),
		// Over HTTP the faster SDK is mcp-go at 1 in flight (p50 100
		// against 150) and at 32 (1000 calls/s against 500).
		ok(small1, "mcp-go-http", 100, 0, 50), ok(small1, "go-sdk-http", 150, 0, 20), ok(small1, "capbridge-http", 80, 0, 40),
		ok(small32, "mcp-go-http", 0, 1000, 30), ok(small32, "go-sdk-http", 0, 500, 10), ok(small32, "capbridge-http", 0, 2000, 20),
	}
	without := func(drop func(sample) bool) []sample {
		return slices.DeleteFunc(slices.Clone(everything), drop)
	}
	ids := []string{"1", "2", "3", "4", "http-a", "http-b", "http-d"}
	all := func(v string) map[string]string {
		m := map[string]string{}
		for _, id := range ids {
			m[id] = v
		}
		return m
	}
	// with is m with the goals named set to v.
	with := func(m map[string]string, v string, goals ...string) map[string]string {
		m = maps.Clone(m)
		for _, id := range goals {
			m[id] = v
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		samples []sample
		want    map[string]string // goal -> verdict
		unmeas  []string          // checks, by What prefix, not measured
	}{
		{"everything", everything, all("met"), nil},
		{"c-relay skipped", append(without(func(s sample) bool { return s.Client == "c-relay" }),
			sample{Cell: small1, Client: "c-relay", Skipped: "no C compiler"}),
			with(all("met"), "not measured", "1", "2", "3", "4"),
			[]string{"64 B, 1 in flight: capbridge p50 / c-relay", "64 B, 32 in flight: capbridge calls/s / c-relay", "16 KiB", "64 B, 1 in flight: bridge", "64 B, 1 in flight: server"}},
		{"no capbridge", without(func(s sample) bool { return strings.HasPrefix(s.Client, "capbridge") }), all("not measured"),
			[]string{"64 B", "16 KiB"}},
		{"64 B in flight 1 only", without(func(s sample) bool { return s.Cell != small1 }),
			with(all("not measured"), "met", "1", "http-a"),
			[]string{"64 B, 32", "16 KiB"}},
		{"capbridge failed at 16 KiB", append(without(func(s sample) bool { return s.Cell == large1 && s.Client == "capbridge" }),
			sample{Cell: large1, Client: "capbridge", Err: "broken"}),
			with(all("met"), "not measured", "3", "4"), []string{"16 KiB, 1"}},
		{"a measured failure outweighs a missing check", append(without(func(s sample) bool { return s.Client == "mcp-go" || (s.Cell == small1 && s.Client == "capbridge") }),
			ok(small1, "capbridge", 200, 0, 30)),
			with(with(all("met"), "not met", "1"), "not measured", "2"),
			[]string{"64 B, 1 in flight: capbridge p50 / mcp-go", "64 B, 32 in flight: capbridge calls/s / mcp-go"}},
		// The faster SDK is the one the cell's own measure picks, and a
		// slower capbridge fails against it whatever the other SDK does.
		{"slower than the faster SDK over HTTP", append(without(func(s sample) bool { return s.Cell == small1 && s.Client == "capbridge-http" }),
			ok(small1, "capbridge-http", 95, 0, 60)),
			with(all("met"), "not met", "http-a", "http-d"), nil},
		{"nothing", nil, all("not measured"), []string{"64 B", "16 KiB"}},
	} {
		for _, g := range goals(tc.samples, 1) {
			if got := g.verdict(); got != tc.want[g.ID] {
				t.Errorf("%s: goal %s is %q, want %q: %+v", tc.name, g.ID, got, tc.want[g.ID], g.Checks)
			}
			if g.Met != (tc.want[g.ID] == "met") {
				t.Errorf("%s: goal %s Met = %v with verdict %q", tc.name, g.ID, g.Met, g.verdict())
			}
			for _, ck := range g.Checks {
				wantUnmeasured := slices.ContainsFunc(tc.unmeas, func(p string) bool { return strings.HasPrefix(ck.What, p) })
				if ck.Measured == wantUnmeasured {
					t.Errorf("%s: %q measured = %v", tc.name, ck.What, ck.Measured)
				}
				if !ck.Measured && (ck.Met || ck.Value != 0 || len(ck.PerRun) != 0 || ck.verdict() != "not measured") {
					t.Errorf("%s: unmeasured %q has %+v", tc.name, ck.What, ck)
				}
			}
		}
	}
}

// TestMarkdownNotMeasured checks what results.md says of a selection:
// which clients and cells it measured, and "not measured" (never a number)
// for the checks it has no samples for.
func TestMarkdownNotMeasured(t *testing.T) {
	sel := selection{clients: []client{clients[0]}, cells: []cell{cells[0]}}
	ss := []sample{{Cell: cells[0], Client: "raw", N: 10, P50us: 40, P99us: 50, CallsPerS: 25000, CPUus: map[string]float64{"client": 5, "server": 3}}}
	rep := &report{
		Meta:    meta{Runs: 1, Clients: clientNames(sel.clients), Cells: cellNames(sel.cells)},
		Samples: ss, Rows: summarise(ss, sel), Goals: goals(ss, 1), Floor: floorRatios(ss, 1),
	}
	var b bytes.Buffer
	writeMarkdown(&b, rep)
	md := b.String()
	for _, want := range []string{
		"Measured: clients raw; cells 64B/1.",
		"| 64 B | 1 | raw | 1 | 10 | 40.0 (40.0–40.0) |",
		"| 1 | 64 B, 1 in flight: capbridge p50 / c-relay p50 | – | – | <= 1.15 | not measured |",
		"- goal 1: not measured", "- goal 4: not measured",
		"| 64 B, 1 in flight: capbridge p50 / raw-relay p50 | – | not measured |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, "| 64 B |")+strings.Count(md, "| 16 KiB |") != 1 {
		t.Errorf("results.md has rows beyond the one measured:\n%s", md)
	}
	var svg bytes.Buffer
	if err := writeSVG(&svg, rep.Rows, "t", ""); err != nil || strings.Count(svg.String(), "<title>") != 2 {
		t.Errorf("chart.svg: %v, %d bars, want 2", err, strings.Count(svg.String(), "<title>"))
	}
}
