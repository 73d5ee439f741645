package mcpwire

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// threads is how many OS threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestChildWaitHoldsNoThread holds the promise of leaderExited: a live
// server is waited for in the poller, on its pidfd, so the servers a
// process owns do not each keep an OS thread blocked in waitid. (The
// runtime never ends an idle thread, so a thread per server would show
// as one more per server started.) Each exit is still seen: the servers
// are closed cleanly here, and TestChildDeath has deaths reported.
func TestChildWaitHoldsNoThread(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 16
	before := threads(t)
	cs := make([]*Client, n)
	for i := range cs {
		cs[i] = startTest(t, mcptest.Scenario{}, Config{})
	}
	grown := threads(t) - before
	for _, c := range cs {
		closeClean(t, c)
	}
	if grown >= n/2 {
		t.Errorf("starting %d servers grew the process by %d threads; waiting for a server must hold none", n, grown)
	}
}

// TestLeaderExited: both ways of waiting (on a pidfd in the poller, and
// the blocking waitid where there is no pidfd) return only once the
// leader has exited, and leave it unreaped, its pid reserved, for wait
// to signal its group and reap it.
func TestLeaderExited(t *testing.T) {
	for _, withPidfd := range []bool{true, false} {
		t.Run(map[bool]string{true: "pidfd", false: "waitid"}[withPidfd], func(t *testing.T) {
			defer leakcheck.Check(t)()
			argv, env := rawecho.Command()
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), env...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			// A server leader, as spawn records it: the orphan reaper
			// (running if an earlier test made this process a
			// subreaper) must leave it for its own wait.
			orphanMu.Lock()
			err = cmd.Start()
			if err == nil {
				leaders[cmd.Process.Pid] = true
			}
			orphanMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				orphanMu.Lock()
				delete(leaders, cmd.Process.Pid)
				orphanMu.Unlock()
			}()
			c := &childConn{pid: cmd.Process.Pid, pidfd: -1}
			if withPidfd {
				if c.pidfd, err = unix.PidfdOpen(c.pid, 0); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan struct{})
			go func() { c.leaderExited(); close(done) }()
			select {
			case <-done:
				t.Fatal("leaderExited returned while the server was running")
			default:
			}
			stdin.Close() // rawecho exits at the end of its input
			select {
			case <-done:
			case <-time.After(waitFor):
				t.Fatal("leaderExited did not return after the server exited")
			}
			var info unix.Siginfo
			if err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
				t.Fatalf("the leader is not ours to reap any more: %v", err)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("exit: %v", err)
			}
		})
	}
}
