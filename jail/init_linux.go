package jail

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaybeInit returns at once unless this process was started as a jail's
// init; then it builds the jail, executes the program in it and never
// returns. Call it first thing in main (and in TestMain of a test binary
// that runs jails), before any goroutine that could hold a file or a
// thread the program must not inherit. t rewrites the files a Program
// names in Transform; nil refuses them.
//
// It also marks close-on-exec every descriptor this process inherited
// beyond stderr (beyond init's own, in a jail's init): whatever its
// parent left open without that flag would otherwise reach every
// process it starts, a jail's program (through init or a wrapper) or a
// server, and a descriptor of a host directory is a way out of any view.
func MaybeInit(t Transformer) {
	if os.Getenv(envInit) == "" {
		closeOnExecFrom(3)
		return
	}
	closeOnExecFrom(fdStatus + 1)
	os.Exit(initMain(t))
}

// closeOnExecFrom marks every descriptor from lo up close-on-exec: with
// one close_range(2) where the kernel has CLOSE_RANGE_CLOEXEC (5.11),
// else one by one from /proc/self/fd. Nothing this process opens itself
// is affected: Go opens every descriptor close-on-exec already.
func closeOnExecFrom(lo int) {
	if unix.CloseRange(uint(lo), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	own := int(d.Fd())
	d.Close()
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd >= lo && fd != own {
			unix.CloseOnExec(fd)
		}
	}
}

// exitSetup is init's exit status when it reports a failure on fdStatus.
const exitSetup = 125

func initMain(t Transformer) int {
	// Capabilities, no_new_privs and the seccomp filter belong to a thread,
	// and the program inherits them from the one that executes it: every
	// step runs on this one.
	runtime.LockOSThread()
	unix.CloseOnExec(fdStatus)
	status := os.NewFile(fdStatus, "status")
	fail := func(step string, err error) int {
		msg := step + ": " + err.Error()
		if len(msg) > maxStatus {
			msg = msg[:maxStatus]
		}
		_, _ = status.WriteString(msg)
		return exitSetup
	}
	in := os.NewFile(fdSpec, "spec")
	// The spec, then, for a warm jail, the delivery: each at most maxSpec.
	dec := json.NewDecoder(io.LimitReader(in, 2*maxSpec))
	var sp spec
	if err := dec.Decode(&sp); err != nil {
		return fail("reading the spec", err)
	}
	if len(sp.Argv) == 0 || !filepath.IsAbs(sp.Argv[0]) {
		return fail("reading the spec", errors.New("argv[0] must be an absolute path"))
	}
	if !sp.Warm {
		in.Close()
	}
	if err := build(&sp); err != nil {
		return fail("building the jail", err)
	}
	if code, ok := transform(&sp, t); !ok {
		// The program's own mistake (a syntax error): reported like a
		// compiler's, on its stderr.
		return code
	}
	if err := sealRoot(&sp); err != nil {
		return fail("sealing the root", err)
	}
	if err := harden(&sp); err != nil {
		return fail("applying limits", err)
	}
	if sp.Warm {
		return warmMain(&sp, t, status, dec, fail)
	}
	err := execLimited(sp.Argv[0], sp.Argv, sp.Env, asLimit(&sp))
	return fail("executing "+sp.Argv[0], err)
}

