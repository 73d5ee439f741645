package jail

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// warmPy is a runtime that says it is loaded and waits, as capbridge's
// runners do, for its environment on descriptor 3, then runs
// /work/main.py.
var warmPy = []string{python, "-I", "-S", "-c", `import json, os
os.write(3, b"r")
env = json.load(os.fdopen(3))
os.environ.update(e.split("=", 1) for e in env)
exec(compile(open("/work/main.py").read(), "main.py", "exec"))`}

// A warm jail: built and its runtime started before the program exists;
// the delivery brings the program and its environment, and the run is as
// a cold one: output, result, exit status, the same hardening. It runs
// one program; a second is refused, and one closed unused leaves nothing.
func TestWarm(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	var c Config
	w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.Run(context.Background(), &Program{
		Files: []File{{Path: "/work/main.py", Data: []byte(`import os, sys
print("token", os.environ["CAPBRIDGE_TOKEN"])
print([l for l in open("/proc/self/status") if l.startswith(("CapEff", "NoNewPrivs", "Seccomp:"))])
print("pid", os.getpid(), "ppid", os.getppid())
for f in ["/proc/1/mem", "/proc/1/environ"]:
    try:
        open(f, "rb").read(1)
        print("read", f)
    except OSError as e:
        print("refused", f, e.strerror)
os.write(4, b'{"ok":true}')
sys.exit(3)`)}},
		Env:       []string{"CAPBRIDGE_TOKEN=t0k"},
		WallClock: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Init, which stays to report, is out of the program's reach: it is
	// not dumpable, so its memory and environment are refused.
	for _, want := range []string{"token t0k\n", `CapEff:\t0000000000000000`, `NoNewPrivs:\t1`, `Seccomp:\t2`, "ppid 1\n",
		"refused /proc/1/mem Permission denied", "refused /proc/1/environ Permission denied"} {
		if !strings.Contains(string(out.Stdout), want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, out.Stdout, out.Stderr)
		}
	}
	if out.Ended != EndedExit || out.ExitCode != 3 || string(out.Result) != `{"ok":true}` {
		t.Errorf("outcome %+v", out)
	}
	if _, err := w.Run(context.Background(), &Program{WallClock: time.Second}); err == nil {
		t.Error("a warm jail ran a second program")
	}

	unused, err := c.Prestart(&Program{Argv: warmPy})
	if err != nil {
		t.Fatal(err)
	}
	unused.Close()

	// The wall clock counts from the delivery, and ends the run whole.
	w, err = c.Prestart(&Program{Argv: warmPy})
	if err != nil {
		t.Fatal(err)
	}
	out, err = w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte("import time\ntime.sleep(3600)")}}, WallClock: time.Second})
	if err != nil || out.Ended != EndedWallClock {
		t.Errorf("past the wall clock: %+v, %v", out, err)
	}
	// A file outside /work is refused, and the run fails as a setup would.
	w, err = c.Prestart(&Program{Argv: warmPy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Run(context.Background(), &Program{Files: []File{{Path: "/etc/x", Data: []byte("x")}}, WallClock: 10 * time.Second}); err == nil ||
		!strings.Contains(err.Error(), "under /work") {
		t.Errorf("a delivered file outside /work: %v", err)
	}
}

// A warm jail's init is out of its program's reach by signal too: one
// the program sends PID 1 (a termination, an interrupt, a crash it
// fakes with kill) is dropped, init stays to report, and the run's
// outcome is the program's own. Nor does init leave a signal ignored in
// the program where a cold one's is default.
func TestWarmInitSignals(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	var c Config
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1,
		syscall.SIGQUIT, syscall.SIGSEGV, syscall.SIGSYS} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			// Init has taken the signal once it is pending no more
			// (its handler has run); a signal that ended init would end
			// the program with it.
			out, err := w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte(fmt.Sprintf(`import os, sys
sig = %d
os.kill(1, sig)
def pending():
    for l in open("/proc/1/status"):
        if l.startswith(("SigPnd:", "ShdPnd:")) and int(l.split()[1], 16) & (1 << (sig - 1)):
            return True
    return False
while pending():
    os.sched_yield()
print("init took it")
sys.exit(7)`, int(sig)))}}, WallClock: 30 * time.Second})
			if err != nil {
				t.Fatalf("the run failed: %v", err)
			}
			if out.Ended != EndedExit || out.ExitCode != 7 || out.Signal != "" || string(out.Stdout) != "init took it\n" {
				t.Fatalf("outcome %+v\n%s%s", out, out.Stdout, out.Stderr)
			}
		})
	}

	sigIgn := `print([l for l in open("/proc/self/status") if l.startswith("SigIgn")])`
	cold := runPy(t, &c, sigIgn, 20*time.Second, nil)
	w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	warm, err := w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte(sigIgn)}}, WallClock: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cold.Stdout), "SigIgn") || string(warm.Stdout) != string(cold.Stdout) {
		t.Errorf("the signals a program starts with ignored: warm %s, cold %s", warm.Stdout, cold.Stdout)
	}
}

// Once a warm jail's program has started (it has its environment, its
// token), the run is its own: if init dies then (here killed from the
// host, as the OOM killer might), the program dies with the namespace
// and Run reports a failed run, never ErrSetup, which would have the
// caller run the program again.
func TestWarmInitDiesAfterStart(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	var c Config
	w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}, Binds: []Bind{{Source: sock, Target: "/run/s"}}})
	if err != nil {
		t.Fatal(err)
	}
	type ran struct {
		out *Outcome
		err error
	}
	done := make(chan ran, 1)
	go func() {
		out, err := w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte(`import socket
s = socket.socket(socket.AF_UNIX)
s.connect("/run/s")
s.recv(1)
print("not killed")`)}}, WallClock: time.Minute})
		done <- ran{out, err}
	}()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := w.j.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatalf("init died after the program started: %v, want a failed run", got.err)
	}
	if got.out.Ended != EndedExit || got.out.Signal != "killed" || !strings.Contains(string(got.out.Stderr), "init ended before the program") {
		t.Errorf("outcome %+v\n%s", got.out, got.out.Stderr)
	}
}

// A warm jail's /work, which its program may write, is bounded in files
// as /tmp is: empty files, which take no space, stop at the inode cap.
func TestWarmWorkInodes(t *testing.T) {
	defer leakcheck.Check(t)()
	needJail(t)
	var c Config
	w, err := c.Prestart(&Program{Argv: warmPy, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.Run(context.Background(), &Program{Files: []File{{Path: "/work/main.py", Data: []byte(fmt.Sprintf(`import os
n = 0
try:
    while n < %d:
        open("/work/f%%d" %% n, "w").close()
        n += 1
    print("made", n)
except OSError as e:
    print("stopped after", n, e.strerror)`, 2*maxInodes))}}, WallClock: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if k, _ := fmt.Sscanf(string(out.Stdout), "stopped after %d", &n); k != 1 || n > maxInodes || !strings.Contains(string(out.Stdout), "No space left on device") {
		t.Fatalf("files made in /work: %s%s", out.Stdout, out.Stderr)
	}
}
