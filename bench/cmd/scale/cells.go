package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/bench/procstat"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/testkit/bigtools"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// inFlight is the calls in flight in all, in the conns and soak cells.
const inFlight = 32

// perGrant is how many connections share a grant: the default
// max_conns_per_grant.
const perGrant = 16

// text is each call's 64-byte argument.
var text = strings.Repeat("0123456789abcdef", 4)

// callTimeout bounds one call: a call that takes longer is unanswered.
const callTimeout = time.Minute

// connsSample is one bridge with n programs connected and 32 calls in
// flight spread over all of them.
type connsSample struct {
	Run       int     `json:"run"`
	Conns     int     `json:"conns"`
	Floor     bool    `json:"floor,omitempty"` // measured against the floor relay
	N         int     `json:"n"`
	CallsPerS float64 `json:"calls_per_s"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	// Per call, over the timed calls: the bridge's CPU, context switches
	// and read/write-family syscalls; the server's CPU; and the CPU of
	// this process, which runs the clients.
	BridgeCPUus float64 `json:"bridge_cpu_us"`
	BridgeCtxSw float64 `json:"bridge_ctxsw"`
	BridgeSys   float64 `json:"bridge_syscalls"`
	ServerCPUus float64 `json:"server_cpu_us"`
	ClientCPUus float64 `json:"client_cpu_us"`
}

// measureConns measures the conns cell at n connections against a
// capbridge serve, or with floor against the floor relay (floor.go).
func measureConns(ctx context.Context, bin, tmp string, n, calls int, floor bool) (connsSample, error) {
	s := connsSample{Conns: n, Floor: floor}
	var pids [3]int // the middle, its server, and this process
	var stop func() error
	var cs []*capwire.Client
	var err error
	if floor {
		f, ferr := startFloor(ctx, tmp)
		if ferr != nil {
			return s, ferr
		}
		pids[0], pids[1], stop = f.cmd.Process.Pid, f.serverPID, f.stop
		cs, err = dialN(ctx, f.sock, n, func() (string, error) { return "floor", nil })
	} else {
		b, berr := startBridge(ctx, bin, tmp, 1, "")
		if berr != nil {
			return s, berr
		}
		pids[0], stop = b.cmd.Process.Pid, b.stop
		if pids[1], err = b.serverPID(ctx, "s0"); err == nil {
			cs, err = b.dial(ctx, n, perGrant, "s0")
		}
	}
	if err != nil {
		return s, errors.Join(err, stop())
	}
	// Every connection warm, and checked, before the clock starts.
	for _, c := range cs {
		if err = echo(ctx, c, "s0", text); err != nil {
			break
		}
	}
	var lat []time.Duration
	var wall time.Duration
	var before, after [3]procstat.Counters
	if err == nil {
		before, err = countAll(pids)
	}
	if err == nil {
		lat, wall, err = spread(ctx, cs, calls)
	}
	if err == nil {
		after, err = countAll(pids)
	}
	closeAll(cs)
	if err = errors.Join(err, stop()); err != nil {
		return s, err
	}
	perCall := func(v float64) float64 { return v / float64(len(lat)) }
	bd, sd, cd := after[0].Sub(before[0]), after[1].Sub(before[1]), after[2].Sub(before[2])
	s.BridgeCPUus, s.BridgeCtxSw, s.BridgeSys = perCall(us(bd.CPU)), perCall(float64(bd.CtxSw)), perCall(float64(bd.Syscalls))
	s.ServerCPUus, s.ClientCPUus = perCall(us(sd.CPU)), perCall(us(cd.CPU))
	slices.Sort(lat)
	s.N = len(lat)
	s.CallsPerS = float64(len(lat)) / wall.Seconds()
	s.P50us = us(lat[(len(lat)-1)/2])
	s.P99us = us(lat[(len(lat)-1)*99/100])
	return s, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// spread makes calls calls with inFlight of them in flight, the k-th call
// of caller g on connection (g + inFlight·k) mod len(cs), so that every
// connection carries calls and at most inFlight are in flight in all.
func spread(ctx context.Context, cs []*capwire.Client, calls int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, calls)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	start := time.Now()
	for g := range inFlight {
		wg.Go(func() {
			for k := 0; ; k++ {
				i := next.Add(1) - 1
				if i >= int64(calls) {
					return
				}
				c := cs[(g+inFlight*k)%len(cs)]
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				t0 := time.Now()
				err := echo(cctx, c, "s0", text)
				lat[i] = time.Since(t0)
				cancel()
				if err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(calls))
					return
				}
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start), firstErr
}

// memorySample is the bridge's resident memory with its servers booted
// and no program connected, then with idle authenticated connections
// that have each made one call.
type memorySample struct {
	Run     int   `json:"run"`
	Servers int   `json:"servers"`
	Idle    int   `json:"idle"`
	RSSBase int64 `json:"rss_base"`
	RSSIdle int64 `json:"rss_idle"`
}

func measureMemory(ctx context.Context, bin, tmp string, servers, idle int) (memorySample, error) {
	s := memorySample{Servers: servers, Idle: idle}
	b, err := startBridge(ctx, bin, tmp, servers, "")
	if err != nil {
		return s, err
	}
	names := make([]string, servers)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	// One call to each server first, so that both figures have paid for
	// what the first call sets up.
	cs, err := b.dial(ctx, 1, perGrant, names...)
	for i := 0; err == nil && i < servers; i++ {
		err = echo(ctx, cs[0], names[i], text)
	}
	closeAll(cs)
	if err == nil {
		s.RSSBase, _, _, err = procStatus(b.cmd.Process.Pid)
	}
	if err == nil {
		cs, err = b.dial(ctx, idle, perGrant, names...)
		for i := 0; err == nil && i < len(cs); i++ {
			err = echo(ctx, cs[i], names[i%servers], text)
		}
		if err == nil {
			s.RSSIdle, _, _, err = procStatus(b.cmd.Process.Pid)
		}
		closeAll(cs)
	}
	return s, errors.Join(err, b.stop())
}

// serversSample is a bridge booting n stdio servers: from serve's start
// to its ready line (every server ready), its resident memory then, the
// CPU it and its servers spent to get there, and, measured beside it,
// the floor: this process alone starting and handshaking as many
// servers (launch).
type serversSample struct {
	Run         int     `json:"run"`
	Servers     int     `json:"servers"`
	ReadyMS     float64 `json:"ready_ms"`
	RSS         int64   `json:"rss"`
	BridgeCPUms float64 `json:"bridge_cpu_ms"`
	ServerCPUms float64 `json:"server_cpu_ms"`
	LaunchMS    float64 `json:"launch_ms"`
}

// measureServers boots a bridge of n servers and launches n servers
// without one, the launch first in odd runs, so that neither always
// meets the machine the other left.
func measureServers(ctx context.Context, bin, tmp string, n, run int) (serversSample, error) {
	s := serversSample{Servers: n}
	launched := func() error {
		d, err := launch(ctx, n)
		s.LaunchMS = float64(d) / float64(time.Millisecond)
		return err
	}
	if run%2 == 1 {
		if err := launched(); err != nil {
			return s, err
		}
	}
	if err := bootServers(ctx, bin, tmp, &s); err != nil {
		return s, err
	}
	if run%2 == 0 {
		return s, launched()
	}
	return s, nil
}

// bootServers is the bridge's part of measureServers.
func bootServers(ctx context.Context, bin, tmp string, s *serversSample) error {
	b, err := startBridge(ctx, bin, tmp, s.Servers, "")
	if err != nil {
		return err
	}
	s.ReadyMS = float64(b.booted) / float64(time.Millisecond)
	if c, cerr := cpuOf(b.cmd.Process.Pid); cerr == nil {
		s.BridgeCPUms = float64(c) / float64(time.Millisecond)
	} else {
		err = cerr
	}
	if err == nil {
		s.RSS, _, _, err = procStatus(b.cmd.Process.Pid)
	}
	if err == nil {
		status, serr := b.status(ctx)
		err = serr
		if serr == nil {
			var cpu time.Duration
			for _, sv := range status.Servers {
				c, cerr := cpuOf(sv.PID)
				if cerr != nil {
					err = cerr
					break
				}
				cpu += c
			}
			s.ServerCPUms = float64(cpu) / float64(time.Millisecond)
		}
	}
	return errors.Join(err, b.stop())
}

// soakResult is the soak: calls at 32 in flight on soakConns
// connections, the server SIGKILLed every KillEvery calls, and the
// bridge's memory, threads and descriptors at each kill.
type soakResult struct {
	Calls      int              `json:"calls"`
	KillEvery  int              `json:"kill_every"`
	Results    int64            `json:"results"`
	Denials    int64            `json:"denials"`
	Unanswered int64            `json:"unanswered"`
	Kills      int              `json:"kills"`
	Restarts   int64            `json:"restarts"`
	WallS      float64          `json:"wall_s"`
	Points     []soakPoint      `json:"points"`
	Denied     map[string]int64 `json:"denied_by_code"`
}

type soakPoint struct {
	Calls   int   `json:"calls"`
	RSS     int64 `json:"rss"`
	Threads int   `json:"threads"`
	FDs     int   `json:"fds"`
}

// soakServer lets a killed server come back within tens of
// milliseconds (the default backoff starts at 1 s and doubles), so that
// the soak is spent calling rather than waiting out restart backoff.
const soakServer = "restart_backoff = \"20ms\"\nrestart_max = \"100ms\"\n"

// soakConns is how many programs the soak's calls come from, each with
// a grant of its own: a grant may cause at most audit_grant_budget (64
// MiB) of audit lines, about a hundred thousand calls, after which its
// calls are refused; a million calls are many programs' work.
const soakConns = 16

func soak(ctx context.Context, bin, tmp string, p plan, log io.Writer) (*soakResult, error) {
	r := &soakResult{Calls: p.soakCalls, KillEvery: p.soakKillAt, Denied: map[string]int64{}}
	b, err := startBridge(ctx, bin, tmp, 1, soakServer)
	if err != nil {
		return r, err
	}
	cs, err := b.dial(ctx, soakConns, 1, "s0")
	if err != nil {
		return r, errors.Join(err, b.stop())
	}
	var mu sync.Mutex
	var next, done atomic.Int64
	var wg sync.WaitGroup
	point := func(n int) {
		rss, th, fds, err := procStatus(b.cmd.Process.Pid)
		if err == nil {
			r.Points = append(r.Points, soakPoint{Calls: n, RSS: rss, Threads: th, FDs: fds})
			fmt.Fprintf(log, "soak  %8d calls  RSS %.1f MiB  threads %d  fds %d\n", n, mib(rss), th, fds)
		}
	}
	point(0)
	start := time.Now()
	// The kills and the checkpoints run on their own goroutine, at each
	// multiple of KillEvery completed calls.
	kill := make(chan int, p.soakCalls/p.soakKillAt+1)
	killDone := make(chan error, 1)
	go func() {
		var kerr error
		for n := range kill {
			point(n)
			if n >= p.soakCalls {
				continue
			}
			st, err := b.status(ctx)
			if err != nil {
				kerr = err
				continue
			}
			for _, sv := range st.Servers {
				if sv.PID > 0 {
					_ = syscall.Kill(sv.PID, syscall.SIGKILL)
					r.Kills++
				}
			}
		}
		killDone <- kerr
	}()
	for g := range inFlight {
		c := cs[g%len(cs)]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(p.soakCalls) {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, p.soakTimeout)
				res, err := c.Call(cctx, "s0", "echo", map[string]any{"text": text})
				cancel()
				var d *capwire.Denied
				mu.Lock()
				switch {
				case err == nil && !res.IsError && len(res.Content) == 1 && res.Content[0].Text == text:
					r.Results++
				case errors.As(err, &d):
					r.Denials++
					r.Denied[d.Code]++
				default:
					r.Unanswered++
				}
				mu.Unlock()
				if n := done.Add(1); n%int64(p.soakKillAt) == 0 {
					kill <- int(n)
				}
			}
		})
	}
	wg.Wait()
	close(kill)
	kerr := <-killDone
	r.WallS = time.Since(start).Seconds()
	if st, err := b.status(ctx); err == nil && len(st.Servers) == 1 {
		r.Restarts = st.Servers[0].Restarts
	}
	closeAll(cs)
	err = errors.Join(kerr, b.stop())
	if r.Unanswered > 0 {
		err = errors.Join(err, fmt.Errorf("%d calls unanswered", r.Unanswered))
	}
	return r, err
}

// bigSample is a bridge serving a rawecho that lists Tools tools
// (internal/testkit/bigtools, realistic schemas of about a kilobyte, 500
// to a page) beside one that lists smallTools: how long after the big
// server wrote its listing's last page serve was ready, the bridge's RSS
// then, and the p50 of echo calls made one at a time to each server,
// alternately on one connection, so that both p50s meet the same
// machine; beside it, how long codegen takes to generate each language's
// façade of the same listing in this process.
type bigSample struct {
	Run          int                `json:"run"`
	Tools        int                `json:"tools"`
	ReadyAfterMS float64            `json:"ready_after_list_ms"`
	RSS          int64              `json:"rss"`
	P50us        float64            `json:"p50_us"`
	P50SmallUs   float64            `json:"p50_small_us"`
	GenerateMS   map[string]float64 `json:"generate_ms"`
}

// smallTools is how many tools the big cell's baseline server lists.
const smallTools = 10

func measureBig(ctx context.Context, bin, tmp string, n, calls int) (bigSample, error) {
	s := bigSample{Tools: n, GenerateMS: map[string]float64{}}
	listed := filepath.Join(tmp, fmt.Sprintf("listed-%d", n))
	argv, env := rawecho.ToolsCommand(n, listed)
	sargv, senv := rawecho.ToolsCommand(smallTools, "")
	b, err := startBridgeOf(ctx, bin, tmp, "", []serverCmd{{argv, env}, {sargv, senv}})
	if err != nil {
		return s, err
	}
	defer os.Remove(listed)
	ns, err := os.ReadFile(listed)
	if err == nil {
		var at int64
		if at, err = strconv.ParseInt(string(ns), 10, 64); err == nil {
			s.ReadyAfterMS = float64(b.readyAt.Sub(time.Unix(0, at))) / float64(time.Millisecond)
		}
	}
	if err == nil {
		s.RSS, _, _, err = procStatus(b.cmd.Process.Pid)
	}
	var cs []*capwire.Client
	if err == nil {
		cs, err = b.dial(ctx, 1, perGrant, "s0", "s1")
	}
	if err == nil {
		var lat [2][]time.Duration // s0, the big server; s1, the small one
		for i := 0; err == nil && i < 2*(calls+calls/10); i++ {
			t0 := time.Now()
			err = echo(ctx, cs[0], "s"+strconv.Itoa(i%2), text)
			if i >= 2*(calls/10) { // the first tenth warms up
				lat[i%2] = append(lat[i%2], time.Since(t0))
			}
		}
		closeAll(cs)
		if err == nil {
			p50 := func(l []time.Duration) float64 { slices.Sort(l); return us(l[(len(l)-1)/2]) }
			s.P50us, s.P50SmallUs = p50(lat[0]), p50(lat[1])
		}
	}
	if err = errors.Join(err, b.stop()); err != nil {
		return s, err
	}
	// A listing of as many generated tools, read as the bridge reads a
	// server's pages: what the façades are generated from.
	var tools []codegen.Tool
	for from := 0; from < n; from += rawecho.PageSize {
		page, perr := codegen.ParseListing(bigtools.Page(nil, from, rawecho.PageSize, n, ""))
		if perr != nil {
			return s, perr
		}
		tools = append(tools, page...)
	}
	for _, lang := range []codegen.Lang{codegen.Go, codegen.TypeScript, codegen.Python} {
		runtime.GC() // each language starts from the same heap
		t0 := time.Now()
		if _, err := codegen.Generate("s0", tools, codegen.Options{Lang: lang}); err != nil {
			return s, fmt.Errorf("generating %s: %w", lang, err)
		}
		s.GenerateMS[string(lang)] = float64(time.Since(t0)) / float64(time.Millisecond)
	}
	return s, nil
}