// warmMain is a warm jail's init once it is built and hardened: it starts
// the runtime, with a socket on its descriptor 3, says it is ready once
// the runtime says it waits, and waits for the delivery; writes the delivered files into /work, applies
// their transforms, says on status that the program starts, hands the
// runtime its environment on the pipe, and stays the namespace's init,
// reaping, until the runtime exits, whose end it reports on status.
func warmMain(sp *spec, t Transformer, status *os.File, dec *json.Decoder, fail func(string, error) int) int {
	// Nothing in the jail may read or write this process's memory
	// through /proc: its other threads kept the capabilities only this
	// one dropped.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("making init undumpable", err)
	}
	// Before anything else lives in the namespace.
	absorbSignals()
	// The runtime's descriptor 3: it writes one byte there once it waits
	// for its program (loaded, its client imported), then reads its
	// environment to EOF.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("a socket pair", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "runtime"), os.NewFile(uintptr(pair[1]), "init")
	dir := sp.Dir
	if dir == "" {
		dir = "/tmp"
	}
	// Forked from this thread, the hardened one: the runtime inherits its
	// limits, its empty capabilities, no_new_privs and the filter; its
	// address-space limit is set on it below.
	result := os.NewFile(fdResult, "result")
	proc, err := os.StartProcess(sp.Argv[0], sp.Argv, &os.ProcAttr{Dir: dir, Env: sp.Env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, theirs, result}})
	theirs.Close()
	// The runtime holds the result channel; its reader sees EOF when the
	// runtime and what it started are gone.
	result.Close()
	if err != nil {
		return fail("starting "+sp.Argv[0], err)
	}
	kill := func() { _ = proc.Kill() }
	// The runtime's address-space limit, its own (asLimit): set before it
	// is given its program, which it cannot have yet.
	if err := unix.Prlimit(proc.Pid, unix.RLIMIT_AS, asLimit(sp), nil); err != nil {
		kill()
		reapUntil(proc.Pid)
		return fail("limiting "+sp.Argv[0]+"'s address space", err)
	}
	if t != nil {
		// The transformer's first use pays for its tables: now, not in
		// the run.
		_, _ = t("warm.ts", nil)
	}
	var one [1]byte
	if n, err := ours.Read(one[:]); n != 1 {
		kill()
		reapUntil(proc.Pid)
		return fail("waiting for "+sp.Argv[0]+" to load", fmt.Errorf("it ended first (%v)", err))
	}
	if _, err := status.WriteString("ready\n"); err != nil {
		kill()
		return exitSetup
	}
	var d delivery
	err = dec.Decode(&d)
	for _, f := range d.Files {
		if err == nil && !strings.HasPrefix(filepath.Clean(f.Path), "/work/") {
			err = fmt.Errorf("file %s: a warm jail's files go under /work", f.Path)
		}
		if err == nil {
			err = writeFile(f.Path, f.Data, f.Mode)
		}
	}
	if err != nil {
		kill()
		return fail("receiving the program", err)
	}
	if _, ok := transform(&spec{Transform: d.Transform}, t); !ok {
		// The program's own mistake, on its stderr: it did not run.
		kill()
		reapUntil(proc.Pid)
		_, _ = status.WriteString("exit 1\n")
		return 0
	}
	if d.Env == nil {
		d.Env = []string{} // a JSON array, always
	}
	// Said before the runtime has its environment, and with it the run's
	// token: from here on the program may act, and the run is its own
	// whatever becomes of init (a setup failure is retried, a program
	// must not be run twice).
	if _, err := status.WriteString(statusStarted); err != nil {
		kill()
		return exitSetup
	}
	err = json.NewEncoder(ours).Encode(d.Env)
	ours.Close()
	if err != nil {
		kill()
		return fail("handing the program its environment", err)
	}
	ws := reapUntil(proc.Pid)
	if ws.Signaled() {
		_, _ = fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
	} else {
		_, _ = fmt.Fprintf(status, "exit %d\n", ws.ExitStatus())
	}
	return 0
}

// statusStarted is the line a warm init writes on status once the program
// may run.
const statusStarted = "started\n"

// absorbSignals makes every signal a process of the jail can send a warm
// init harmless to it. The kernel delivers to a PID namespace's init,
// from inside the namespace, only the signals it has a handler for
// (pid_namespaces(7)); the Go runtime installs one for nearly all, whose
// default is to exit (SIGTERM, SIGHUP, SIGINT, SIGUSR1…) or crash
// (SIGQUIT, and SIGSEGV, SIGBUS, SIGILL, SIGSYS… when sent by kill). A
// program's kill(1, SIGTERM) would so end its own run. Notify turns each
// into a delivery to a channel nobody reads, which drops it; SIGKILL and
// SIGSTOP from inside are never delivered to an init. Notify, not
// Ignore: a signal ignored stays ignored across fork and execve
// (signal(7)), so the runtime and the program would start with SIGTERM
// or SIGINT ignored where a cold run has them default, and Ignore cannot
// cover the signals Go keeps for faults; a signal with a handler is
// reset to its default in the child (Go does so before execve). A fault
// of init's own still crashes it.
func absorbSignals() {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		if s != unix.SIGKILL && s != unix.SIGSTOP {
			sigs = append(sigs, s)
		}
	}
	signal.Notify(make(chan os.Signal, 1), sigs...)
}

