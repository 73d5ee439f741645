package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capbridge/capbridge/bench/procstat"
)

// A cell is one payload size and one number of calls in flight.
type cell struct {
	Bytes    int `json:"bytes"`
	InFlight int `json:"in_flight"`
}

func (c cell) String() string {
	size := fmt.Sprintf("%d B", c.Bytes)
	if c.Bytes >= 1024 && c.Bytes%1024 == 0 {
		size = fmt.Sprintf("%d KiB", c.Bytes/1024)
	}
	return fmt.Sprintf("%s, %d in flight", size, c.InFlight)
}

var cells = []cell{{64, 1}, {64, 32}, {16 << 10, 1}, {16 << 10, 32}}

// plan is how much each cell measures.
type plan struct {
	small, large int           // timed calls at 64 B and at 16 KiB
	warm         int           // checked warm-up calls (twice that with many in flight)
	cap          time.Duration // the timed phase of a cell stops after this
}

func (p plan) calls(c cell) int {
	if c.Bytes <= 64 {
		return p.small
	}
	return p.large
}

// fullPlan's 10000 calls at 16 KiB give the bridge's and the server's
// CPU, read in 10 ms clock ticks, about a percent of resolution where the
// C relay spends ~30 µs a call: goal 4 compares them within 10 %.
var (
	fullPlan  = plan{small: 20000, large: 10000, warm: 200, cap: 10 * time.Second}
	quickPlan = plan{small: 300, large: 60, warm: 20, cap: 5 * time.Second}
)

// lifetimeSlack is how long a peer may live beyond its timed phase (boot,
// warm-up, shutdown) before its context ends and its children are killed:
// a backstop against a hung peer, never reached by a working one.
const lifetimeSlack = 3 * time.Minute

// A sample is one client measured in one cell of one run. Per-call costs
// are by process role: "client" (this process), "bridge" (capbridge
// serve, or raw-relay's relay), "server" (the raw server).
type sample struct {
	Run       int                `json:"run"`
	Cell      cell               `json:"cell"`
	Client    string             `json:"client"`
	Order     int                `json:"order"` // position among the clients in this cell and run
	N         int                `json:"n"`     // timed calls completed
	Capped    bool               `json:"capped,omitempty"`
	WallS     float64            `json:"wall_s"`
	P50us     float64            `json:"p50_us"`
	P99us     float64            `json:"p99_us"`
	CallsPerS float64            `json:"calls_per_s"`
	CPUus     map[string]float64 `json:"cpu_us_per_call"`
	CtxSw     map[string]float64 `json:"ctx_switches_per_call"`
	Syscalls  map[string]float64 `json:"rw_syscalls_per_call"`
	Err       string             `json:"error,omitempty"`
	// Skipped says why the client was not measured on this machine
	// (c-relay without a C compiler); a skipped sample is no failure.
	Skipped string `json:"skipped,omitempty"`
}

// payload returns n bytes of text that needs no escaping in JSON, varied
// enough that a wrong slice of it would not compare equal.
func payload(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[(i*7+i/len(alphabet))%len(alphabet)]
	}
	return string(b)
}

// measure starts cl in c, checks it with warm-up calls, times its calls
// and stops it. A failure anywhere is the sample's Err.
func measure(ctx context.Context, e *env, cl client, c cell, p plan) sample {
	s := sample{Cell: c, Client: cl.name}
	ctx, cancel := context.WithTimeout(ctx, p.cap+lifetimeSlack)
	defer cancel()
	text := payload(c.Bytes)
	pe, err := cl.start(ctx, e, text, c.InFlight)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	err = timeCalls(ctx, pe, text, c, p, &s)
	if cerr := pe.close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close: %w", cerr))
	}
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

