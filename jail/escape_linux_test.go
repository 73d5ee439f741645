package jail

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/need"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// The escape tests: each program tries to break one of docs/jail.md's
// promises and must fail cleanly, with the host untouched. They need
// unprivileged user namespaces, which the CI machine has; where a kernel
// refuses them the tests skip, naming why.

const python = "/usr/bin/python3"

// needJail skips when this machine cannot build a jail; a missing python3
// is internal/testkit/need's.
func needJail(t *testing.T) {
	t.Helper()
	need.File(t, python, python+" for the escape programs", "the README names Python >= 3.10")
	var c Config
	_, err := c.Run(context.Background(), &Program{Argv: []string{"/bin/true"}, WallClock: 30 * time.Second})
	if err != nil {
		t.Skipf("this machine cannot build the jail (unprivileged user namespaces disabled?): %v", err)
	}
}

// runPy runs a Python program in a jail of c and returns the outcome.
func runPy(t *testing.T, c *Config, code string, wall time.Duration, p *Program) *Outcome {
	t.Helper()
	if p == nil {
		p = &Program{}
	}
	p.Argv = []string{python, "-I", "-S", "-c", code}
	p.Env = []string{"PATH=/usr/bin:/bin"}
	p.WallClock = wall
	out, err := c.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEscapeNetwork(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	var c Config
	out := runPy(t, &c, fmt.Sprintf(`
import socket
for addr in [("127.0.0.1", %d), ("10.0.0.1", 80)]:
    try:
        socket.create_connection(addr, timeout=2)
        print("connected", addr)
    except OSError as e:
        print("refused", addr, e.errno)
`, port), 20*time.Second, nil)
	if strings.Contains(string(out.Stdout), "connected") || strings.Count(string(out.Stdout), "refused") != 2 {
		t.Fatalf("the jail reached the network:\n%s%s", out.Stdout, out.Stderr)
	}
	select {
	case <-accepted:
		t.Fatal("the host's listener accepted a connection from the jail")
	default:
	}
}

func TestEscapeFiles(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	host := t.TempDir()
	secrets := map[string]string{"capbridge.toml": "[bridge]\n", "token": "cbt1.secret", "control.sock": ""}
	var paths []string
	for name, data := range secrets {
		p := filepath.Join(host, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	home, _ := os.UserHomeDir()
	paths = append(paths, "/etc/shadow", "/etc/passwd", filepath.Join(home, ".bashrc"), "/root", "/home")
	list, _ := json.Marshal(paths)
	var c Config
	out := runPy(t, &c, `
import json, os
for p in json.loads(`+strconv.Quote(string(list))+`):
    try:
        open(p).read() if not os.path.isdir(p) else os.listdir(p)
        print("read", p)
    except OSError as e:
        print("refused", p, e.strerror)
for p in ["/work/x", "/usr/x", "/etc/x", "/x", "/dev/x", "/proc/x"]:
    try:
        open(p, "w").write("x")
        print("wrote", p)
    except OSError as e:
        print("refused", p, e.strerror)
open("/tmp/ok", "w").write("x")
print("tmp ok")
`, 20*time.Second, &Program{Files: []File{{Path: "/work/given", Data: []byte("x")}}})
	text := string(out.Stdout)
	if strings.Contains(text, "read ") || strings.Contains(text, "wrote ") || !strings.Contains(text, "tmp ok") {
		t.Fatalf("the jail read or wrote outside its view:\n%s%s", out.Stdout, out.Stderr)
	}
	if n := strings.Count(text, "refused"); n != len(paths)+6 {
		t.Fatalf("%d refusals, want %d:\n%s%s", n, len(paths)+6, out.Stdout, out.Stderr)
	}
}

func TestEscapeLimits(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	c := Config{TmpSize: 16 << 20, Limits: Limits{AddressSpace: 1 << 30, Procs: 32}}
	t.Run("memory", func(t *testing.T) {
		out := runPy(t, &c, "b = bytearray(2 << 30)\nprint('allocated')", 20*time.Second, nil)
		if out.ExitCode == 0 || !strings.Contains(string(out.Stderr), "MemoryError") {
			t.Fatalf("allocating past the limit: %+v\n%s", out, out.Stderr)
		}
	})
	t.Run("tmpfs", func(t *testing.T) {
		out := runPy(t, &c, `
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 20))
    print("filled")
except OSError as e:
    print("full", e.strerror)
`, 20*time.Second, nil)
		if !strings.Contains(string(out.Stdout), "full No space left on device") {
			t.Fatalf("filling the tmpfs: %s%s", out.Stdout, out.Stderr)
		}
	})
	t.Run("fork bomb", func(t *testing.T) {
		out := runPy(t, &c, `
import os, sys
n = 0
try:
    while True:
        if os.fork() == 0:
            import time
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print("stopped after", n, e.strerror)
`, 20*time.Second, nil)
		if !strings.Contains(string(out.Stdout), "stopped after") || out.Ended != EndedExit {
			t.Fatalf("a fork bomb: %+v\n%s%s", out, out.Stdout, out.Stderr)
		}
	})
	t.Run("wall clock", func(t *testing.T) {
		out := runPy(t, &c, "import time\ntime.sleep(600)", 500*time.Millisecond, nil)
		if out.Ended != EndedWallClock || out.Signal == "" {
			t.Fatalf("running past the wall clock: %+v", out)
		}
	})
	t.Run("output", func(t *testing.T) {
		out := runPy(t, &c, "import sys\nwhile True: sys.stdout.write('x' * 65536)", 60*time.Second, &Program{MaxOutput: 4 << 20})
		if out.Ended != EndedOutput || int64(len(out.Stdout)) != DefaultMaxStdout {
			t.Fatalf("printing without end: ended %s, kept %d bytes of %d", out.Ended, len(out.Stdout), out.StdoutBytes)
		}
	})
}

// Nothing a program starts outlives its run: a daemon that left its
// session and process group is gone when the run returns.
func TestEscapeSurvivor(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	marker := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
	var c Config
	out := runPy(t, &c, `
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "`+marker+`"])
    os._exit(0)
time.sleep(0.2)
print("left a daemon")
`, 20*time.Second, nil)
	if !strings.Contains(string(out.Stdout), "left a daemon") {
		t.Fatalf("the program did not run: %s%s", out.Stdout, out.Stderr)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), marker) {
			t.Fatalf("a process the run started survived it: %s %q", p, b)
		}
	}
}

// A program cannot trace or signal a process outside its jail: none is
// visible, and ptrace is refused even for its own.
func TestEscapeProcesses(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	victim := exec.Command("/bin/sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	var c Config
	out := runPy(t, &c, fmt.Sprintf(`
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
for pid in [%d, %d, 1]:
    r = libc.ptrace(16, pid, 0, 0)
    print("ptrace", pid, r, os.strerror(ctypes.get_errno()))
for pid in [%d, %d]:
    try:
        os.kill(pid, signal.SIGKILL)
        print("killed", pid)
    except OSError as e:
        print("kill refused", pid, e.strerror)
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
`, os.Getpid(), victim.Process.Pid, os.Getpid(), victim.Process.Pid), 20*time.Second, nil)
	text := string(out.Stdout)
	if strings.Contains(text, "killed") || strings.Count(text, " -1 ") != 3 || strings.Count(text, "kill refused") != 2 {
		t.Fatalf("the jail reached a process outside it:\n%s%s", out.Stdout, out.Stderr)
	}
	if !strings.Contains(text, "pids [1]") {
		t.Errorf("the jail sees processes other than its own: %s", text)
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the host's process is gone: %v", err)
	}
}

// The jail is built without root: a process running as nobody builds one.
func TestJailUnprivileged(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	if os.Getuid() != 0 {
		t.Skip("runs as root to drop to nobody; as this user, every other test already builds the jail without root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "jail.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{jailHelperEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "helper: uid=0 in jail") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// jailHelperEnv makes the test binary run jailHelper instead of its
// tests (TestMain).
const jailHelperEnv = "CAPBRIDGE_JAIL_HELPER"

// jailHelper is TestJailUnprivileged's other half, run as nobody: it
// builds a jail and reports what the program in it is, returning the
// process's exit code.
func jailHelper() int {
	var c Config
	out, err := c.Run(context.Background(), &Program{Argv: []string{"/bin/sh", "-c", "echo uid=$(id -u) in jail; touch /usr/x 2>/dev/null && echo wrote"},
		WallClock: 20 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	if strings.Contains(string(out.Stdout), "wrote") {
		fmt.Fprintln(os.Stderr, "helper: wrote to /usr")
		return 1
	}
	fmt.Printf("helper: %s (host uid %d)\n", strings.TrimSpace(string(out.Stdout)), os.Getuid())
	return 0
}

// A program holds no descriptor of the host's: one the bridge's parent
// left open without close-on-exec (here a host directory, opened so by
// this test) is closed to it, cold or warm, so it cannot reach the
// files below it.
func TestEscapeDescriptors(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	host := filepath.Join(t.TempDir(), "host-marker")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// No O_CLOEXEC: every process this one starts inherits it.
	fd, err := syscall.Open(host, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	probe := `import os
for f in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        print("fd", f, os.readlink("/proc/self/fd/" + f))
    except OSError as e:
        print("fd", f, e.strerror)
try:
    print("listed", os.listdir(` + strconv.Itoa(fd) + `))
except OSError as e:
    print("refused", e.strerror)
`
	check := func(what string, out *Outcome) {
		text := string(out.Stdout)
		if strings.Contains(text, "host-marker") || strings.Contains(text, "secret") || !strings.Contains(text, "refused") {
			t.Errorf("%s: the program reached a descriptor of the host:\n%s%s", what, out.Stdout, out.Stderr)
		}
	}
	var c Config
	check("cold", runPy(t, &c, probe, 20*time.Second, nil))
	w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte(probe)}}, WallClock: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	check("warm", out)
}

// A program cannot signal a process outside its jail through a process
// group: kill(0, sig) and kill(-1, sig) reach only the jail's own, not
// the group the bridge runs in (a process group is not bounded by the
// PID namespace). The signal is SIGWINCH, which every process here
// ignores unless it asks, so a jail that did reach this test's group
// harms nothing but the witness's count.
func TestEscapeProcessGroup(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	witness := exec.Command(python, "-I", "-S", "-c", `import signal, sys
seen = []
signal.signal(signal.SIGWINCH, lambda n, f: seen.append(n))
print("ready", flush=True)
sys.stdin.readline()
print("seen", seen, flush=True)`)
	// The witness runs as the jail's programs do on the host, which is
	// what a signal's permission is checked against.
	var c Config
	uid, gid := c.RunIDs()
	witness.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}
	in, err := witness.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, err := witness.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := witness.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = witness.Process.Kill(); _ = witness.Wait() }()
	lines := bufio.NewReader(outR)
	if l, err := lines.ReadString('\n'); l != "ready\n" {
		t.Fatalf("the witness: %q, %v", l, err)
	}
	out := runPy(t, &c, `import os, signal
for target in [0, -1]:
    try:
        os.kill(target, signal.SIGWINCH)
        print("sent", target)
    except OSError as e:
        print("refused", target, e.strerror)
`, 20*time.Second, nil)
	if !strings.Contains(string(out.Stdout), "sent 0") {
		t.Fatalf("the program did not run: %s%s", out.Stdout, out.Stderr)
	}
	// The signal, if sent, was pending before the run returned: the
	// witness runs its handler before its read returns this line.
	if _, err := io.WriteString(in, "report\n"); err != nil {
		t.Fatal(err)
	}
	if l, err := lines.ReadString('\n'); l != "seen []\n" {
		t.Fatalf("a process in the bridge's process group got the jail's signal: %q, %v", l, err)
	}
}

// A mount below a bind or a system path is as read-only as the bind: a
// tmpfs the host mounted there is written neither at the top nor below.
// The helper (submountsHelper) mounts them in a mount namespace of its
// own, so the host's table is untouched; it builds the jail twice, once
// as this kernel allows (mount_setattr) and once as a kernel without
// mount_setattr would (a filter answers ENOSYS), which remounts each
// mount the table lists.
func TestEscapeSubmounts(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, noSetattr := range []string{"", "1"} {
		name := map[string]string{"": "mount_setattr", "1": "remount each"}[noSetattr]
		t.Run(name, func(t *testing.T) {
			d := filepath.Join(dir, strconv.Itoa(i))
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self)
			cmd.Env = []string{jailHelperEnv + "=" + helperSubmounts, helperDirEnv + "=" + d, helperNoSetattrEnv + "=" + noSetattr}
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				need.Missing(t, "a mount namespace of the test's own", "run the tests as root, as CI does", err)
			}
			if err != nil || strings.Count(string(out), "refused") != 4 || strings.Count(string(out), "seen sub") != 2 {
				t.Fatalf("writing below a read-only bind: %v\n%s", err, out)
			}
		})
	}
}

// The submounts helper's name and its settings.
const (
	helperSubmounts    = "submounts"
	helperDirEnv       = "CAPBRIDGE_JAIL_HELPER_DIR"
	helperNoSetattrEnv = "CAPBRIDGE_JAIL_HELPER_NO_SETATTR"
)

// submountsHelper is TestEscapeSubmounts's other half, run in a mount
// namespace of its own: it mounts a tmpfs below a directory it binds into
// a jail and below one it gives as a system path, each writable by
// anyone, and runs a program that tries to write at the top and below.
// The system path is a tmpfs over /mnt (or /srv, /opt), in this
// namespace only: one under /tmp would be hidden by the jail's /tmp.
func submountsHelper() int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "helper: "+format+"\n", a...)
		return 1
	}
	dir := os.Getenv(helperDirEnv)
	var sys string
	for _, d := range []string{"/mnt", "/srv", "/opt"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			sys = d
			break
		}
	}
	if sys == "" {
		return fail("none of /mnt, /srv, /opt to mount a system path over")
	}
	if err := unix.Mount("tmpfs", sys, "tmpfs", 0, "mode=1777,size=1m"); err != nil {
		return fail("mounting %s: %v", sys, err)
	}
	bind := filepath.Join(dir, "bind")
	for _, top := range []string{bind, sys} {
		sub := filepath.Join(top, "sub")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fail("%v", err)
		}
		if err := os.Chmod(top, 0o1777); err != nil {
			return fail("%v", err)
		}
		if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "mode=1777,size=1m"); err != nil {
			return fail("mounting %s: %v", sub, err)
		}
		if err := os.WriteFile(filepath.Join(sub, "seen"), []byte("seen sub\n"), 0o644); err != nil {
			return fail("%v", err)
		}
	}
	// The filter holds for this thread and what it starts: the jail's
	// init is forked from it.
	runtime.LockOSThread()
	if os.Getenv(helperNoSetattrEnv) != "" {
		if err := refuseMountSetattr(); err != nil {
			return fail("installing the filter: %v", err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{}); !errors.Is(err, unix.ENOSYS) {
			return fail("mount_setattr under the filter: %v, want ENOSYS", err)
		}
	}
	c := Config{System: append(slices.Clone(DefaultSystem), sys)}
	out, err := c.Run(context.Background(), &Program{Argv: []string{"/bin/sh", "-c", `cat /r1/sub/seen ` + sys + `/sub/seen
for f in /r1/w /r1/sub/w ` + sys + `/w ` + sys + `/sub/w; do
	if (echo x > "$f") 2>/dev/null; then echo "wrote $f"; else echo "refused $f"; fi
done`}, Binds: []Bind{{Source: bind, Target: "/r1"}}, WallClock: 20 * time.Second})
	if err != nil {
		return fail("%v", err)
	}
	fmt.Printf("%s%s", out.Stdout, out.Stderr)
	for _, p := range []string{bind + "/w", bind + "/sub/w", sys + "/w", sys + "/sub/w"} {
		if _, err := os.Stat(p); err == nil {
			return fail("%s was written", p)
		}
	}
	return 0
}