// reapUntil reaps every child (the namespace's orphans come to init)
// until pid has exited, and returns its status.
func reapUntil(pid int) unix.WaitStatus {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || got == pid {
			return ws
		}
	}
}

// build makes the program's root: a tmpfs holding the system paths and
// binds (read-only), the given files, /proc, a minimal /dev and a
// writable, size-capped /tmp; then pivots into it. Init runs as root of
// its own user namespace, whose capabilities reach only the namespaces it
// owns.
func build(sp *spec) error {
	if sp.Hostname != "" {
		if err := unix.Sethostname([]byte(sp.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	// Nothing done here may reach the host's mount table.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	// As bubblewrap does: a tmpfs over /tmp becomes the root, with the old
	// root below it at /oldroot, so every host path stays reachable (even
	// one under /tmp) while the new root is assembled at /newroot.
	const base = "/tmp"
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=0755,size=%d", rootSize)); err != nil {
		return fmt.Errorf("mounting the staging tmpfs: %w", err)
	}
	for _, d := range []string{base + "/newroot", base + "/oldroot"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.PivotRoot(base, base+"/oldroot"); err != nil {
		return fmt.Errorf("pivot_root to the staging tmpfs: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// pivot_root needs the new root to be a mount point.
	if err := unix.Mount("/newroot", "/newroot", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the new root: %w", err)
	}
	for _, p := range sp.System {
		if err := bindHost(p, p, false, true); err != nil {
			return err
		}
	}
	for _, b := range sp.Binds {
		if err := bindHost(b.Source, b.Target, b.Writable, false); err != nil {
			return err
		}
	}
	if err := mountDev(); err != nil {
		return err
	}
	if err := mkdirIn("/proc"); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/newroot/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if err := mkdirIn("/tmp"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", sp.TmpSize, maxInodes)); err != nil {
		return fmt.Errorf("mounting /tmp: %w", err)
	}
	if sp.Warm {
		// A warm jail's program arrives after the root is sealed: /work
		// is a tmpfs of its own, left writable, for init to write it.
		if err := mkdirIn("/work"); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", "/newroot/work", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
			fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d", maxSpec, maxInodes)); err != nil {
			return fmt.Errorf("mounting /work: %w", err)
		}
	}
	for i, o := range sp.Overlays {
		if err := mountOverlay(i, o); err != nil {
			return err
		}
	}
	for _, f := range sp.Files {
		if err := writeIn(f.Path, f.Data, f.Mode); err != nil {
			return err
		}
	}
	// Leave the staging root and the host's behind: pivot onto /newroot,
	// then detach what was stacked under it.
	if err := unix.Unmount("/oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Chdir("/newroot"); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root to the jail's root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the staging root: %w", err)
	}
	return unix.Chdir("/")
}

// mountOverlay shows the host directory o.Source at o.Target, read-only
// below and writable above, the writes kept on the run's /tmp.
func mountOverlay(i int, o Overlay) error {
	if strings.ContainsAny(o.Target, ",:") || !filepath.IsAbs(o.Target) {
		return fmt.Errorf("overlay %s: the target must be an absolute path without ',' or ':'", o.Target)
	}
	if err := bindHost(o.Source, o.Target, false, false); err != nil {
		return err
	}
	// Hidden from a program's casual listing of /tmp, not from the
	// program: it is its own writes.
	up := fmt.Sprintf("/newroot/tmp/.capbridge-overlay-%d", i)
	for _, d := range []string{up + "/upper", up + "/work"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	target := "/newroot" + filepath.Clean(o.Target)
	opts := "lowerdir=" + target + ",upperdir=" + up + "/upper,workdir=" + up + "/work,userxattr"
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("overlay %s: %w (overlayfs in a user namespace needs Linux 5.11 or later)", o.Target, err)
	}
	return nil
}

// sealRoot makes the root and /dev read-only, once the transforms have
// written their output, and enters the program's directory.
func sealRoot(sp *spec) error {
	// Only these mounts themselves: /tmp, /proc and the binds below them
	// keep their own flags.
	for _, p := range []string{"/", "/dev"} {
		if err := remountRO(p, false); err != nil {
			return err
		}
	}
	dir := sp.Dir
	if dir == "" {
		dir = "/tmp"
	}
	return unix.Chdir(dir)
}

// transform runs the spec's transforms in the new root. It reports false
// (and the exit status) when one fails: the program's fault, on its
// stderr.
func transform(sp *spec, t Transformer) (int, bool) {
	for _, tr := range sp.Transform {
		src, err := os.ReadFile(tr.From)
		if err == nil && t == nil {
			err = errors.New("this binary has no transformer")
		}
		var out []byte
		if err == nil {
			out, err = t(filepath.Base(tr.From), src)
		}
		if err == nil {
			err = os.WriteFile(tr.To, out, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, false
		}
	}
	return 0, true
}

// bindHost binds the host path src (seen below /oldroot) at dst in the new
// root, read-only unless writable. A missing src is an error unless
// optional; a symbolic link is recreated, not followed, when optional (a
// system path such as /bin → usr/bin).
func bindHost(src, dst string, writable, optional bool) error {
	if !filepath.IsAbs(src) || !filepath.IsAbs(dst) {
		return fmt.Errorf("bind %s → %s: paths must be absolute", src, dst)
	}
	host := "/oldroot" + filepath.Clean(src)
	fi, err := os.Lstat(host)
	if err != nil {
		if optional && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("bind %s: %w", src, err)
	}
	target := "/newroot" + filepath.Clean(dst)
	if fi.Mode()&os.ModeSymlink != 0 && optional {
		to, err := os.Readlink(host)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.Symlink(to, target)
	}
	if fi, err = os.Stat(host); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		err = touch(target)
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(host, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if writable {
		return nil
	}
	return remountRO(target, true)
}

// hostMountinfo is the mount table while the jail is built: the staging
// root has no /proc, the host's below /oldroot does, and its self is init
// (a PID namespace's processes have a pid in every ancestor's).
const hostMountinfo = "/oldroot/proc/self/mountinfo"

// remountRO makes the mount at path (and, when below, every mount below
// it: a bind is recursive, and a host path's submounts come along)
// read-only and nosuid.
func remountRO(path string, below bool) error {
	if !below {
		return remountOne(path)
	}
	// One call, for the whole tree at once (Linux 5.12): adding flags
	// needs no care for those the kernel locked.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}
	err := unix.MountSetattr(unix.AT_FDCWD, path, unix.AT_RECURSIVE, &attr)
	if err == nil {
		return nil
	}
	// An older kernel, or a filter that predates the call (a container
	// runtime's): one remount per mount, from the mount table.
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("making %s read-only: %w", path, err)
	}
	mounts, err := mountsUnder(hostMountinfo, path)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := remountOne(m); err != nil {
			// A mount below that vanished or cannot be reached (an
			// autofs trigger, a directory init may not search) cannot
			// be reached by the program either, nor written if it is
			// read-only already; any other must be sealed.
			var st unix.Statfs_t
			if m == path || (unix.Statfs(m, &st) == nil && st.Flags&unix.ST_RDONLY == 0) {
				return err
			}
		}
	}
	return nil
}

// remountOne makes the one mount at path read-only and nosuid, keeping
// the flags the kernel locked when the mount came from a more privileged
// namespace (a remount that dropped one would be refused).
func remountOne(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	flags := uintptr(unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID) | keptFlags(st.Flags)
	if err := unix.Mount("", path, "", flags, ""); err != nil {
		return fmt.Errorf("remounting %s read-only: %w", path, err)
	}
	return nil
}

// keptFlags maps statfs's flags to the mount flags a bind remount must
// repeat.
func keptFlags(f int64) uintptr {
	var out uintptr
	for _, p := range [][2]int64{
		{unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if f&p[0] != 0 {
			out |= uintptr(p[1])
		}
	}
	return out
}

// mountsUnder lists path and the mount points below it, from the mount
// table at mountinfo, outermost first. A table that cannot be read is an
// error: the mounts below would be left as they are.
func mountsUnder(mountinfo, path string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	out := []string{path}
	prefix := strings.TrimSuffix(path, "/") + "/"
	const most = 16 << 20
	lr := &io.LimitedReader{R: f, N: most + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	if lr.N == 0 {
		return nil, fmt.Errorf("reading the mount table: larger than %d bytes", most)
	}
	return out, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountDev gives the jail a /dev of its own: a tmpfs holding the host's
// harmless character devices, bound one by one, and the usual links.
func mountDev() error {
	if err := mkdirIn("/dev"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=65536"); err != nil {
		return fmt.Errorf("mounting /dev: %w", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		target := "/newroot/dev/" + d
		if err := touch(target); err != nil {
			return err
		}
		if err := unix.Mount("/oldroot/dev/"+d, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding /dev/%s: %w", d, err)
		}
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(to, "/newroot/dev/"+name); err != nil {
			return err
		}
	}
	return nil
}

func mkdirIn(p string) error { return os.MkdirAll("/newroot"+p, 0o755) }

// writeIn writes a given file into the new root.
func writeIn(p string, data []byte, mode uint32) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("file %s: the path must be absolute", p)
	}
	if mode == 0 {
		mode = 0o644
	}
	target := "/newroot" + filepath.Clean(p)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, data, os.FileMode(mode&0o777))
}

// writeFile writes a file at a path of the jail's root, after the pivot.
func writeFile(p string, data []byte, mode uint32) error {
	if mode == 0 {
		mode = 0o644
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, os.FileMode(mode&0o777))
}

func touch(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// Secure bits (linux/securebits.h): root gets no capabilities by exec,
// and nothing can undo that.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
)

// harden applies the limits but the address space's (asLimit: the
// program's alone), drops every capability for good, sets no_new_privs
// and installs the seccomp filter, on this thread, which then executes
// the program.
func harden(sp *spec) error {
	l := sp.Limits
	for _, r := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_CPU, uint64((l.CPU + 999999999) / 1e9)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSize)},
		{unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{unix.RLIMIT_NPROC, uint64(l.Procs)},
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_MEMLOCK, 0},
		{unix.RLIMIT_MSGQUEUE, 0},
	} {
		// A limit can only be lowered without privilege over the host:
		// one above the current hard limit is that limit.
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err == nil && r.v > cur.Max {
			r.v = cur.Max
		}
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.res, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoroot|secbitNorootLocked|secbitNoSetuidFixup|secbitNoSetuidFixupLocked|
		secbitKeepCapsLocked|secbitNoCapAmbientRaise|secbitNoCapAmbientRaiseLocked, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	// Inheritable, permitted and effective: empty on this thread, so
	// nothing can carry over exec.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if sp.Seccomp {
		if err := installSeccomp(); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}

// asLimit is the program's address-space limit (RLIMIT_AS), as far as
// the hard limit allows. It is set on the program alone, never on this
// process: a Go runtime reserves more than a GiB of address space at
// start, and one that runs on under a lower limit dies at its next
// mapping ("runtime: cannot allocate memory"), which building the
// filter, starting a warm runtime or reaping may need at any moment.
func asLimit(sp *spec) *unix.Rlimit {
	v := uint64(sp.Limits.AddressSpace)
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &cur); err == nil && v > cur.Max {
		v = cur.Max
	}
	return &unix.Rlimit{Cur: v, Max: v}
}

// execLimited executes argv0 as syscall.Exec does, with the address
// space limited to lim from the instant before: everything execve needs
// is allocated first, so that this process maps nothing under the limit.
func execLimited(argv0 string, argv, env []string, lim *unix.Rlimit) error {
	argv0p, err := unix.BytePtrFromString(argv0)
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_AS, uintptr(unsafe.Pointer(lim)), 0, 0, 0); e != 0 {
		return fmt.Errorf("setting the address-space limit: %w", e)
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0p)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return e
}
