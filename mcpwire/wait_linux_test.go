package mcpwire

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
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
