// Package leakcheck verifies that a test left no goroutines, file
// descriptors or child processes behind.
//
// Tests call [Check] at their start and defer the returned function, or
// call [Main] from TestMain to check a whole package's run. Checks poll
// for a bounded time (goroutines and children take a moment to wind
// down) and then fail with a listing of what remained.
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// settle is how long a check waits for stragglers to finish before it
// reports them. Goroutines blocked on a closing pipe or a reaped child
// normally finish within milliseconds, and a clean check returns as soon
// as they have; the bound is generous because on a loaded machine under
// the race detector a winding-down goroutine can wait seconds for a CPU,
// and only a real leak ever waits it out.
const settle = 30 * time.Second

// Check snapshots the goroutines and file descriptors now open and
// returns a function that fails t if, after a settling period, more
// remain or any child process of this test binary is still alive.
func Check(t testing.TB) func() {
	t.Helper()
	pollerOnce.Do(startPoller)
	before := goroutines()
	fds := openFDs()
	return func() {
		t.Helper()
		if t.Failed() {
			// A failed test often leaves its peers blocked on purpose;
			// reporting those too would bury the real failure.
			return
		}
		if extra := waitGoroutines(before); len(extra) > 0 {
			t.Errorf("leakcheck: %d goroutine(s) leaked:\n%s", len(extra), strings.Join(extra, "\n\n"))
		}
		if extra := waitFDs(fds); len(extra) > 0 {
			t.Errorf("leakcheck: %d file descriptor(s) leaked: %s", len(extra), strings.Join(extra, ", "))
		}
		if kids := waitChildren(); len(kids) > 0 {
			t.Errorf("leakcheck: child process(es) still alive: %s", strings.Join(kids, "; "))
		}
	}
}

var pollerOnce sync.Once

// startPoller makes the runtime open its network poller (an epoll and an
// eventfd it keeps for the life of the process) before the first
// snapshot: a test that happened to be the first to use it would
// otherwise be blamed for two descriptors it does not own.
func startPoller() {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
}

// Main runs the package's tests and then fails the run if any child
// process of the test binary survived them. Use it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if kids := waitChildren(); len(kids) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: child process(es) survived the tests: %s\n", strings.Join(kids, "; "))
			code = 1
		}
	}
	os.Exit(code)
}

// Children lists the live descendants of this process (pid and command
// line), walking /proc. A zombie counts: it means nobody reaped it.
func Children() []string {
	self := os.Getpid()
	parent := map[int]int{}
	state := map[int]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may itself contain
		// spaces or parentheses; the fields after the last ')' are fixed.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		state[pid] = f[0]
	}
	var out []string
	for pid := range parent {
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == self {
				cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				out = append(out, fmt.Sprintf("pid %d state %s: %s", pid, state[pid], strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Named lists the pids of every process on the host whose command line
// holds marker: for a test that left a process with a unique argument
// (`sleep 123456.789`) wherever it may have gone, a jail's PID namespace
// or a session of its own, to find it, or to see that it is gone.
func Named(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

func waitChildren() []string { return poll(Children) }

func waitGoroutines(before map[string]bool) []string {
	return poll(func() []string { return leakedNow(before) })
}

// leakedNow lists the goroutines alive now that were not in before.
func leakedNow(before map[string]bool) []string {
	var extra []string
	for id, g := range goroutineStacks() {
		if !before[id] && !benign(g) {
			extra = append(extra, g)
		}
	}
	sort.Strings(extra)
	return extra
}

// poll calls f until it reports nothing or the settling time runs out,
// and returns its last report.
func poll(f func() []string) []string {
	deadline := time.Now().Add(settle)
	for {
		r := f()
		if len(r) == 0 || time.Now().After(deadline) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func goroutines() map[string]bool {
	m := map[string]bool{}
	for id := range goroutineStacks() {
		m[id] = true
	}
	return m
}

// goroutineStacks maps "goroutine N" to its full stack text.
func goroutineStacks() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	m := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, " [")
		m[head] = g
	}
	return m
}

// benign reports goroutines owned by the runtime or the testing package,
// which come and go independently of the code under test.
func benign(stack string) bool {
	for _, s := range []string{
		"leakcheck.goroutineStacks", // the goroutine running the check
		"testing.(*T).Run(",
		"testing.(*M).",
		"testing.runTests",
		"testing.tRunner(",
		"testing.(*F).Fuzz",
		"os/signal.signal_recv",
		"os/signal.loop",
		"runtime.ensureSigM",
	} {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}

// openFDs snapshots the open descriptors as "fd -> target" strings, so a
// number closed and reused for something else counts as new.
func openFDs() map[string]bool {
	m := map[string]bool{}
	for _, d := range describeFDs() {
		m[d] = true
	}
	return m
}

func describeFDs() []string {
	var out []string
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || strings.HasSuffix(target, "/fd") {
			// Gone already, or the directory handle ReadDir itself used.
			continue
		}
		out = append(out, e.Name()+" -> "+target)
	}
	return out
}

func waitFDs(before map[string]bool) []string {
	return poll(func() []string { return fdsNow(before) })
}

// fdsNow lists the descriptors open now that were not in before.
func fdsNow(before map[string]bool) []string {
	var extra []string
	for _, d := range describeFDs() {
		if !before[d] {
			extra = append(extra, d)
		}
	}
	return extra
}
