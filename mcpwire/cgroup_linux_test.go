package mcpwire

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// openCgroups opens this test process's Cgroups, or reports why the
// machine offers none (then the caller checks what it can without).
func openCgroups(t *testing.T) *Cgroups {
	t.Helper()
	g, _, err := OpenCgroups()
	if err != nil {
		if !errors.Is(err, errNoCgroups) {
			t.Fatalf("OpenCgroups: %v, not wrapping errNoCgroups", err)
		}
		t.Logf("no cgroup custody on this machine: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if err := g.Close(waitFor); err != nil {
			t.Errorf("closing the cgroups: %v", err)
		}
		if _, err := os.Stat(g.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Close: %v", g.Dir(), err)
		}
	})
	return g
}

// TestCgroupCustody: with the sweep off, the server's cgroup alone ends
// a grandchild that left the process group and session and ignores both
// SIGTERM and stdin, and the cgroup is gone after Close.
func TestCgroupCustody(t *testing.T) {
	defer leakcheck.Check(t)()
	g := openCgroups(t)
	if g == nil {
		return
	}
	cmd := testCommand(escapee)
	cmd.Cgroups = g
	c, gpid, fd := startEscapeeCmd(t, cmd)
	defer unix.Close(fd)
	dir := c.car.(*streamCarrier).conn.(*childConn).cgroup
	if filepath.Dir(dir) != g.Dir() {
		t.Fatalf("server cgroup %q, want one under %s", dir, g.Dir())
	}
	for _, pid := range []int{c.Pid(), gpid} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(bytes.TrimSpace(b), []byte(strings.TrimPrefix(dir, cgroupMount(t)))) {
			t.Fatalf("process %d is in cgroup %q, want %s", pid, b, dir)
		}
	}
	ex, err := c.Close()
	if err != nil || ex.How != ExitedOnEOF {
		t.Errorf("close: %+v, %v; want a clean exit after stdin closed", ex, err)
	}
	if !exited(t, fd) {
		t.Fatalf("grandchild %d still runs after Close", gpid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server's cgroup %s still exists after Close: %v", dir, err)
	}
}

// cgroupMount is the unified hierarchy's mount point.
func cgroupMount(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return cgroup2Mount(b)
}

// TestCgroupStale: a capbridge-<pid> directory whose process is gone (as
// a SIGKILLed capbridge leaves it) is killed, with what still runs in
// it, and removed when the next process opens its own.
func TestCgroupStale(t *testing.T) {
	defer leakcheck.Check(t)()
	base, err := ownCgroup()
	if err != nil {
		t.Logf("no unified hierarchy: %v", err)
		return
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(base, cgroupPrefix+strconv.Itoa(gone.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Logf("cgroup %s not writable: %v", base, err)
		if _, _, err := OpenCgroups(); !errors.Is(err, errNoCgroups) {
			t.Fatalf("OpenCgroups where %s is not writable: %v, want errNoCgroups", base, err)
		}
		return
	}
	defer os.Remove(stale)
	sub := filepath.Join(stale, "s1")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "600")
	left.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = left.Start()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- left.Wait() }()

	openCgroups(t)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the process left in the stale cgroup ended %v, want SIGKILL", err)
		}
	case <-time.After(waitFor):
		_ = left.Process.Kill()
		<-done
		t.Fatal("the process left in the stale cgroup still runs")
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale cgroup %s still exists: %v", stale, err)
	}
}

// TestCgroupFallback: a cgroup that cannot be created is logged and the
// server starts without one, custody left to the group and the sweep.
func TestCgroupFallback(t *testing.T) {
	defer leakcheck.Check(t)()
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	cmd := testCommand(mcptest.Scenario{})
	cmd.Cgroups = &Cgroups{dir: filepath.Join(t.TempDir(), "missing")}
	cmd.Logger = &log
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := Start(ctx, cmd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.car.(*streamCarrier).conn.(*childConn).cgroup; got != "" {
		t.Errorf("server cgroup %q, want none", got)
	}
	if r, err := callT(t, c, "echo", `{"text":"still served"}`, CallOptions{}); err != nil || texts(r) != "text:still served" {
		t.Errorf("echo: %v, %v", r, err)
	}
	closeClean(t, c)
	if !strings.Contains(logs.String(), "cannot run the server in a cgroup of its own") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}

// TestCgroup2Mount: mountinfo's cgroup2 line is found past others, and
// its octal escapes are undone.
func TestCgroup2Mount(t *testing.T) {
	info := "22 1 0:21 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
		"35 22 0:30 / /sys/fs/cgroup/my\\040unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
	if got := cgroup2Mount([]byte(info)); got != "/sys/fs/cgroup/my unified" {
		t.Errorf("cgroup2Mount = %q", got)
	}
	if got := cgroup2Mount([]byte("22 1 0:21 / /sys rw - sysfs sysfs rw\n")); got != "" {
		t.Errorf("cgroup2Mount without cgroup2 = %q", got)
	}
	for in, want := range map[string]bool{"populated 1\nfrozen 0\n": true, "populated 0\n": false, "": true, "garbage": true} {
		if got := populated([]byte(in)); got != want {
			t.Errorf("populated(%q) = %v", in, got)
		}
	}
}