// timeCalls runs the warm-up and the timed phase and fills in s.
func timeCalls(ctx context.Context, pe peer, text string, c cell, p plan, s *sample) error {
	check := func(ctx context.Context) error {
		got, err := pe.call(ctx, text)
		if err != nil {
			return err
		}
		if got != text {
			return fmt.Errorf("echo of %d bytes came back as %d bytes %.40q…", len(text), len(got), got)
		}
		return nil
	}
	for range p.warm {
		if err := check(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if c.InFlight > 1 {
		if _, _, err := fanOut(ctx, c.InFlight, p.warm, time.Time{}, check); err != nil {
			return fmt.Errorf("concurrent warm-up: %w", err)
		}
	}

	// Start the timed phase from a collected heap, so it does not pay
	// for the garbage of the warm-up.
	runtime.GC()
	procs := pe.procs()
	before, err := snapshot(procs)
	if err != nil {
		return err
	}
	start := time.Now()
	lat, capped, err := fanOut(ctx, c.InFlight, p.calls(c), start.Add(p.cap), check)
	wall := time.Since(start)
	after, serr := snapshot(procs)
	if err = errors.Join(err, serr); err != nil {
		return err
	}
	if len(lat) == 0 {
		return errors.New("no call completed")
	}
	slices.Sort(lat)
	n := float64(len(lat))
	s.N, s.Capped, s.WallS = len(lat), capped, wall.Seconds()
	s.P50us = us(lat[(len(lat)-1)/2])
	s.P99us = us(lat[(len(lat)-1)*99/100])
	s.CallsPerS = n / wall.Seconds()
	s.CPUus, s.CtxSw, s.Syscalls = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for role, b := range before {
		d := after[role].Sub(b)
		s.CPUus[role] = us(d.CPU) / n
		s.CtxSw[role] = float64(d.CtxSw) / n
		s.Syscalls[role] = float64(d.Syscalls) / n
	}
	return nil
}

// ok says s has numbers: it neither failed nor was skipped.
func (s sample) ok() bool { return s.Err == "" && s.Skipped == "" }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// snapshot reads the counters of this process ("client") and of procs.
func snapshot(procs []proc) (map[string]procstat.Counters, error) {
	m := map[string]procstat.Counters{}
	self, err := procstat.Self()
	if err != nil {
		return nil, fmt.Errorf("counters of this process: %w", err)
	}
	m["client"] = self
	for _, p := range procs {
		c, err := procstat.Of(p.PID, true)
		if err != nil {
			return nil, fmt.Errorf("counters of the %s (pid %d): %w", p.Role, p.PID, err)
		}
		m[p.Role] = c
	}
	return m, nil
}

// fanOut makes n calls with inflight of them in flight at once (on this
// goroutine when inflight is 1), stopping early at the first error or,
// when deadline is not zero, once it has passed. It returns the latency
// of each completed call and whether the deadline cut the run short.
func fanOut(ctx context.Context, inflight, n int, deadline time.Time, call func(context.Context) error) ([]time.Duration, bool, error) {
	lat := make([]time.Duration, n)
	var (
		next, done atomic.Int64
		capped     atomic.Bool
		errOnce    sync.Once
		firstErr   error
	)
	worker := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(n) {
				return
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				capped.Store(true)
				return
			}
			t0 := time.Now()
			err := call(ctx)
			lat[i] = time.Since(t0)
			if err != nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("call %d: %w", i, err) })
				next.Store(int64(n)) // the others stop after their current call
				return
			}
			done.Add(1)
		}
	}
	if inflight <= 1 {
		worker()
	} else {
		var wg sync.WaitGroup
		for range inflight {
			wg.Go(worker)
		}
		wg.Wait()
	}
	if firstErr != nil {
		return nil, false, firstErr
	}
	out := make([]time.Duration, 0, done.Load())
	for _, d := range lat {
		if d > 0 {
			out = append(out, d)
		}
	}
	return out, capped.Load(), nil
}

// runAll measures each selected client in each selected cell, runs
// times. Within a cell the clients' order rotates from cell to cell and
// run to run, so no client always goes first or last. progress gets one
// line per sample.
func runAll(ctx context.Context, e *env, runs int, p plan, sel selection, progress func(sample)) []sample {
	var out []sample
	for run := range runs {
		for ci, c := range sel.cells {
			for pos := range sel.clients {
				cl := sel.clients[(pos+run+ci)%len(sel.clients)]
				s := measureApart(ctx, e, cl, c, p, run)
				s.Run, s.Order = run, pos
				progress(s)
				out = append(out, s)
			}
		}
	}
	return out
}

// stray lists the processes this process left running: every child
// should have been reaped by the time a run ends.
func stray() []int {
	kids, _ := children(os.Getpid())
	return kids
}
