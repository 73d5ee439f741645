// Command peers measures capbridge's whole jail boundary against the Go MCP
// SDKs and against the floors of its hops, in one run, each client against
// its own copy of the same physical-limit server, internal/testkit/rawecho.
// Over stdio: hand-built JSON lines over pipes (raw, the one-hop floor), the
// same lines through a relay that copies bytes, in Go (raw-relay) and in C
// (c-relay: the two-hop floors), mark3labs/mcp-go, modelcontextprotocol/go-sdk
// and capbridge (the capwire client through a real `capbridge serve`). Over
// Streamable HTTP, the same server behind net/http: hand-built bodies on a
// keep-alive client (raw-http), the same through the C relay (c-relay-http),
// both SDKs' HTTP clients, and capbridge with the server's url, in each era.
//
// Usage, from the bench module:
//
//	go run ./cmd/peers [-runs 3] [-out DIR] [-quick] [-capbridge BIN] [-clients LIST] [-cells LIST] [-profile DIR]
//
// -clients (raw,mcp-go,...) and -cells (64B/1,16KiB/32,...) measure a subset;
// the goals a subset has no samples for are reported as not measured.
// -profile DIR has each capbridge serve write its CPU and allocation
// profiles there.
//
// It writes DIR/results.json (every sample and every derived number),
// DIR/results.md (the table and the goals) and DIR/chart.svg. The exit
// status is 1 if any client failed in any cell or a child process was left
// behind; whether the goals are met does not change it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

func main() {
	// The raw server is this same binary, re-executed with rawecho.Env set.
	rawecho.MaybeServe()
	// So is the raw-relay's relay, with relayEnv set.
	maybeRelay()
	// And each sample, with sampleEnv set.
	maybeSample()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 3, "full runs over every cell and client")
	out := fs.String("out", "peers-out", "directory for results.json, results.md, chart.svg (stdio) and chart-http.svg")
	quick := fs.Bool("quick", false, "a few calls per cell: a smoke test of the harness, not a measurement")
	bin := fs.String("capbridge", "", "a capbridge binary to measure (default: build one from this repository)")
	clientList := fs.String("clients", strings.Join(clientNames(clients), ","), "the clients to measure, comma-separated")
	cellList := fs.String("cells", strings.Join(cellNames(cells), ","), "the cells to measure, comma-separated (payload/in flight)")
	profile := fs.String("profile", "", "write each capbridge serve's CPU and allocation profiles (pprof) into this directory, named by client, cell and run")
	const usage = "usage: peers [-runs N] [-out DIR] [-quick] [-capbridge BIN] [-clients LIST] [-cells LIST] [-profile DIR]"
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *runs < 1 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var sel selection
	var err error
	if sel.clients, err = parseClients(*clientList); err != nil {
		fmt.Fprintf(stderr, "peers: -clients: %v\n%s\n", err, usage)
		return 2
	}
	if sel.cells, err = parseCells(*cellList); err != nil {
		fmt.Fprintf(stderr, "peers: -cells: %v\n%s\n", err, usage)
		return 2
	}
	p := fullPlan
	if *quick {
		p = quickPlan
	}
	if *profile != "" {
		if *profile, err = filepath.Abs(*profile); err == nil {
			err = os.MkdirAll(*profile, 0o755)
		}
		if err != nil {
			fmt.Fprintf(stderr, "peers: -profile: %v\n", err)
			return 1
		}
	}
	if err := measureAll(context.Background(), *runs, p, sel, *quick, *bin, *out, *profile, stderr); err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s, %s, %s and %s\n", filepath.Join(*out, "results.json"), filepath.Join(*out, "results.md"), filepath.Join(*out, "chart.svg"), filepath.Join(*out, "chart-http.svg"))
	return 0
}

