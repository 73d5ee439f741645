package jail

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// fakeCgroupTree lays out what DetectCgroup reads under a temporary root:
// the mount table, this process's cgroup, and the cgroup's directory with
// its controllers.
func fakeCgroupTree(t *testing.T, mountinfo, self, dir, controllers string) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/mountinfo", mountinfo)
	write("proc/self/cgroup", self)
	if dir != "" {
		write(dir+"/cgroup.controllers", controllers)
		write(dir+"/cgroup.subtree_control", "")
		write(dir+"/cgroup.procs", "4242\n"+strconv.Itoa(os.Getpid())+"\n")
	}
	return root
}

const (
	mountV1 = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 31 0:36 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`
	mountV2 = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
26 25 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:8 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	mountHybrid = mountV1 + `40 31 0:37 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
`
	mountV2ReadOnly = `26 25 0:24 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
`
	// A container whose cgroup namespace's root is mounted at
	// /sys/fs/cgroup: the mount's root field is the namespace's cgroup.
	mountNamespaced = `26 25 0:24 /kubepods/pod1 /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw
`
	selfV1     = "9:name=systemd:/\n8:pids:/\n"
	selfV2     = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/capbridge.service\n"
	delegated  = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/capbridge.service"
	allControl = "cpuset cpu io memory pids"
)

// DetectCgroup's decision, against fake trees of each kind of host: a
// cgroup v1 host (this project's CI), a hybrid one, a read-only mount,
// controllers not delegated, a cgroup another user owns, a namespaced
// mount, and a delegated cgroup v2.
func TestDetectCgroup(t *testing.T) {
	uid := os.Geteuid()
	for _, c := range []struct {
		name                       string
		mountinfo, self, dir, ctrl string
		euid                       int
		wantDir, wantReason        string
	}{
		{name: "v1 only", mountinfo: mountV1, self: selfV1, euid: uid, wantReason: "cgroups are v1 only"},
		{name: "nothing mounted", mountinfo: "25 30 0:23 / /sys rw - sysfs sysfs rw\n", self: selfV1, euid: uid, wantReason: "no cgroup2 hierarchy is mounted"},
		{name: "hybrid", mountinfo: mountHybrid, self: selfV1 + "0::/user.slice\n", dir: "/sys/fs/cgroup/unified/user.slice", ctrl: "", euid: uid,
			wantReason: "cgroups are hybrid"},
		{name: "v2, no controllers", mountinfo: mountV2, self: selfV2, dir: delegated, ctrl: "", euid: uid, wantReason: "the memory, pids, cpu controller(s) are not available"},
		{name: "read-only", mountinfo: mountV2ReadOnly, self: selfV2, euid: uid, wantReason: "mounted read-only"},
		{name: "no 0:: line", mountinfo: mountV2, self: selfV1, euid: uid, wantReason: "no 0:: line"},
		{name: "pids not delegated", mountinfo: mountV2, self: selfV2, dir: delegated, ctrl: "cpu memory", euid: uid, wantReason: "the pids controller(s)"},
		{name: "another user's", mountinfo: mountV2, self: selfV2, dir: delegated, ctrl: allControl, euid: uid + 1000, wantReason: "not delegated"},
		{name: "delegated", mountinfo: mountV2, self: selfV2, dir: delegated, ctrl: allControl, euid: uid, wantDir: delegated},
		{name: "root needs no delegation", mountinfo: mountV2, self: selfV2, dir: delegated, ctrl: allControl, euid: 0, wantDir: delegated},
		{name: "namespaced mount", mountinfo: mountNamespaced, self: "0::/kubepods/pod1/app\n", dir: "/sys/fs/cgroup/app", ctrl: allControl, euid: uid, wantDir: "/sys/fs/cgroup/app"},
		{name: "escaped mount point", mountinfo: `26 25 0:24 / /sys/fs/cgroup\040v2 rw - cgroup2 cgroup2 rw` + "\n", self: "0::/a\n",
			dir: "/sys/fs/cgroup v2/a", ctrl: allControl, euid: uid, wantDir: "/sys/fs/cgroup v2/a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fakeCgroupTree(t, c.mountinfo, c.self, c.dir, c.ctrl)
			cg, st := detectCgroup(root, c.euid)
			if c.wantDir != "" {
				if cg == nil || !st.Available || st.Dir != filepath.Join(root, c.wantDir) || cg.Dir != st.Dir {
					t.Fatalf("got %v, %+v; want %s", cg, st, c.wantDir)
				}
				return
			}
			if cg != nil || st.Available || !strings.Contains(st.Reason, c.wantReason) || !strings.Contains(st.String(), "rlimits") {
				t.Fatalf("got %v, %+v; want unavailable because %q", cg, st, c.wantReason)
			}
		})
	}
}

// Prepare and a run's cgroup, on a fake delegated tree: the processes of
// the delegated cgroup move to the leaf, the controllers are enabled for
// its children, and each run's cgroup gets the limits and is removed when
// the run ends.
func TestCgroupPrepareAndEnter(t *testing.T) {
	root := fakeCgroupTree(t, mountV2, selfV2, delegated, allControl)
	cg, st := detectCgroup(root, os.Geteuid())
	if cg == nil {
		t.Fatal(st)
	}
	if err := os.MkdirAll(filepath.Join(cg.Dir, "capbridge"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A regular file keeps the last write: the moves are one per write,
	// this process last.
	procs := filepath.Join(cg.Dir, "capbridge", "cgroup.procs")
	if err := os.WriteFile(procs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cg.Prepare(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(procs); string(b) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the last process moved to the leaf: %q, want this one", b)
	}
	if b, _ := os.ReadFile(filepath.Join(cg.Dir, "cgroup.subtree_control")); string(b) != "+memory +pids +cpu" {
		t.Errorf("subtree_control: %q", b)
	}
	cg.Limits = CgroupLimits{Memory: 256 << 20, Pids: 32, CPU: 0.5}
	real := mkdirCgroup
	defer func() { mkdirCgroup = real }()
	mkdirCgroup = func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		// What the kernel would make: no memory.swap.max, as on a host
		// without swap accounting.
		for _, f := range []string{"memory.max", "pids.max", "cpu.max"} {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	f, done, err := cg.enter()
	if err != nil {
		t.Fatal(err)
	}
	dir := f.Name()
	f.Close()
	for file, want := range map[string]string{"memory.max": "268435456", "pids.max": "32", "cpu.max": "50000 100000"} {
		if b, _ := os.ReadFile(filepath.Join(dir, file)); string(b) != want {
			t.Errorf("%s: %q, want %q", file, b, want)
		}
	}
	done()
	// A real cgroup's directory goes with rmdir; this one holds the
	// files the test wrote, so it stays, to be tried again.
	staleCgroups.Lock()
	n := len(staleCgroups.dirs)
	staleCgroups.dirs = nil
	staleCgroups.Unlock()
	if n != 1 {
		t.Errorf("%d stale cgroups recorded, want the one that could not be removed", n)
	}
}

// Killing a run's cgroup, on a fake one: with cgroup.kill (Linux 5.14)
// one write does it; before it, the cgroup is frozen and each process it
// lists killed (here a real one, which dies of it).
func TestKillCgroup(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	for _, f := range []string{"cgroup.kill", "cgroup.freeze"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killCgroup(dir)
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.kill")); string(b) != "1" {
		t.Errorf("cgroup.kill: %q, want 1", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); len(b) != 0 {
		t.Errorf("cgroup.freeze written (%q) where cgroup.kill did it", b)
	}

	old := t.TempDir()
	sleeper := exec.Command("/bin/sleep", "3600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill() }()
	for f, data := range map[string]string{"cgroup.freeze": "", "cgroup.procs": strconv.Itoa(sleeper.Process.Pid) + "\n"} {
		if err := os.WriteFile(filepath.Join(old, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killCgroup(old)
	if b, _ := os.ReadFile(filepath.Join(old, "cgroup.freeze")); string(b) != "1" {
		t.Errorf("cgroup.freeze: %q, want 1", b)
	}
	err := sleeper.Wait()
	if ws, ok := sleeper.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the cgroup's process: %v, want killed", err)
	}
}
