package jail

import (
	"context"
	"strings"
	"testing"
	"time"

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
