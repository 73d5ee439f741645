package mcpwire

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// subreapEnv re-runs TestSubreapSweep's body in a subprocess of the test
// binary: PR_SET_CHILD_SUBREAPER is process-wide and cannot be undone
// for the rest of a test run.
const subreapEnv = "MCPWIRE_TEST_SUBREAP"

// escapee is the scenario of a server whose grandchild leaves the
// process group and session, ignores SIGTERM and never reads stdin.
var escapee = mcptest.Scenario{Grandchild: true, GrandchildSetsid: true}

// startEscapee starts escapee and returns the client, the grandchild's
// pid and a pidfd on it (the caller closes it), checking that it did
// escape the group.
func startEscapee(t *testing.T, sweep bool) (*Client, int, int) {
	t.Helper()
	cmd := testCommand(escapee)
	cmd.SweepDescendants = sweep
	return startEscapeeCmd(t, cmd)
}

// startEscapeeCmd is startEscapee with the command given.
func startEscapeeCmd(t *testing.T, cmd Command) (*Client, int, int) {
	t.Helper()
	c, err := Start(context.Background(), cmd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The grandchild's pid is on the server's stderr, written before it
	// serves; nothing signals the drainer's progress, so poll it, bounded.
	var gpid int
	for deadline := time.Now().Add(waitFor); ; {
		_, after, ok := strings.Cut(string(c.StderrTail()), "grandchild pid ")
		if f := strings.Fields(after); ok && len(f) > 0 {
			if gpid, err = strconv.Atoi(f[0]); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no grandchild pid in the stderr tail %q", c.StderrTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fd, err := unix.PidfdOpen(gpid, 0)
	if err != nil {
		t.Fatalf("pidfd on the grandchild %d: %v", gpid, err)
	}
	sid, err1 := unix.Getsid(gpid)
	pgid, err2 := unix.Getpgid(gpid)
	if err1 != nil || err2 != nil || sid != gpid || pgid == c.Pid() {
		t.Fatalf("grandchild %d: sid %d pgid %d (%v, %v); want a session of its own, outside group %d", gpid, sid, pgid, err1, err2, c.Pid())
	}
	return c, gpid, fd
}

// exited reports whether the process behind pidfd has exited, without
// waiting.
func exited(t *testing.T, pidfd int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		t.Fatalf("poll pidfd: %v", err)
	}
	return n == 1
}

// TestChildSweep: a clean Close leaves no escaped grandchild behind when
// the sweep is on, and (the control) leaves it running when it is off.
func TestChildSweep(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c, gpid, fd := startEscapee(t, false)
		defer unix.Close(fd)
		closeClean(t, c)
		if exited(t, fd) {
			t.Fatalf("grandchild %d ended without a sweep; the scenario does not escape", gpid)
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("on", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c, gpid, fd := startEscapee(t, true)
		defer unix.Close(fd)
		ex, err := c.Close()
		if err != nil || ex.How != ExitedOnEOF || ex.Code != 0 {
			t.Errorf("close: %+v, %v; want a clean exit after stdin closed", ex, err)
		}
		// Close returns after the sweep, so the grandchild has exited by
		// now: no waiting.
		if !exited(t, fd) {
			t.Fatalf("grandchild %d still runs after Close", gpid)
		}
		if ex.Took >= mcptest.GrandchildLife {
			t.Errorf("shutdown took %v, as long as the grandchild lives", ex.Took)
		}
	})
}

// TestSubreapSweep: in a subreaper, the escaped grandchild becomes our
// child when the server exits, and the sweep both kills and reaps it, so
// its pid is gone from /proc (not a zombie) when Close returns; an
// orphan that dies while nobody retires anything is reaped too.
func TestSubreapSweep(t *testing.T) {
	if os.Getenv(subreapEnv) == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^TestSubreapSweep$", "-test.v")
		cmd.Env = append(os.Environ(), subreapEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSubreapSweep") {
			t.Fatalf("subprocess: %v\n%s", err, out)
		}
		return
	}
	if err := Subreap(); err != nil {
		t.Fatal(err)
	}
	// After Subreap, whose reaper goroutine lives for the process, and
	// after the runtime's poller exists (a pipe creates it, for good),
	// which a fresh process has yet to start.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	defer leakcheck.Check(t)()
	self := os.Getpid()

	c, gpid, fd := startEscapee(t, true)
	defer unix.Close(fd)
	if _, err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !exited(t, fd) {
		t.Fatalf("grandchild %d still runs after Close", gpid)
	}
	if st, ok := readStat(gpid); ok {
		t.Fatalf("grandchild %d left in /proc (state %c, parent %d); want it reaped", gpid, st.state, st.ppid)
	}

	// The orphan reaper: the server dies on its own and nothing retires
	// it yet; its escaped grandchild, now our child, is killed by hand and
	// must be reaped on its SIGCHLD.
	c, gpid, fd2 := startEscapee(t, true)
	defer unix.Close(fd2)
	// SIGKILL, not the crash tool: the client sees the death only once
	// stdout ends, which the grandchild delays; the reap is what
	// reparents the grandchild. The leader is unreaped, so its pid is
	// still its own.
	if err := unix.Kill(c.Pid(), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.car.(*streamCarrier).conn.(*childConn).exited
	if st, ok := readStat(gpid); !ok || st.ppid != self {
		t.Fatalf("orphaned grandchild %d: %+v, %v; want it reparented to us (%d)", gpid, st, ok, self)
	}
	if err := unix.PidfdSendSignal(fd2, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	// Nothing signals the reaper's pass to a test: poll /proc, bounded.
	for deadline := time.Now().Add(waitFor); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := readStat(gpid); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d never reaped", gpid)
		}
	}
	if _, err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCustodySince: custody finds a process carrying the token only when
// it started no earlier than the leader's starttime it is given; a later
// bound skips its environment (a real process, its stat and environ read
// from /proc).
func TestCustodySince(t *testing.T) {
	defer leakcheck.Check(t)()
	token := newCustodyToken()
	cmd := exec.Command("sleep", "600")
	cmd.Env = []string{custodyEnv + "=" + token}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	pid := cmd.Process.Pid
	st, ok := readStat(pid)
	if !ok || st.start == 0 {
		t.Fatalf("no starttime for pid %d", pid)
	}
	start := st.start
	self := os.Getpid()
	if _, ok := custody(token, self, start)[pid]; !ok {
		t.Errorf("custody with the carrier's own starttime misses pid %d", pid)
	}
	if _, ok := custody(token, self, 0)[pid]; !ok {
		t.Errorf("custody with no bound misses pid %d", pid)
	}
	if found := custody(token, self, start+1); len(found) != 0 {
		t.Errorf("custody bounded after the carrier started found %v", found)
	}
}

// TestBootTicks: the bound taken before a fork is no later than the
// child's starttime in /proc, and the clock read after it no earlier, so
// bootTicks counts in the units and from the origin the kernel uses.
func TestBootTicks(t *testing.T) {
	defer leakcheck.Check(t)()
	for range 20 {
		before := bootTicks()
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		st, ok := readStat(cmd.Process.Pid)
		after := bootTicks()
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("no stat for pid %d", cmd.Process.Pid)
		}
		if before == 0 || st.start < before || st.start > after {
			t.Fatalf("starttime %d outside the clock's %d..%d", st.start, before, after)
		}
	}
}

// BenchmarkCustody is one scan of this machine's process table for a
// token nobody carries: unbounded (every environment read), and bounded
// by a starttime after every process's, as a sweep of a server started
// last is.
func BenchmarkCustody(b *testing.B) {
	token := newCustodyToken()
	self := os.Getpid()
	var last uint64
	for _, p := range scanProcs() {
		last = max(last, p.start)
	}
	for _, bc := range []struct {
		name  string
		since uint64
	}{{"unbounded", 0}, {"bounded", last + 1}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if found := custody(token, self, bc.since); len(found) != 0 {
					b.Fatal(found)
				}
			}
		})
	}
}