// refuseMountSetattr installs on this thread a filter answering ENOSYS to
// mount_setattr, as a kernel older than 5.12 does.
func refuseMountSetattr() error {
	p := []unix.SockFilter{
		{Code: bpfLdWAbs, K: offArch},
		{Code: bpfJeqK, Jt: 0, Jf: 3, K: auditArch()},
		{Code: bpfLdWAbs, K: offNR},
		{Code: bpfJeqK, Jt: 0, Jf: 1, K: unix.SYS_MOUNT_SETATTR},
		{Code: bpfRetK, K: retErrno | uint32(unix.ENOSYS)},
		{Code: bpfRetK, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
}

// The address-space limit is the program's alone, never the jail's
// init's: the init is a Go process, which reserves more than a GiB of
// address space at start, and one that set a lower limit on itself died
// at its next mapping ("runtime: cannot allocate memory": seen building
// the seccomp filter under load), before its program ran; a warm jail's
// init, which stays to reap, was under it for the whole run. The
// program, cold or warm, is held to the limit; the warm init is not.
func TestAddressSpaceLimitIsTheProgramsAlone(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	const limit = 160 << 20
	c := Config{Limits: Limits{AddressSpace: limit}}
	asOf := func(limits string) string {
		for _, l := range strings.Split(limits, "\n") {
			if strings.HasPrefix(l, "Max address space") {
				return strings.Fields(l)[3]
			}
		}
		return "(none)"
	}
	probe := `
print(open("/proc/self/limits").read())
print("----")
print(open("/proc/1/limits").read())
try:
    b = bytearray(256 << 20)
    print("allocated")
except MemoryError:
    print("refused")`
	out := runPy(t, &c, probe, 20*time.Second, nil)
	self, _, _ := strings.Cut(string(out.Stdout), "----")
	if got := asOf(self); got != strconv.Itoa(limit) || !strings.Contains(string(out.Stdout), "refused") {
		t.Errorf("cold: the program's address-space limit %s, want %d:\n%s%s", got, limit, out.Stdout, out.Stderr)
	}
	w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err = w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte(probe)}}, WallClock: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	self, init, _ := strings.Cut(string(out.Stdout), "----")
	if got := asOf(self); got != strconv.Itoa(limit) || !strings.Contains(string(out.Stdout), "refused") {
		t.Errorf("warm: the program's address-space limit %s, want %d:\n%s%s", got, limit, out.Stdout, out.Stderr)
	}
	if got := asOf(init); got != "unlimited" {
		t.Errorf("warm: the init's address-space limit %s, want unlimited:\n%s%s", got, out.Stdout, out.Stderr)
	}
}
