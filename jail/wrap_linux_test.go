package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/need"
)

// A wrapped run ends with its wrapper, within its wall clock: a daemon
// that left the wrapper's process group (setsid) and holds the program's
// stdout, stderr and result channel open does not keep Run, which
// returns wrapDrainGrace after the wrapper exits, whether the program
// exited or the wall clock killed it, and not when the daemon does, a day
// later: the backstop tells the two apart on any machine. (Without a
// cgroup nothing finds the daemon to kill it; the test does.)
func TestWrappedDaemonDoesNotHoldRun(t *testing.T) {
	defer leakcheck.Check(t)()
	need.File(t, "/usr/bin/setsid", "setsid", "util-linux provides it")
	c := Config{Wrap: []string{"/usr/bin/env", "--"}}
	for i, tc := range []struct {
		name  string
		then  string        // what the program does once its daemon runs
		wall  time.Duration // its wall clock
		ended Ended
	}{
		{"the program exits", "exit 3", 20 * time.Second, EndedExit},
		{"the wall clock", "exec /bin/sleep 3600", 2 * time.Second, EndedWallClock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("%d.%d%d", 100000+os.Getpid()%100000, time.Now().UnixNano()%1e6, i)
			defer func() {
				for _, pid := range leakcheck.Named(marker) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}()
			// The daemon says it is in a session of its own (setsid has
			// run) before the program goes on: the wrapper's process
			// group no longer holds it.
			script := `mkfifo up; /usr/bin/setsid /bin/sh -c 'echo > up; exec /bin/sleep ` + marker + `' & read x < up; echo started; ` + tc.then
			type ran struct {
				out *Outcome
				err error
			}
			done := make(chan ran, 1)
			go func() {
				out, err := c.Run(context.Background(), &Program{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, WallClock: tc.wall})
				done <- ran{out, err}
			}()
			var got ran
			select {
			case got = <-done:
			case <-time.After(tc.wall + wrapDrainGrace + time.Minute): // a backstop
				for _, pid := range leakcheck.Named(marker) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				<-done
				t.Fatalf("Run waited for the daemon past its wall clock and %v", wrapDrainGrace)
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			if got.out.Ended != tc.ended || string(got.out.Stdout) != "started\n" {
				t.Errorf("outcome %+v\n%s%s", got.out, got.out.Stdout, got.out.Stderr)
			}
			if len(leakcheck.Named(marker)) == 0 {
				t.Errorf("the daemon did not run (the test proves nothing): %+v %s", got.out, got.out.Stderr)
			}
		})
	}
}

// A wrapped run that cannot make its pipes (descriptors running out)
// fails and leaks none of those it made. The helper (pipesHelper), a
// process of its own so its limit is nobody else's, leaves 2, 4 and 6
// descriptors free: the second pipe fails, the third, then /dev/null.
func TestWrappedPipesOnFailure(t *testing.T) {
	defer leakcheck.Check(t)()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{jailHelperEnv + "=" + helperPipes, "TMPDIR=" + t.TempDir()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// helperPipes names pipesHelper.
const helperPipes = "pipes"

// pipesHelper is TestWrappedPipesOnFailure's other half.
func pipesHelper() int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "helper: "+format+"\n", a...)
		return 1
	}
	// The runtime's poller opens its descriptors at the first pipe: now,
	// not in a run.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fail("%v", err)
	}
	c := Config{Wrap: []string{"/usr/bin/env", "--"}}
	for _, free := range []int{2, 4, 6} {
		before, err := openFDs()
		if err != nil {
			return fail("%v", err)
		}
		// The lowest limit below which exactly free descriptors are
		// unused: the kernel gives the lowest free one, below the limit.
		at := 0
		for n := 0; n < free; at++ {
			if !before[at] {
				n++
			}
		}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(at), Max: lim.Max}); err != nil {
			return fail("%v", err)
		}
		_, runErr := c.Run(context.Background(), &Program{Argv: []string{"/bin/true"}, WallClock: 10 * time.Second})
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return fail("%v", err)
		}
		if runErr == nil || !errors.Is(runErr, unix.EMFILE) {
			return fail("with %d descriptors free: %v, want EMFILE", free, runErr)
		}
		after, err := openFDs()
		if err != nil {
			return fail("%v", err)
		}
		for fd := range after {
			if !before[fd] {
				target, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
				return fail("with %d descriptors free, a failed run left descriptor %d open (%s)", free, fd, target)
			}
		}
	}
	return 0
}

// openFDs is the set of this process's open descriptors.
func openFDs() (map[int]bool, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	own := int(d.Fd())
	d.Close()
	out := map[int]bool{}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd != own {
			out[fd] = true
		}
	}
	return out, err
}
