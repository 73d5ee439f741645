package jail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// cgroupControllers are the controllers a run's cgroup needs.
var cgroupControllers = []string{"memory", "pids", "cpu"}

// maxProcFile bounds what is read of a /proc or cgroup file.
const maxProcFile = 1 << 20

// DetectCgroup looks for a cgroup v2 hierarchy and, in it, this process's
// own cgroup, with the memory, pids and cpu controllers available and,
// unless capbridge runs as root, delegated to its user (the directory and
// its cgroup.procs and cgroup.subtree_control owned by it, as systemd's
// Delegate=yes leaves them). It reports why not when there is none; a
// found Cgroup needs Prepare before runs use it.
func DetectCgroup() (*Cgroup, CgroupStatus) {
	return detectCgroup("/", os.Geteuid())
}

// detectCgroup is DetectCgroup over the tree at root (a fake one in
// tests), for the user euid.
func detectCgroup(root string, euid int) (*Cgroup, CgroupStatus) {
	mi, err := readBounded(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return nil, noCgroup("cannot read the mount table: %v", err)
	}
	m := findCgroup2(mi)
	switch {
	case m.point == "" && m.v1:
		return nil, noCgroup("this host's cgroups are v1 only (no cgroup2 hierarchy is mounted)")
	case m.point == "":
		return nil, noCgroup("no cgroup2 hierarchy is mounted")
	case m.readOnly:
		return nil, noCgroup("the cgroup2 hierarchy at %s is mounted read-only", m.point)
	}
	self, err := readBounded(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return nil, noCgroup("cannot read this process's cgroup: %v", err)
	}
	var path string
	found := false
	for line := range strings.Lines(string(self)) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return nil, noCgroup("this process is in no cgroup v2 (/proc/self/cgroup has no 0:: line)")
	}
	// The path is relative to the cgroup namespace's root, which the mount
	// shows at its own root.
	rel, ok := strings.CutPrefix(path, m.root)
	if !ok {
		return nil, noCgroup("this process's cgroup %s is outside the cgroup2 mount at %s", path, m.point)
	}
	dir := filepath.Join(root, m.point, rel)
	have, err := readBounded(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, noCgroup("cannot read the controllers of %s: %v", dir, err)
	}
	var missing []string
	for _, c := range cgroupControllers {
		if !slices.Contains(strings.Fields(string(have)), c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == len(cgroupControllers) && m.v1 {
		return nil, noCgroup("this host's cgroups are hybrid: the controllers are on cgroup v1 hierarchies, and the cgroup2 one at %s has none", m.point)
	}
	if len(missing) > 0 {
		return nil, noCgroup("the %s controller(s) are not available in %s (not delegated to it)", strings.Join(missing, ", "), dir)
	}
	if euid != 0 {
		for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control"} {
			p := filepath.Join(dir, f)
			fi, err := os.Stat(p)
			if err != nil {
				return nil, noCgroup("cannot look at %s: %v", p, err)
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid {
				return nil, noCgroup("%s belongs to uid %d, not to capbridge's (%d): the cgroup is not delegated "+
					"(start capbridge in one that is: systemd-run --user -p Delegate=yes …)", p, st.Uid, euid)
			}
		}
	}
	return &Cgroup{Dir: dir}, CgroupStatus{Available: true, Dir: dir}
}

// cgroup2Mount is what the mount table says of the cgroup2 hierarchy.
type cgroup2Mount struct {
	point, root string // where it is mounted, and which of its cgroups is mounted there
	readOnly    bool
	v1          bool // a cgroup v1 hierarchy is mounted
}

// findCgroup2 reads mountinfo (proc(5)): "id parent major:minor root
// mount-point options [optional…] - fstype source super-options".
func findCgroup2(mountinfo []byte) cgroup2Mount {
	var m cgroup2Mount
	for line := range strings.Lines(string(mountinfo)) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || sep+1 >= len(f) {
			continue
		}
		switch f[sep+1] {
		case "cgroup":
			m.v1 = true
		case "cgroup2":
			if m.point == "" {
				m.point, m.root = unescapeMountinfo(f[4]), unescapeMountinfo(f[3])
				m.readOnly = slices.Contains(strings.Split(f[5], ","), "ro")
			}
		}
	}
	if m.root == "/" {
		m.root = ""
	}
	return m
}

