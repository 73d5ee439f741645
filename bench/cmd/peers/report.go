package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// stat is a metric over the runs: its median, with the smallest and
// largest value seen.
type stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(v []float64) stat {
	if len(v) == 0 {
		return stat{} // JSON has no NaN; a row's Runs says it has no numbers
	}
	v = slices.Clone(v)
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stat{Median: m, Min: v[0], Max: v[len(v)-1]}
}

// A row summarises one client in one cell over the runs that succeeded.
type row struct {
	Cell      cell            `json:"cell"`
	Client    string          `json:"client"`
	Runs      int             `json:"runs"` // runs that produced numbers
	N         int             `json:"n"`    // the fewest timed calls in any run
	P50us     stat            `json:"p50_us"`
	P99us     stat            `json:"p99_us"`
	CallsPerS stat            `json:"calls_per_s"`
	CPUus     map[string]stat `json:"cpu_us_per_call"`
	CtxSw     map[string]stat `json:"ctx_switches_per_call"`
	Syscalls  map[string]stat `json:"rw_syscalls_per_call"`
}

var roles = []string{"client", "bridge", "server"}

// summarise makes one row per selected client and cell, in sel's order.
func summarise(samples []sample, sel selection) []row {
	var rows []row
	for _, c := range sel.cells {
		for _, cl := range sel.clients {
			r := row{Cell: c, Client: cl.name, CPUus: map[string]stat{}, CtxSw: map[string]stat{}, Syscalls: map[string]stat{}}
			var p50, p99, cps []float64
			cpu, sw, sc := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
			for _, s := range samples {
				if s.Cell != c || s.Client != cl.name || !s.ok() {
					continue
				}
				if r.Runs == 0 || s.N < r.N {
					r.N = s.N
				}
				r.Runs++
				p50, p99, cps = append(p50, s.P50us), append(p99, s.P99us), append(cps, s.CallsPerS)
				for role, v := range s.CPUus {
					cpu[role] = append(cpu[role], v)
					sw[role] = append(sw[role], s.CtxSw[role])
					sc[role] = append(sc[role], s.Syscalls[role])
				}
			}
			r.P50us, r.P99us, r.CallsPerS = statOf(p50), statOf(p99), statOf(cps)
			for role := range cpu {
				r.CPUus[role], r.CtxSw[role], r.Syscalls[role] = statOf(cpu[role]), statOf(sw[role]), statOf(sc[role])
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// A goal is one of capbridge's performance goals, judged on ratios taken
// within each run (the clients of a cell run back to back, so they share
// that moment's machine) and then the median over runs. The goals are
// stated against c-relay, the physical limit of a two-hop design on the
// machine, and against mcp-go, the faster Go SDK talking to the server
// directly.
type goal struct {
	ID     string  `json:"id"`
	Checks []check `json:"checks"`
	Met    bool    `json:"met"` // every check measured and met
}

// A check is one inequality of a goal. A check no run has the samples
// for (a client or cell left out by -clients or -cells, skipped, or
// failed in every run) is not measured: it has no value and is not met.
type check struct {
	What     string    `json:"what"`
	Measured bool      `json:"measured"`
	Value    float64   `json:"value"` // median over runs; 0 when not measured
	PerRun   []float64 `json:"per_run"`
	Op       string    `json:"op"` // "<=" or ">="
	Limit    float64   `json:"limit"`
	Met      bool      `json:"met"`
}

// metricFn picks one number from a sample.
type metricFn func(sample) float64

func p50(s sample) float64       { return s.P50us }
func callsPerS(s sample) float64 { return s.CallsPerS }
func bridgeCPU(s sample) float64 { return s.CPUus["bridge"] }
func serverCPU(s sample) float64 { return s.CPUus["server"] }

// perRunRatios is num's metric over den's in cell c, for each run in
// which both produced numbers (a denominator of 0, a CPU figure below one
// clock tick, gives none).
func perRunRatios(samples []sample, runs int, c cell, m metricFn, num, den string) []float64 {
	var per []float64
	for run := range runs {
		a, okA := find(samples, run, c, num)
		b, okB := find(samples, run, c, den)
		if okA && okB && m(b) > 0 {
			per = append(per, m(a)/m(b))
		}
	}
	return per
}

func clientCPU(s sample) float64 { return s.CPUus["client"] }

// fasterRatios is num's metric m over the same metric of the faster of
// others (by rank, better) in cell c, per run.
func fasterRatios(samples []sample, runs int, c cell, m, rank metricFn, better func(a, b float64) bool, num string, others []string) []float64 {
	return fasterRatiosOf(samples, runs, c, m, m, rank, better, num, others)
}

// fasterRatiosOf is num's metric mNum over the faster other's metric
// mDen, the faster picked by rank in each run.
func fasterRatiosOf(samples []sample, runs int, c cell, mNum, mDen, rank metricFn, better func(a, b float64) bool, num string, others []string) []float64 {
	var per []float64
	for run := range runs {
		a, ok := find(samples, run, c, num)
		if !ok {
			continue
		}
		var best sample
		found := false
		for _, o := range others {
			if b, ok := find(samples, run, c, o); ok && (!found || better(rank(b), rank(best))) {
				best, found = b, true
			}
		}
		if found && mDen(best) > 0 {
			per = append(per, mNum(a)/mDen(best))
		}
	}
	return per
}

// ratioCheck is capbridge's metric over other's, per run.
func ratioCheck(samples []sample, runs int, c cell, m metricFn, other, what, op string, limit float64) check {
	return judge(what, perRunRatios(samples, runs, c, m, "capbridge", other), op, limit)
}

func judge(what string, per []float64, op string, limit float64) check {
	ck := check{What: what, PerRun: per, Op: op, Limit: limit}
	if len(per) == 0 {
		return ck
	}
	ck.Measured, ck.Value = true, statOf(per).Median
	if op == "<=" {
		ck.Met = ck.Value <= limit
	} else {
		ck.Met = ck.Value >= limit
	}
	return ck
}

func find(samples []sample, run int, c cell, client string) (sample, bool) {
	for _, s := range samples {
		if s.Run == run && s.Cell == c && s.Client == client && s.ok() {
			return s, true
		}
	}
	return sample{}, false
}

// goals are the four goals, each check a ratio of capbridge's figure to
// another client's in the same cell and run.
func goals(samples []sample, runs int) []goal {
	small1, small32, large1, large32 := cells[0], cells[1], cells[2], cells[3]
	gs := []goal{
		{ID: "1", Checks: []check{
			ratioCheck(samples, runs, small1, p50, "c-relay", "64 B, 1 in flight: capbridge p50 / c-relay p50", "<=", 1.15),
			ratioCheck(samples, runs, small1, p50, "mcp-go", "64 B, 1 in flight: capbridge p50 / mcp-go p50", "<=", 1.0),
		}},
		{ID: "2", Checks: []check{
			ratioCheck(samples, runs, small32, callsPerS, "c-relay", "64 B, 32 in flight: capbridge calls/s / c-relay calls/s", ">=", 0.85),
			ratioCheck(samples, runs, small32, callsPerS, "mcp-go", "64 B, 32 in flight: capbridge calls/s / mcp-go calls/s", ">=", 1.5),
		}},
		{ID: "3", Checks: []check{
			ratioCheck(samples, runs, large1, p50, "c-relay", "16 KiB, 1 in flight: capbridge p50 / c-relay p50", "<=", 1.3),
			ratioCheck(samples, runs, large32, callsPerS, "c-relay", "16 KiB, 32 in flight: capbridge calls/s / c-relay calls/s", ">=", 0.8),
		}},
		{ID: "4", Checks: []check{
			ratioCheck(samples, runs, small1, bridgeCPU, "c-relay", "64 B, 1 in flight: bridge CPU per call, capbridge / c-relay", "<=", 1.3),
			ratioCheck(samples, runs, large1, bridgeCPU, "c-relay", "16 KiB, 1 in flight: bridge CPU per call, capbridge / c-relay", "<=", 1.6),
			ratioCheck(samples, runs, small1, serverCPU, "c-relay", "64 B, 1 in flight: server CPU per call, through capbridge / through c-relay", "<=", 1.1),
			ratioCheck(samples, runs, large1, serverCPU, "c-relay", "16 KiB, 1 in flight: server CPU per call, through capbridge / through c-relay", "<=", 1.1),
		}},
	}
	// Over HTTP against the faster of the two SDKs' HTTP clients in each
	// run (by the cell's own measure: p50 at 1 in flight, calls/s at 32).
	gs = append(gs,
		goal{ID: "http-a", Checks: []check{
			judge("64 B, 1 in flight: capbridge-http p50 / the faster SDK's over HTTP", fasterRatios(samples, runs, small1, p50, p50, lower, "capbridge-http", httpSDKs), "<=", 0.9),
		}},
		goal{ID: "http-b", Checks: []check{
			judge("64 B, 32 in flight: capbridge-http calls/s / the faster SDK's over HTTP", fasterRatios(samples, runs, small32, callsPerS, callsPerS, higher, "capbridge-http", httpSDKs), ">=", 1.5),
		}},
		goal{ID: "http-d", Checks: []check{
			judge("64 B, 1 in flight: capbridge-http's bridge CPU / the faster SDK client's CPU", fasterRatiosOf(samples, runs, small1, bridgeCPU, clientCPU, p50, lower, "capbridge-http", httpSDKs), "<=", 1),
			judge("64 B, 32 in flight: capbridge-http's bridge CPU / the faster SDK client's CPU", fasterRatiosOf(samples, runs, small32, bridgeCPU, clientCPU, callsPerS, higher, "capbridge-http", httpSDKs), "<=", 1),
		}},
	)
	for i := range gs {
		gs[i].Met = true
		for _, ck := range gs[i].Checks {
			gs[i].Met = gs[i].Met && ck.Measured && ck.Met
		}
	}
	return gs
}

// httpSDKs are the SDKs' HTTP clients, the HTTP goals' measures.
var httpSDKs = []string{"mcp-go-http", "go-sdk-http"}

func lower(a, b float64) bool  { return a < b }
func higher(a, b float64) bool { return a > b }

// A floorRatio is an informational ratio between the floors and the
// others: how far a bridge is from the cost of its hops alone, and what
// the Go runtime costs a relay that does nothing. It is no goal and is
// not judged.
type floorRatio struct {
	What     string    `json:"what"`
	Measured bool      `json:"measured"`
	Value    float64   `json:"value"` // median over runs; 0 when not measured
	PerRun   []float64 `json:"per_run"`
}

func newFloorRatio(what string, per []float64) floorRatio {
	r := floorRatio{What: what, PerRun: per}
	if len(per) > 0 {
		r.Measured, r.Value = true, statOf(per).Median
	}
	return r
}

// floorRatios are capbridge against raw-relay, raw-relay against c-relay
// (the Go runtime's part of a relay's cost), c-relay against mcp-go (what
// goal 1's limit against mcp-go asks of a bridge that does nothing), and
// the same over HTTP: c-relay-http against the faster SDK (what http-a
// asks of one) and capbridge-http against c-relay-http.
func floorRatios(samples []sample, runs int) []floorRatio {
	small1, small32, large1 := cells[0], cells[1], cells[2]
	return []floorRatio{
		newFloorRatio("64 B, 1 in flight: capbridge p50 / raw-relay p50",
			perRunRatios(samples, runs, small1, p50, "capbridge", "raw-relay")),
		newFloorRatio("64 B, 32 in flight: capbridge calls/s / raw-relay calls/s",
			perRunRatios(samples, runs, small32, callsPerS, "capbridge", "raw-relay")),
		newFloorRatio("64 B, 1 in flight: raw-relay p50 / c-relay p50, what a Go relay that does nothing costs over a C one",
			perRunRatios(samples, runs, small1, p50, "raw-relay", "c-relay")),
		newFloorRatio("16 KiB, 1 in flight: raw-relay p50 / c-relay p50",
			perRunRatios(samples, runs, large1, p50, "raw-relay", "c-relay")),
		newFloorRatio("64 B, 1 in flight: c-relay p50 / mcp-go p50, what goal 1's ≤ 1.0 × mcp-go asks of a bridge that does nothing",
			perRunRatios(samples, runs, small1, p50, "c-relay", "mcp-go")),
		newFloorRatio("64 B, 1 in flight: c-relay-http p50 / the faster SDK's over HTTP, what http-a's ≤ 0.9 asks of a bridge that does nothing",
			fasterRatios(samples, runs, small1, p50, p50, lower, "c-relay-http", httpSDKs)),
		newFloorRatio("64 B, 1 in flight: capbridge-http p50 / c-relay-http p50",
			perRunRatios(samples, runs, small1, p50, "capbridge-http", "c-relay-http")),
		newFloorRatio("64 B, 32 in flight: capbridge-http calls/s / c-relay-http calls/s",
			perRunRatios(samples, runs, small32, callsPerS, "capbridge-http", "c-relay-http")),
	}
}

// verdict is a goal's word in results.md: "not met" when any measured
// check fails, else "not measured" when a check has no samples, else
// "met".
func (g goal) verdict() string {
	unmeasured := false
	for _, ck := range g.Checks {
		if !ck.Measured {
			unmeasured = true
		} else if !ck.Met {
			return "not met"
		}
	}
	if unmeasured {
		return "not measured"
	}
	return "met"
}

func (ck check) verdict() string {
	switch {
	case !ck.Measured:
		return "not measured"
	case ck.Met:
		return "met"
	}
	return "not met"
}

// report is everything a run wrote, as results.json holds it.
type report struct {
	Meta    meta     `json:"meta"`
	Samples []sample `json:"samples"`
	Rows    []row    `json:"summary"`
	Goals   []goal   `json:"goals"`
	// Floor is informational: ratios against raw-relay, not judged.
	Floor []floorRatio `json:"floor"`
}

type meta struct {
	Started    string            `json:"started"`
	Go         string            `json:"go"`
	GOMAXPROCS int               `json:"gomaxprocs"`
	CPUs       int               `json:"cpus"`
	Kernel     string            `json:"kernel"`
	Capbridge  string            `json:"capbridge"` // what `capbridge version` says
	Commit     string            `json:"commit"`    // the repository's commit, when git can tell
	Modules    map[string]string `json:"modules"`   // the SDK versions this binary was built with
	Runs       int               `json:"runs"`
	Quick      bool              `json:"quick"`
	Clients    []string          `json:"clients"` // the clients measured (-clients)
	Cells      []string          `json:"cells"`   // the cells measured (-cells)
	Plan       planJSON          `json:"plan"`
}

type planJSON struct {
	Calls64B  int     `json:"calls_64b"`
	Calls16K  int     `json:"calls_16kib"`
	Warm      int     `json:"warm_up"`
	CapPerSec float64 `json:"cell_cap_s"`
}

// num formats a number with about three significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func spread(s stat) string {
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
}

// perRole formats a metric's medians as client / bridge / server, with
// "–" for a process the client does not have.
func perRole(m map[string]stat) string {
	parts := make([]string, len(roles))
	for i, role := range roles {
		if s, ok := m[role]; ok {
			parts[i] = num(s.Median)
		} else {
			parts[i] = "–"
		}
	}
	return strings.Join(parts, " / ")
}

func writeMarkdown(w io.Writer, r *report) {
	m := r.Meta
	fmt.Fprintf(w, "# capbridge vs the Go MCP SDKs, every client against the same raw server\n\n")
	capbridge := m.Capbridge
	if capbridge == "" {
		capbridge = "not built"
	}
	fmt.Fprintf(w, "%s; %s, GOMAXPROCS %d on %d CPUs, kernel %s; capbridge %s (commit %s)", m.Started, m.Go, m.GOMAXPROCS, m.CPUs, m.Kernel, capbridge, m.Commit)
	for _, k := range []string{"github.com/mark3labs/mcp-go", "github.com/modelcontextprotocol/go-sdk"} {
		fmt.Fprintf(w, ", %s %s", k, m.Modules[k])
	}
	fmt.Fprintf(w, ".\n%d run(s)", m.Runs)
	if m.Quick {
		fmt.Fprintf(w, " in -quick mode (smoke test: too few calls for the numbers to mean anything)")
	}
	fmt.Fprintf(w, "; timed calls per cell %d at 64 B and %d at 16 KiB, capped at %.0f s; %d checked warm-up calls.\n", m.Plan.Calls64B, m.Plan.Calls16K, m.Plan.CapPerSec, m.Plan.Warm)
	fmt.Fprintf(w, "Measured: clients %s; cells %s.\n\n", strings.Join(m.Clients, ", "), strings.Join(m.Cells, ", "))
	fmt.Fprintf(w, "Median over runs, (min–max). CPU, context switches and read/write syscalls are per call, for client / bridge / server (– where a client has no such process).\n\n")
	fmt.Fprintf(w, "| payload | in flight | client | runs | N | p50 µs | p99 µs | calls/s | CPU µs/call | ctx switches/call | r/w syscalls/call |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		size := strings.Split(row.Cell.String(), ",")[0]
		if row.Runs == 0 {
			what := "failed"
			if why := skipped(r.Samples, row); why != "" {
				what = "skipped: " + why
			}
			fmt.Fprintf(w, "| %s | %d | %s | 0 | – | %s | | | | | |\n", size, row.Cell.InFlight, row.Client, what)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %s | %s | %s | %s | %s | %s |\n", size, row.Cell.InFlight, row.Client, row.Runs, row.N,
			spread(row.P50us), spread(row.P99us), spread(row.CallsPerS), perRole(row.CPUus), perRole(row.CtxSw), perRole(row.Syscalls))
	}
	fmt.Fprintf(w, "\n## Goals\n\nAgainst c-relay, two hops through a relay written in C (one process, two blocking threads, each a read() then a write() on one buffer), and mcp-go talking to the server directly. Ratios are taken within each run, then the median over runs is compared with the limit.\n\n")
	fmt.Fprintf(w, "| goal | check | per run | median | limit | met |\n|---|---|---|---|---|---|\n")
	for _, g := range r.Goals {
		for _, ck := range g.Checks {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s %s | %s |\n", g.ID, ck.What, perRun(ck.PerRun), median(ck.Measured, ck.Value), ck.Op, num(ck.Limit), ck.verdict())
		}
	}
	fmt.Fprintf(w, "\n")
	for _, g := range r.Goals {
		fmt.Fprintf(w, "- goal %s: %s\n", g.ID, g.verdict())
	}
	fmt.Fprintf(w, "\n## Against the two-hop floors (informational, not a goal)\n\n")
	fmt.Fprintf(w, "raw-relay and c-relay send raw's lines over a Unix socket to a relay process that copies bytes, unparsed, to and from the server's pipes: two hops with a middle that does nothing, written in Go (one P, as capbridge runs) and in C (two blocking threads). c-relay-http is raw-http's client with its connections dialed to the C relay, which relays each to a TCP connection of its own to the HTTP server: capbridge-http's two hops with a middle that does nothing. Ratios are taken within each run; the median is over runs.\n\n")
	fmt.Fprintf(w, "| ratio | per run | median |\n|---|---|---|\n")
	for _, fr := range r.Floor {
		med := median(fr.Measured, fr.Value)
		if !fr.Measured {
			med = "not measured"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", fr.What, perRun(fr.PerRun), med)
	}
	var failed []string
	for _, s := range r.Samples {
		if s.Err != "" {
			failed = append(failed, fmt.Sprintf("- run %d, %s, %s: %s", s.Run, s.Cell, s.Client, s.Err))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\n## Failures\n\n%s\n", strings.Join(failed, "\n"))
	}
}

// skipped returns why row's client was skipped in every run, or "".
func skipped(samples []sample, row row) string {
	for _, s := range samples {
		if s.Cell == row.Cell && s.Client == row.Client && s.Skipped != "" {
			return s.Skipped
		}
	}
	return ""
}

// perRun lists per-run values, "–" when there are none.
func perRun(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = num(x)
	}
	return strings.Join(parts, ", ")
}

func median(measured bool, v float64) string {
	if !measured {
		return "–"
	}
	return num(v)
}