// TestParseStat: the fields come from after the last ')', whatever a
// process named itself (prctl(PR_SET_NAME) takes any bytes), and a line
// that is short, not numeric where numbers belong, or past uint64 is
// refused.
func TestParseStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 1 2 3 4 5\n" // fields 5-21, 22 (starttime), more
	for _, tc := range []struct {
		line string
		want procStat
		ok   bool
	}{
		{"7 (sleep) S 1" + tail, procStat{ppid: 1, state: 'S', start: 4242}, true},
		{"7 (a) b) c) Z 99" + tail, procStat{ppid: 99, state: 'Z', start: 4242}, true},
		{"7 (x y\nz) R 3" + tail, procStat{ppid: 3, state: 'R', start: 4242}, true},
		{"7 (sleep S 1" + tail, procStat{}, false},
		{"7 (sleep) S 1 0 0\n", procStat{}, false},
		{"7 (sleep) SS 1" + tail, procStat{}, false},
		{"7 (sleep) S -1" + tail, procStat{}, false},
		{"7 (sleep) S 1" + strings.Replace(tail, "4242", "99999999999999999999", 1), procStat{}, false},
		{"7 (sleep) S 4294967296" + tail, procStat{}, false},
		{"", procStat{}, false},
	} {
		got, ok := parseStat([]byte(tc.line))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseStat: a stat line is parsed whatever its command name, which
// any process sets to any bytes (prctl PR_SET_NAME): the fields after the
// last ')' are the ones read, and nothing panics.
func FuzzParseStat(f *testing.F) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 1 2 3 4 5\n"
	f.Add([]byte("sleep"), byte('S'), uint32(1), []byte(tail))
	f.Add([]byte("a) b) c"), byte('Z'), uint32(99), []byte(tail))
	f.Add([]byte("x y\nz"), byte('R'), uint32(3), []byte(" 1 2\n"))
	f.Fuzz(func(t *testing.T, comm []byte, state byte, ppid uint32, rest []byte) {
		_, _ = parseStat(rest) // any bytes at all
		// The kernel's states are letters (R, S, D, Z, T, t, X, I, ...).
		if !('A' <= state && state <= 'Z' || 'a' <= state && state <= 'z') || ppid > math.MaxInt32 || bytes.IndexByte(comm, 0) >= 0 {
			return
		}
		line := fmt.Appendf(nil, "7 (%s) %c %d%s", comm, state, ppid, tail)
		got, ok := parseStat(line)
		if want := (procStat{ppid: int(ppid), state: state, start: 4242}); !ok || got != want {
			t.Fatalf("parseStat(%q) = %+v, %v; want %+v", line, got, ok, want)
		}
	})
}

// TestScanShare holds the sharing of /proc scans to its two promises:
// sweeps that ask while a scan runs share one scan, not one each, and
// none of them is given a scan begun before it asked.
func TestScanShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		scans := 0
		s := scanShare{read: func() map[int]procStat {
			scans++
			n := scans
			if n == 1 {
				<-release
			}
			return map[int]procStat{n: {}}
		}}
		got := make([]int, 9)
		var wg sync.WaitGroup
		asks := func(from, to int) {
			for i := from; i < to; i++ {
				wg.Go(func() {
					for n := range s.scan() {
						got[i] = n
					}
				})
			}
		}
		asks(0, 1)
		synctest.Wait() // the first scan is under way
		asks(1, len(got))
		synctest.Wait() // the other eight wait for it
		if scans != 1 {
			t.Errorf("%d scans began while the first ran, want none", scans-1)
		}
		close(release)
		wg.Wait()
		if scans != 2 {
			t.Errorf("9 sweeps took %d scans, want 2", scans)
		}
		want := []int{1, 2, 2, 2, 2, 2, 2, 2, 2}
		if !slices.Equal(got, want) {
			t.Errorf("sweeps got scans %v, want %v: the first alone on its scan, the eight that asked during it sharing the next", got, want)
		}
	})
}
