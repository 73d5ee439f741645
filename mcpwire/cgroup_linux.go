package mcpwire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupPrefix names the directory OpenCgroups creates, followed by our
// pid, so a later process can tell a directory whose owner is gone.
const cgroupPrefix = "capbridge-"

// maxProcFile bounds what is read of /proc/self/mountinfo and
// /proc/self/cgroup.
const maxProcFile = 1 << 20

// Cgroups is a cgroup v2 directory of this process's own under which each
// server spawned with Command.Cgroups runs in a cgroup of its own. A
// process cannot leave its cgroup by setsid(2), setpgid(2), a double
// fork or a cleared environment, so killing a server's cgroup (cgroup.kill,
// one atomic step in the kernel) ends everything it started; the
// process-group ladder and the custody sweep still run before and after,
// and are all there is where cgroups are not available.
//
// Nothing is enabled in the directory's cgroup.subtree_control: the
// cgroups are for custody, not resource control, so they need no
// delegation of controllers and leave the host's limits as they were.
//
// A Cgroups may be used by concurrent spawns. Close removes it once every
// server spawned under it has been shut down.
type Cgroups struct {
	dir string
	n   atomic.Int64
}

// OpenCgroups creates the directory capbridge-<pid> in this process's own
// cgroup of the unified hierarchy. Directories of the same name left by
// a process that is gone (one that was SIGKILLed and so never removed
// its own) are killed and removed first: what survived that process's
// death ends at the next start. stale counts the directories removed so.
// An error means this process cannot give servers cgroups of their own
// (no unified hierarchy, a cgroup it may not write to, a kernel without
// cgroup.kill, or a system other than Linux), and says which; custody
// then rests on process groups and the custody sweep alone.
func OpenCgroups() (g *Cgroups, stale int, err error) {
	base, err := ownCgroup()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errNoCgroups, err)
	}
	stale = removeStale(base)
	dir := filepath.Join(base, cgroupPrefix+strconv.Itoa(os.Getpid()))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, stale, fmt.Errorf("%w: creating %s: %v", errNoCgroups, dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = unix.Rmdir(dir)
		return nil, stale, fmt.Errorf("%w: %s has no cgroup.kill (Linux 5.14 or later is needed)", errNoCgroups, dir)
	}
	return &Cgroups{dir: dir}, stale, nil
}

// Dir is the directory the servers' cgroups are created in.
func (g *Cgroups) Dir() string { return g.dir }

// Close kills whatever is still in the directory's cgroups (a server
// that was never shut down) and removes them and the directory. It
// waits at most grace for them to empty.
func (g *Cgroups) Close(grace time.Duration) error {
	return killCgroupTree(g.dir, grace)
}

// next creates the cgroup for one more server and returns its path.
func (g *Cgroups) next() (string, error) {
	dir := filepath.Join(g.dir, "s"+strconv.FormatInt(g.n.Add(1), 10))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// ownCgroup returns the directory of this process's cgroup in the
// unified hierarchy: the cgroup2 mount point joined with the "0::" line
// of /proc/self/cgroup.
func ownCgroup() (string, error) {
	mounts, err := readBounded("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	mnt := cgroup2Mount(mounts)
	if mnt == "" {
		return "", errors.New("no cgroup2 file system is mounted")
	}
	self, err := readBounded("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(self)) {
		if p, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "0::"); ok {
			if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
				return "", fmt.Errorf("unusable cgroup path %q", p)
			}
			return filepath.Join(mnt, p), nil
		}
	}
	return "", errors.New("this process is in no cgroup of the unified hierarchy")
}

// cgroup2Mount returns the mount point of the first cgroup2 file system
// in mountinfo (proc(5): fields, " - ", file system type), or "".
func cgroup2Mount(mountinfo []byte) string {
	for line := range strings.Lines(string(mountinfo)) {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if f := strings.Fields(pre); len(f) >= 5 {
			return unescapeMount(f[4])
		}
	}
	return ""
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readBounded reads at most maxProcFile bytes of a /proc file.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}

// removeStale kills and removes every capbridge-<pid> directory in base
// whose process is gone, and reports how many it removed.
func removeStale(base string) int {
	ents, err := os.ReadDir(base)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		s, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(s)
		if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		if killCgroupTree(filepath.Join(base, e.Name()), time.Second) == nil {
			n++
		}
	}
	return n
}

// killCgroupTree kills every process in the cgroup dir and its
// descendants (cgroup.kill is recursive), waits at most grace for the
// tree to empty, then removes its directories, deepest first.
func killCgroupTree(dir string, grace time.Duration) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mcpwire: killing cgroup %s: %w", dir, err)
	}
	if !waitUnpopulated(dir, grace) {
		return fmt.Errorf("%w: cgroup %s still populated %v after cgroup.kill", ErrUnconfirmed, dir, grace)
	}
	return removeTree(dir)
}

// removeTree removes the empty cgroup directories of the tree at dir,
// deepest first (a cgroup's interface files cannot be unlinked, and
// rmdir(2) of a cgroup removes them with it).
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return fmt.Errorf("mcpwire: removing cgroup %s: %w", dir, err)
	}
	return nil
}

// waitUnpopulated waits until the cgroup dir and its descendants hold no
// process ("populated 0" in cgroup.events), at most grace. The kernel
// signals every change of cgroup.events to poll(2) as POLLPRI, so the
// wait is woken by the change itself.
func waitUnpopulated(dir string, grace time.Duration) bool {
	f, err := os.Open(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	defer f.Close()
	fd := int(f.Fd())
	deadline := time.Now().Add(grace)
	buf := make([]byte, 512)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil {
			return false
		}
		if !populated(buf[:n]) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return false
		}
	}
}

// populated reads the "populated" key of cgroup.events; unreadable
// content counts as populated, so the caller keeps waiting, bounded.
func populated(events []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(events))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "populated "); ok {
			return v != "0"
		}
	}
	return true
}
