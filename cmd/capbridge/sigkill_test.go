package main

import (
	"bytes"
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
)

// TestSIGKILLCustody pins what docs/architecture.md says survives a
// SIGKILL of capbridge: no shutdown code runs, so the server leader dies
// by its Pdeathsig alone, and a grandchild that ignores stdin EOF and
// left the server's process group survives, reparented away from the
// dead leader. Where servers run in cgroups of their own, the survivor
// is still in its server's cgroup, and the next capbridge to start kills
// it; elsewhere the test kills it itself, so nothing outlives it.
func TestSIGKILLCustody(t *testing.T) {
	defer leakcheck.Check(t)()
	bin, cfg := escapeeConfig(t)
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)

	// The server spawns its grandchild before it reads stdin, so once
	// serve is ready both are there. Each is held by a pidfd from here
	// on, so a recycled pid is never mistaken for them.
	leader := childOf(t, srv.cmd.Process.Pid)
	gpid := childOf(t, leader)
	lfd, err := unix.PidfdOpen(leader, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	gfd, err := unix.PidfdOpen(gpid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(gfd)
	// Whatever happens below, the survivor does not outlive the test.
	defer func() {
		_ = unix.PidfdSendSignal(gfd, unix.SIGKILL, nil, 0)
		if !exited(t, gfd, time.Minute) {
			t.Errorf("grandchild %d still alive a minute after SIGKILL", gpid)
		}
	}()

	// Read before capbridge dies: another capbridge starting anywhere on
	// the machine may end the survivor as soon as its cgroup is stale.
	selfCG, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	gCG, err := os.ReadFile("/proc/" + strconv.Itoa(gpid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	inCgroup := bytes.Contains(gCG, []byte("/capbridge-"+strconv.Itoa(srv.cmd.Process.Pid)+"/"))
	if !inCgroup && !bytes.Equal(gCG, selfCG) {
		t.Fatalf("grandchild %d in cgroup %q, neither capbridge's nor ours (%q)", gpid, gCG, selfCG)
	}
	t.Logf("grandchild in a cgroup of capbridge's: %v", inCgroup)

	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = srv.cmd.Wait()
	srv.exited = true
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("serve after SIGKILL: %v, want killed by SIGKILL", err)
	}

	// Nothing signals the test when the leader dies, but its pidfd
	// becomes readable: a wait on an event, bounded by a backstop.
	if !exited(t, lfd, time.Minute) {
		t.Fatalf("server leader %d alive a minute after capbridge's SIGKILL: Pdeathsig did not fire", leader)
	}
	if inCgroup {
		// The next capbridge kills what is left in the cgroups of one
		// that is gone, before it starts a server of its own.
		next, _ := startServe(t, bin, nil, "serve", "-c", cfg)
		if !exited(t, gfd, time.Minute) {
			t.Errorf("grandchild %d still alive a minute after the next capbridge started", gpid)
		}
		if _, err := next.stop(); err != nil {
			t.Errorf("the next capbridge: %v\n%s", err, next.stderr.String())
		}
		return
	}
	// The leader has exited; the grandchild, which never reads stdin and
	// left the group, is documented to survive.
	if exited(t, gfd, 0) {
		t.Fatalf("grandchild %d died with capbridge; the documented behaviour is that it survives", gpid)
	}
	if ppid := parentOf(t, gpid); ppid == leader || ppid == srv.cmd.Process.Pid {
		t.Errorf("grandchild %d still has parent %d after its leader and capbridge died", gpid, ppid)
	}
}

// exited reports whether the process behind pidfd fd has exited within
// d (0: right now).
func exited(t *testing.T, fd int, d time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd: %v", err)
		}
		return n == 1
	}
}

// parentOf is pid's parent, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the parenthesised command name: state, ppid.
	var state rune
	var ppid int
	if n, err := fmt.Sscanf(string(b[bytes.LastIndexByte(b, ')')+1:]), " %c %d", &state, &ppid); n != 2 {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return ppid
}