// measureAll runs the whole comparison and writes its outputs to outDir.
// It returns an error if a client failed anywhere or a child process was
// left behind; the outputs are written either way, when they can be.
func measureAll(ctx context.Context, runs int, p plan, sel selection, quick bool, bin, outDir, profileDir string, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "peers")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := capbridgeRoot(ctx)
	if err != nil {
		return err
	}
	// capbridge is built (and asked its version) only when it is measured.
	var ver string
	if sel.has("capbridge") || sel.has("capbridge-http") || sel.has("capbridge-http-2025") {
		if bin == "" {
			if bin, err = buildCapbridge(ctx, root, tmp); err != nil {
				return err
			}
		}
		out, err := exec.CommandContext(ctx, bin, "version").Output()
		if err != nil {
			return fmt.Errorf("%s version: %w", bin, err)
		}
		ver = strings.TrimPrefix(strings.TrimSpace(string(out)), "capbridge ")
	}
	var crelay, crelaySkip string
	if slices.ContainsFunc(sel.clients, func(cl client) bool { return isCRelay(cl.name) }) {
		if crelay, crelaySkip, err = buildCRelay(ctx, tmp); err != nil {
			return err
		}
		if crelaySkip != "" {
			fmt.Fprintf(log, "c-relay skipped: %s\n", crelaySkip)
		}
	}
	argv, senv := rawecho.Command()
	hargv, henv := rawecho.HTTPCommand()
	_, h25env := rawecho.HTTP2025Command()
	e := &env{serverArgv: argv, serverEnv: senv, httpArgv: hargv, httpEnv: henv, http2025Env: h25env, capbridge: bin, crelay: crelay, crelaySkip: crelaySkip, tmp: tmp, profileDir: profileDir}

	started := time.Now().UTC()
	samples := runAll(ctx, e, runs, p, sel, func(s sample) {
		if s.Err != "" {
			fmt.Fprintf(log, "run %d  %-22s %-10s FAILED: %s\n", s.Run, s.Cell, s.Client, s.Err)
			return
		}
		if s.Skipped != "" {
			return
		}
		fmt.Fprintf(log, "run %d  %-22s %-10s n=%-6d p50 %8s µs  p99 %8s µs  %8s calls/s\n", s.Run, s.Cell, s.Client, s.N, num(s.P50us), num(s.P99us), num(s.CallsPerS))
	})
	rep := &report{
		Meta: meta{
			Started: started.Format(time.RFC3339), Go: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(),
			Kernel: kernel(), Capbridge: ver, Commit: commit(ctx, root), Modules: modules(), Runs: runs, Quick: quick,
			Clients: clientNames(sel.clients), Cells: cellNames(sel.cells),
			Plan: planJSON{Calls64B: p.small, Calls16K: p.large, Warm: p.warm, CapPerSec: p.cap.Seconds()},
		},
		Samples: samples,
		Rows:    summarise(samples, sel),
		Goals:   goals(samples, runs),
		Floor:   floorRatios(samples, runs),
	}
	if err := writeOutputs(outDir, rep); err != nil {
		return err
	}
	var errs []string
	for _, s := range samples {
		if s.Err != "" {
			errs = append(errs, fmt.Sprintf("run %d, %s, %s failed", s.Run, s.Cell, s.Client))
		}
	}
	if left := stray(); len(left) > 0 {
		errs = append(errs, fmt.Sprintf("child processes left behind: %v", left))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s (details in %s)", strings.Join(errs, "; "), filepath.Join(outDir, "results.md"))
	}
	return nil
}

// capbridgeRoot returns the directory of the capbridge module this one
// replaces: the repository around bench/.
func capbridgeRoot(ctx context.Context) (string, error) {
	var stderr bytes.Buffer
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/capbridge/capbridge")
	list.Stderr = &stderr
	root, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("finding the capbridge module: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(root)), nil
}

// buildCapbridge builds cmd/capbridge in the capbridge module's own
// context, so the binary measured has the product's dependency versions
// rather than those the SDKs pull into this module.
func buildCapbridge(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "capbridge")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/capbridge")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building capbridge in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// commit names the repository's checked-out commit, with "-dirty" when
// tracked files differ from it; "" when git cannot tell.
func commit(ctx context.Context, root string) string {
	rev, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(rev))
	if exec.CommandContext(ctx, "git", "-C", root, "diff", "--quiet", "HEAD").Run() != nil {
		c += "-dirty"
	}
	return c
}

func writeOutputs(dir string, rep *report) error {
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
	var md, svg bytes.Buffer
	writeMarkdown(&md, rep)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	note := fmt.Sprintf("%s · %s · %d run(s)", rep.Meta.Started, rep.Meta.Capbridge, rep.Meta.Runs)
	if rep.Meta.Quick {
		note += " · -quick: a smoke test, the numbers mean nothing"
	}
	// Two charts: the clients over stdio, and over HTTP, each against
	// its own server.
	stdio, overHTTP := splitRows(rep.Rows)
	if err := writeSVG(&svg, stdio, "capbridge vs Go MCP SDKs over stdio, against the same raw server (median over runs)", note); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "chart.svg"), svg.Bytes(), 0o644); err != nil {
		return err
	}
	if len(overHTTP) == 0 {
		return nil
	}
	svg.Reset()
	if err := writeSVG(&svg, overHTTP, "capbridge vs Go MCP SDKs over Streamable HTTP, against the same raw server (median over runs)", note); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "chart-http.svg"), svg.Bytes(), 0o644)
}

// splitRows parts the rows of the clients over stdio from those over
// HTTP (whose names end in -http or -http-<era>).
func splitRows(rows []row) (stdio, overHTTP []row) {
	for _, r := range rows {
		if strings.Contains(r.Client, "-http") {
			overHTTP = append(overHTTP, r)
		} else {
			stdio = append(stdio, r)
		}
	}
	return stdio, overHTTP
}

// modules returns the versions of the SDK modules linked into this binary.
func modules() map[string]string {
	m := map[string]string{}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return m
	}
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "github.com/mark3labs/") || strings.HasPrefix(d.Path, "github.com/modelcontextprotocol/") {
			m[d.Path] = d.Version
		}
	}
	return m
}

func kernel() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}
