package jail

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/need"
)

// A wrapped run ends with its wrapper, within its wall clock: a daemon
// that left the wrapper's process group (setsid) and holds the program's
// stdout, stderr and result channel open keeps Run no longer than
// wrapDrainGrace after the wrapper exits, whether the program exited or
// the wall clock killed it. (Without a cgroup nothing finds the daemon to
// kill it; the test does.)
func TestWrappedDaemonDoesNotHoldRun(t *testing.T) {
	defer leakcheck.Check(t)()
	need.File(t, "/usr/bin/setsid", "setsid", "util-linux provides it")
	c := Config{Wrap: []string{"/usr/bin/env", "--"}}
	for i, tc := range []struct {
		name  string
		then  string        // what the program does once its daemon runs
		wall  time.Duration // its wall clock
		ends  time.Duration // when it ends
		ended Ended
	}{
		{"the program exits", "exit 3", 20 * time.Second, 0, EndedExit},
		{"the wall clock", "exec /bin/sleep 3600", 2 * time.Second, 2 * time.Second, EndedWallClock},
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
			start := time.Now()
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
			took := time.Since(start)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if got.out.Ended != tc.ended || string(got.out.Stdout) != "started\n" {
				t.Errorf("outcome %+v\n%s%s", got.out, got.out.Stdout, got.out.Stderr)
			}
			// The program's end, the grace, and room for a loaded
			// machine; far less than the daemon's life.
			if bound := tc.ends + wrapDrainGrace + 5*time.Second; took > bound {
				t.Errorf("Run took %v, more than %v", took, bound)
			}
			if len(leakcheck.Named(marker)) == 0 {
				t.Errorf("the daemon did not run (the test proves nothing): %+v %s", got.out, got.out.Stderr)
			}
		})
	}
}