// Prepare makes c ready for runs. cgroup v2 lets a cgroup hand its
// controllers to children only while it holds no process itself, so the
// processes in c.Dir (capbridge, and any server it started) move into a
// leaf of their own, c.Dir/capbridge; then the memory, pids and cpu
// controllers are enabled for c.Dir's children. Call it once, before the
// first run.
func (c *Cgroup) Prepare() error {
	sub, err := readBounded(filepath.Join(c.Dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("jail: cgroup %s: %w", c.Dir, err)
	}
	enabled := strings.Fields(string(sub))
	if !slices.ContainsFunc(cgroupControllers, func(s string) bool { return !slices.Contains(enabled, s) }) {
		return nil
	}
	leaf := filepath.Join(c.Dir, "capbridge")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("jail: cgroup: %w", err)
	}
	procs, err := readBounded(filepath.Join(c.Dir, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("jail: cgroup: %w", err)
	}
	pids := strings.Fields(string(procs))
	if !slices.Contains(pids, strconv.Itoa(os.Getpid())) {
		pids = append(pids, strconv.Itoa(os.Getpid()))
	}
	for _, pid := range pids {
		// One write per process: the kernel moves one at a time. One
		// that exited meanwhile is gone from the cgroup anyway.
		if err := writeCgroup(leaf, "cgroup.procs", pid); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("jail: cgroup: moving process %s to %s: %w", pid, leaf, err)
		}
	}
	ctl := "+" + strings.Join(cgroupControllers, " +")
	if err := writeCgroup(c.Dir, "cgroup.subtree_control", ctl); err != nil {
		return fmt.Errorf("jail: cgroup: enabling %s for %s's children: %w", strings.Join(cgroupControllers, ", "), c.Dir, err)
	}
	return nil
}

// mkdirCgroup makes a cgroup: the kernel fills the directory with its
// control files. Tests over a fake tree do that themselves.
var mkdirCgroup = func(dir string) error { return os.Mkdir(dir, 0o755) }

// staleCgroups are run cgroups whose removal failed (a process of the run
// still exiting): each new run tries them again.
var staleCgroups struct {
	sync.Mutex
	dirs []string
}

// enter makes a cgroup for one run with c's limits and returns it open,
// for clone's CLONE_INTO_CGROUP, and the function that removes it once the
// run has ended.
func (c *Cgroup) enter() (*os.File, func(), error) {
	sweepCgroups()
	dir := filepath.Join(c.Dir, fmt.Sprintf("run-%d-%d", os.Getpid(), c.n.Add(1)))
	if err := mkdirCgroup(dir); err != nil {
		return nil, nil, fmt.Errorf("jail: a run's cgroup: %w", err)
	}
	remove := func() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			staleCgroups.Lock()
			staleCgroups.dirs = append(staleCgroups.dirs, dir)
			staleCgroups.Unlock()
		}
	}
	l := c.Limits.withDefaults()
	for _, w := range []struct{ file, value string }{
		{"memory.max", strconv.FormatInt(l.Memory, 10)},
		{"memory.swap.max", "0"},
		{"pids.max", strconv.Itoa(l.Pids)},
		{"cpu.max", fmt.Sprintf("%d 100000", max(1000, int64(l.CPU*100000)))},
	} {
		err := writeCgroup(dir, w.file, w.value)
		if err != nil && !(w.file == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) { // no swap accounting: no swap to refuse
			remove()
			return nil, nil, fmt.Errorf("jail: a run's cgroup: %w", err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		remove()
		return nil, nil, fmt.Errorf("jail: a run's cgroup: %w", err)
	}
	return f, remove, nil
}

func sweepCgroups() {
	staleCgroups.Lock()
	defer staleCgroups.Unlock()
	kept := staleCgroups.dirs[:0]
	for _, d := range staleCgroups.dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			kept = append(kept, d)
		}
	}
	staleCgroups.dirs = kept
}

// writeCgroup writes one value to a cgroup's control file, as one write.
func writeCgroup(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(value))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProcFile))
	return bytes.TrimSpace(b), err
}

// intoCgroup, when c has a Cgroup, makes the run's cgroup and has attr
// start the process in it; done removes it once the run has ended,
// started closes what the start needed, and kill kills every process in
// it (without a Cgroup, each does nothing).
func (c *Config) intoCgroup(attr *syscall.SysProcAttr) (started, done, kill func(), err error) {
	if c.Cgroup == nil {
		return func() {}, func() {}, func() {}, nil
	}
	f, remove, err := c.Cgroup.enter()
	if err != nil {
		return nil, nil, nil, err
	}
	attr.UseCgroupFD, attr.CgroupFD = true, int(f.Fd())
	dir := f.Name()
	return func() { f.Close() }, func() { f.Close(); remove() }, func() { killCgroup(dir) }, nil
}

// killCgroup kills every process in the cgroup at dir, wherever it went:
// another process group, a session of its own. cgroup.kill (Linux 5.14)
// does it at once; before it, the cgroup is frozen (5.2), so nothing in
// it forks meanwhile, and each process it lists is killed (a frozen
// process still dies of SIGKILL).
func killCgroup(dir string) {
	if writeCgroup(dir, "cgroup.kill", "1") == nil {
		return
	}
	_ = writeCgroup(dir, "cgroup.freeze", "1")
	procs, err := readBounded(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(procs)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
