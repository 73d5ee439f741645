// Command scale measures how capbridge's cost grows with the work: calls/s
// and latency as the programs connected grow from 1 to 256 with 32 calls
// in flight in all (conns), the bridge's memory per idle authenticated
// connection (memory), boot time and memory as its stdio servers grow
// from 1 to 64, beside the floor of this process alone starting and
// handshaking as many (servers), one server listing 10, 1000 and 10 000
// realistic tools (big: readiness after the listing, bridge RSS, a call's
// p50, and each language's façade generated in-process), and, only when
// named, a soak of a million calls
// with the server killed every hundred thousand (soak). Every server is
// internal/testkit/rawecho (this binary, re-executed) and every bridge a
// real `capbridge serve` with its settings at their defaults except where
// a cell says otherwise.
//
// Usage, from the bench module:
//
//	go run ./cmd/scale [-runs 3] [-out DIR] [-quick] [-capbridge BIN] [-cells conns,memory,servers,big|soak] [-conns 1,8,64,256]
//
// It writes DIR/results.json, DIR/results.md and one curve per cell
// (DIR/conns.svg, DIR/memory.svg, DIR/servers.svg, DIR/big.svg). The exit status is 1
// if a sample failed or the soak saw a call unanswered; goals met or not
// do not change it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

func main() {
	rawecho.MaybeServe()
	maybeFloor()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// A plan is how much each cell does.
type plan struct {
	conns       []int // programs connected (cell conns)
	callsPerN   int   // timed calls at each count of connections
	idle        int   // idle connections (cell memory)
	memServers  int   // servers of the memory cell's bridge
	servers     []int // servers booted (cell servers)
	bigTools    []int // tools listed by the big server (cell big); goals judge the last
	bigCalls    int   // echo calls timed, one at a time, at each size
	soakCalls   int
	soakKillAt  int // the server is killed every soakKillAt calls
	soakTimeout time.Duration
}

var (
	fullPlan  = plan{conns: []int{1, 8, 64, 256}, callsPerN: 20000, idle: 256, memServers: 8, servers: []int{1, 16, 64}, bigTools: []int{10, 1000, 10000}, bigCalls: 5000, soakCalls: 1_000_000, soakKillAt: 100_000, soakTimeout: 30 * time.Second}
	quickPlan = plan{conns: []int{1, 8, 64, 256}, callsPerN: 400, idle: 256, memServers: 8, servers: []int{1, 4}, bigTools: []int{10, 1000}, bigCalls: 100, soakCalls: 2000, soakKillAt: 500, soakTimeout: 30 * time.Second}
)

var allCells = []string{"conns", "memory", "servers", "big", "soak"}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 3, "runs over every cell")
	out := fs.String("out", "scale-out", "directory for results.json, results.md and the curves")
	quick := fs.Bool("quick", false, "a few calls per cell: a smoke test, not a measurement")
	bin := fs.String("capbridge", "", "a capbridge binary to measure (default: build one from this repository)")
	cellList := fs.String("cells", "conns,memory,servers,big", "cells to measure, comma-separated: conns, memory, servers, big, soak")
	connList := fs.String("conns", "", "the counts of connections the conns cell measures, comma-separated (default 1,8,64,256)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cells []string
	for c := range strings.SplitSeq(*cellList, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(allCells, c) {
			fmt.Fprintf(stderr, "scale: unknown cell %q; valid: %s\n", c, strings.Join(allCells, ","))
			return 2
		}
		if !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
	}
	if fs.NArg() != 0 || *runs < 1 || len(cells) == 0 {
		fmt.Fprintln(stderr, "usage: scale [-runs N] [-out DIR] [-quick] [-capbridge BIN] [-cells LIST] [-conns LIST]")
		return 2
	}
	p := fullPlan
	if *quick {
		p = quickPlan
	}
	if *connList != "" {
		p.conns = nil
		for f := range strings.SplitSeq(*connList, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "scale: -conns: %q is not a count of connections\n", f)
				return 2
			}
			p.conns = append(p.conns, n)
		}
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "scale")
	if err != nil {
		fmt.Fprintln(stderr, "scale:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		if *bin, err = build(ctx, tmp); err != nil {
			fmt.Fprintln(stderr, "scale:", err)
			return 1
		}
	}
	rep := &report{Started: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), CPUs: runtime.NumCPU(), Runs: *runs, Quick: *quick, Cells: cells}
	failed := false
	note := func(err error, what string) {
		if err != nil {
			failed = true
			rep.Failures = append(rep.Failures, what+": "+err.Error())
			fmt.Fprintf(stderr, "%s FAILED: %v\n", what, err)
		}
	}
	for r := range *runs {
		if slices.Contains(cells, "conns") {
			// The counts' order rotates from run to run; at each count the
			// bridge and the floor take turns at going first.
			for i := range p.conns {
				n := p.conns[(i+r)%len(p.conns)]
				for k := range 2 {
					floor := (k+r+i)%2 == 1
					what := fmt.Sprintf("run %d, conns %d", r, n)
					if floor {
						what += ", floor"
					}
					s, err := measureConns(ctx, *bin, tmp, n, p.callsPerN, floor)
					note(err, what)
					if err == nil {
						s.Run = r
						rep.Conns = append(rep.Conns, s)
						fmt.Fprintf(stderr, "%s: %8.0f calls/s  p50 %6.0f µs  p99 %6.0f µs; per call: middle %5.1f µs CPU %4.2f ctx sw %4.2f syscalls, server %5.1f µs, client %5.1f µs\n",
							what, s.CallsPerS, s.P50us, s.P99us, s.BridgeCPUus, s.BridgeCtxSw, s.BridgeSys, s.ServerCPUus, s.ClientCPUus)
					}
				}
			}
		}
		if slices.Contains(cells, "memory") {
			s, err := measureMemory(ctx, *bin, tmp, p.memServers, p.idle)
			note(err, fmt.Sprintf("run %d, memory", r))
			if err == nil {
				s.Run = r
				rep.Memory = append(rep.Memory, s)
				fmt.Fprintf(stderr, "run %d  memory: %d servers %.1f MiB, +%d idle connections %.1f MiB, %.1f KiB each\n", r, s.Servers, mib(s.RSSBase), s.Idle, mib(s.RSSIdle), float64(s.RSSIdle-s.RSSBase)/float64(s.Idle)/1024)
			}
		}
		if slices.Contains(cells, "servers") {
			for i := range p.servers {
				n := p.servers[(i+r)%len(p.servers)]
				s, err := measureServers(ctx, *bin, tmp, n, r)
				note(err, fmt.Sprintf("run %d, servers %d", r, n))
				if err == nil {
					s.Run = r
					rep.Servers = append(rep.Servers, s)
					fmt.Fprintf(stderr, "run %d  servers %-3d ready in %6.0f ms, bridge RSS %.1f MiB, bridge CPU %5.0f ms, servers' CPU %6.0f ms; launched alone in %6.0f ms\n", r, n, s.ReadyMS, mib(s.RSS), s.BridgeCPUms, s.ServerCPUms, s.LaunchMS)
				}
			}
		}
		if slices.Contains(cells, "big") {
			for i := range p.bigTools {
				n := p.bigTools[(i+r)%len(p.bigTools)]
				s, err := measureBig(ctx, *bin, tmp, n, p.bigCalls)
				note(err, fmt.Sprintf("run %d, big %d", r, n))
				if err == nil {
					s.Run = r
					rep.Big = append(rep.Big, s)
					fmt.Fprintf(stderr, "run %d  big %-5d ready %6.0f ms after its listing, bridge RSS %.1f MiB, call p50 %5.0f µs; generated go %5.0f ms, typescript %5.0f ms, python %5.0f ms\n",
						r, n, s.ReadyAfterMS, mib(s.RSS), s.P50us, s.GenerateMS["go"], s.GenerateMS["ts"], s.GenerateMS["python"])
				}
			}
		}
	}
	if slices.Contains(cells, "soak") {
		s, err := soak(ctx, *bin, tmp, p, stderr)
		note(err, "soak")
		rep.Soak = s
	}
	rep.summarise(p)
	if err := write(*out, rep); err != nil {
		fmt.Fprintln(stderr, "scale:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*out, "results.md"))
	if failed {
		return 1
	}
	return 0
}

// build builds cmd/capbridge from the repository around bench/.
func build(ctx context.Context, dir string) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/capbridge/capbridge").Output()
	if err != nil {
		return "", fmt.Errorf("finding the capbridge module: %w", err)
	}
	bin := filepath.Join(dir, "capbridge")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/capbridge")
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building capbridge: %w\n%s", err, out)
	}
	return bin, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func write(dir string, rep *report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	for name, svg := range rep.curves() {
		if err := os.WriteFile(filepath.Join(dir, name+".svg"), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}
