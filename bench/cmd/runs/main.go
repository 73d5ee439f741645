// Command runs measures what capbridge's code mode adds to a program: the
// time from a run request (codemode.Runner.Run, as capbridge mcp's run
// tool calls it) to the program's first instruction, and to the run's end,
// for a program that makes no call, per language, cold (a fresh jail and
// runtime each run) and warm (a prestarted jail from the pool, its runtime
// and client loaded). It reports the p50 and p99 of each.
//
// Usage, from the bench module:
//
//	go run ./cmd/runs [-n 60] [-langs typescript,python,go] [-out DIR] [-quick]
//
// The bridge is this process's own, serving one rawecho server (this
// binary, re-executed); each run is granted, jailed and revoked as in
// production. The first instruction reads the wall clock, which the jail
// shares with the host. It writes DIR/results.json and DIR/results.md and
// prints the table. Go runs cold only (its pool would hold only `go`).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/codemode"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
	"github.com/capbridge/capbridge/jail"
)

func main() {
	// The jail's init and the server are this binary, re-executed.
	jail.MaybeInit(codemode.StripTypes)
	rawecho.MaybeServe()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// programs print the wall clock, in microseconds, as their first
// instruction.
var programs = map[string]string{
	codemode.TypeScript: "console.log(Math.round((performance.timeOrigin + performance.now()) * 1000));",
	codemode.Python:     "import time\nprint(time.time_ns() // 1000)",
	codemode.Go:         "package main\n\nimport (\n\t\"fmt\"\n\t\"time\"\n)\n\nfunc main() { fmt.Println(time.Now().UnixMicro()) }\n",
}

// Row is one language in one mode.
type Row struct {
	Language   string    `json:"language"`
	Mode       string    `json:"mode"` // cold or warm
	Runs       int       `json:"runs"`
	FirstP50   float64   `json:"first_instruction_p50_ms"`
	FirstP99   float64   `json:"first_instruction_p99_ms"`
	WholeP50   float64   `json:"whole_run_p50_ms"`
	WholeP99   float64   `json:"whole_run_p99_ms"`
	FirstMS    []float64 `json:"first_instruction_ms"`
	WholeMS    []float64 `json:"whole_run_ms"`
	Cgroup     string    `json:"cgroup"`
	GoVersion  string    `json:"-"`
	WarmMissed int       `json:"warm_missed,omitempty"` // warm runs that found no jail ready
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 60, "runs per language and mode")
	langs := fs.String("langs", "typescript,python,go", "languages to measure")
	out := fs.String("out", "runs-out", "directory for results.json and results.md")
	quick := fs.Bool("quick", false, "3 runs each: a smoke test of the harness, not a measurement")
	goCache := fs.String("go-cache", "", "where Go's prepared build cache is kept (default: capbridge's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *quick {
		*n = 3
	}
	rows, err := measure(strings.Split(*langs, ","), *n, *goCache, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "runs:", err)
		return 1
	}
	md := table(rows, *n)
	fmt.Fprint(stdout, md)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "runs:", err)
		return 1
	}
	js, _ := json.MarshalIndent(rows, "", "  ")
	if err := errors.Join(os.WriteFile(filepath.Join(*out, "results.json"), js, 0o644),
		os.WriteFile(filepath.Join(*out, "results.md"), []byte(md), 0o644)); err != nil {
		fmt.Fprintln(stderr, "runs:", err)
		return 1
	}
	return 0
}

func measure(langs []string, n int, goCache string, stderr io.Writer) ([]Row, error) {
	dir, err := os.MkdirTemp("", "cbruns")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := config.Defaults()
	cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
	cfg.Bridge.ShutdownGrace = 2 * time.Second
	if os.Getuid() == 0 {
		// As root the jail runs as nobody, who must reach the call socket.
		cfg.Bridge.CallSocketMode = 0o666
		cfg.Bridge.AllowedUIDs = []uint32{0, 65534}
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
	}
	argv, env := rawecho.Command()
	srv := config.NewServer("echo", argv[0])
	srv.Args, srv.Env = argv[1:], map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		srv.Env[k] = v
	}
	cfg.Servers = append(cfg.Servers, srv)
	b := bridge.New(bridge.Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := b.Listen(); err != nil {
		return nil, err
	}
	served := make(chan struct{})
	go func() { b.Serve(); close(served) }()
	defer func() {
		_ = b.Shutdown(cfg.Bridge.ShutdownGrace)
		<-served
	}()
	for _, o := range b.Boot(ctx) {
		if o.State != bridge.StateReady {
			return nil, fmt.Errorf("the server did not boot: %s", o.Reason)
		}
	}
	var rows []Row
	for _, mode := range []string{"cold", "warm"} {
		for _, lang := range langs {
			if mode == "warm" && lang == codemode.Go {
				continue
			}
			row, err := measureOne(ctx, cfg.Bridge.ControlSocket, lang, mode, n, goCache)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", lang, mode, err)
			}
			fmt.Fprintf(stderr, "%s %s: first instruction p50 %.1f ms, p99 %.1f ms\n", lang, mode, row.FirstP50, row.FirstP99)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func measureOne(ctx context.Context, control, lang, mode string, n int, goCache string) (Row, error) {
	cfg := codemode.Config{Control: control, Languages: []string{lang}, GoCache: goCache}
	if mode == "warm" {
		cfg.Warm = 1
	}
	r, err := codemode.New(cfg)
	if err != nil {
		return Row{}, err
	}
	defer r.Close()
	if lang == codemode.Go {
		if err := r.PrepareGo(ctx); err != nil {
			return Row{}, err
		}
	}
	if err := r.Prewarm(ctx); err != nil {
		return Row{}, err
	}
	row := Row{Language: lang, Mode: mode, Runs: n, Cgroup: r.CgroupStatus().String()}
	for range n {
		if mode == "warm" {
			// The pool refills between runs: a run that finds it empty
			// measures a burst, not warm overhead. Wait for it (bounded).
			limit := time.Now().Add(time.Minute)
			tick := time.NewTicker(time.Millisecond)
			for r.Ready(lang) == 0 && time.Now().Before(limit) {
				<-tick.C
			}
			tick.Stop()
		}
		start := time.Now()
		res, err := r.Run(ctx, codemode.Request{Language: lang, Code: programs[lang], Timeout: 2 * time.Minute})
		whole := time.Since(start)
		if err != nil {
			return Row{}, err
		}
		if !res.OK() {
			return Row{}, fmt.Errorf("the program failed: %s %s", res.Ended, res.Stderr)
		}
		if mode == "warm" && !res.Warm {
			row.WarmMissed++
		}
		us, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
		if err != nil {
			return Row{}, fmt.Errorf("the program printed %q", res.Stdout)
		}
		row.FirstMS = append(row.FirstMS, float64(us-start.UnixMicro())/1000)
		row.WholeMS = append(row.WholeMS, float64(whole.Microseconds())/1000)
	}
	row.FirstP50, row.FirstP99 = quantile(row.FirstMS, 0.5), quantile(row.FirstMS, 0.99)
	row.WholeP50, row.WholeP99 = quantile(row.WholeMS, 0.5), quantile(row.WholeMS, 0.99)
	return row, nil
}

// quantile is the q-quantile of v (nearest rank).
func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func table(rows []Row, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| language | mode | first instruction p50 | p99 | whole run p50 | p99 |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms |\n", r.Language, r.Mode, r.FirstP50, r.FirstP99, r.WholeP50, r.WholeP99)
	}
	fmt.Fprintf(&b, "\n%d runs each, of a program that makes no call; cold: a fresh jail and runtime per run; warm: a prestarted jail taken from the pool (refilled between runs).\n", n)
	if len(rows) > 0 {
		fmt.Fprintf(&b, "Jail: %s.\n", rows[0].Cgroup)
	}
	return b.String()
}
