package codemode

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/need"
	"github.com/capbridge/capbridge/jail"
)

func TestMain(m *testing.M) {
	jail.MaybeInit(StripTypes)
	mcptest.MaybeServe()
	leakcheck.Main(m)
}

// newRunner starts a bridge serving mcptest as "t" and a Runner on it.
// As root, the jail runs as nobody, who reaches the call socket only as a
// harness configured for another uid would let it: mode 0666 with
// allowed_uids.
func newRunner(t testing.TB, tweak func(*Config), opts ...bridgetest.Option) (*Runner, *bridgetest.Server) {
	t.Helper()
	argv, env := mcptest.Command(mcptest.Scenario{})
	opts = append([]bridgetest.Option{bridgetest.WithServers(bridgetest.Stdio("t", argv, env)), bridgetest.WithConfig(func(c *config.Config) {
		if os.Getuid() == 0 {
			c.Bridge.CallSocketMode = 0o666
			c.Bridge.AllowedUIDs = []uint32{0, 65534}
		}
	})}, opts...)
	srv := bridgetest.NewServer(t, opts...)
	if os.Getuid() == 0 {
		// The test's temporary directory is the socket's parent; the
		// bridge made only the socket's own directory searchable.
		if err := os.Chmod(srv.Dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Control: srv.Config.Bridge.ControlSocket}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, srv
}

func TestRunEachLanguage(t *testing.T) {
	defer leakcheck.Check(t)()
	r, srv := newRunner(t, nil)
	defer srv.Close()
	progs := map[string]string{
		TypeScript: `import * as t from "./t.js";
const r = await t.echo({ text: "hello from ts" });
console.log(r.text());
export default { echoed: r.text(), n: 1 + 1 };`,
		Python: `import t
r = await t.echo(text="hello from python")
print(r.text())
{"echoed": r.text(), "n": 1 + 1}`,
	}
	for _, lang := range r.Languages() {
		t.Run(lang, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := r.Run(ctx, Request{Language: lang, Code: progs[lang], Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() || !strings.Contains(res.Stdout, "hello from") {
				t.Fatalf("run: %+v", res)
			}
			want := `{"echoed":"hello from ` + map[string]string{TypeScript: "ts", Python: "python"}[lang] + `","n":2}`
			if got := string(res.Value); got != want {
				t.Errorf("value %s, want %s", res.Value, want)
			}
			// Whatever this host offers, the result says it: on a
			// cgroup v1 host, why there are no cgroup limits.
			if _, st := jail.DetectCgroup(); res.Cgroup.Available != st.Available || (!st.Available && res.Cgroup.Reason != st.Reason) {
				t.Errorf("the result's cgroup %+v; this host: %+v", res.Cgroup, st)
			}
			if res.Calls != 1 || res.Denied != 0 {
				t.Errorf("accounting: %d calls, %d denied; want 1, 0", res.Calls, res.Denied)
			}
			t.Logf("%s took %d ms", lang, res.TookMS)
		})
	}
}

// A run's setup is bounded by its own time: a bridge whose control
// socket accepts and never answers holds a 1 ms run for its timeout and
// grantSlack, not for as long as its caller's context lasts (a stdio
// host's has no deadline). The error says it could not run.
func TestRunSetupBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	sock := filepath.Join(t.TempDir(), "control.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	var held []net.Conn
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never answered
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	need.Command(t, "python3", "the README names Python >= 3.10")
	r, err := New(Config{Control: sock, CallSocket: filepath.Join(t.TempDir(), "call.sock"), Languages: []string{Python}, NoCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), Request{Language: Python, Code: "print(1)", Timeout: time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "setup took longer") {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Minute): // a backstop: it ends grantSlack in
		t.Fatal("the run's setup waited on the bridge past its bound")
	}
}

// A program cannot take the call socket from later runs: it sees it on a
// read-only bind, so even when it owns the inode (it runs as capbridge's
// user unless capbridge is root; here the socket is given to the jail's
// user to be so) it cannot change its mode or times, move or remove it,
// and the next run still calls through it.
func TestRunCannotLockCallSocket(t *testing.T) {
	defer leakcheck.Check(t)()
	need.Command(t, "python3", "the README names Python >= 3.10")
	r, srv := newRunner(t, func(c *Config) { c.Languages = []string{Python} })
	defer srv.Close()
	sock := srv.CallSocket()
	if os.Getuid() == 0 {
		uid, gid := r.cfg.Jail.RunIDs()
		if err := os.Chown(sock, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := r.Run(ctx, Request{Language: Python, Timeout: 30 * time.Second, Code: `import os
p = os.environ["CAPBRIDGE_SOCKET"]
out = []
for name, f in [("chmod", lambda: os.chmod(p, 0)), ("utime", lambda: os.utime(p, (0, 0))),
                ("rename", lambda: os.rename(p, p + ".x")), ("unlink", lambda: os.unlink(p))]:
    try:
        f()
        out.append(name + " done")
    except OSError as e:
        out.append(name + " refused")
out`})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != `["chmod refused","utime refused","rename refused","unlink refused"]` {
		t.Errorf("a program's changes to the call socket: %s%s", res.Value, res.Stderr)
	}
	after, err := os.Stat(sock)
	if err != nil || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the call socket changed: %v %v, was %v %v (%v)", after.Mode(), after.ModTime(), before.Mode(), before.ModTime(), err)
	}
	res, err = r.Run(ctx, Request{Language: Python, Timeout: 30 * time.Second, Code: `import t
(await t.echo(text="still here")).text()`})
	if err != nil || !res.OK() || string(res.Value) != `"still here"` || res.Calls != 1 {
		t.Fatalf("the next run's call: %+v, %v", res, err)
	}
}

// A run uses one control connection, setup to revocation: the bridge
// admits a bounded number, shared with its operator and harness, and a
// run that dialled one for each step held several at once, as the
// bridge sees them, while it started. Counted by a relay in front of
// the control socket.
func TestRunUsesOneControlConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	need.Command(t, "python3", "the README names Python >= 3.10")
	relay := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", relay)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	var wg sync.WaitGroup
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	r, srv := newRunner(t, func(c *Config) {
		target := c.Control
		wg.Go(func() {
			for {
				in, err := ln.Accept()
				if err != nil {
					return
				}
				dials.Add(1)
				out, err := net.Dial("unix", target)
				if err != nil {
					in.Close()
					continue
				}
				wg.Go(func() { _, _ = io.Copy(out, in); out.Close() })
				wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
			}
		})
		c.Control = relay
		c.Languages = []string{Python}
	})
	defer srv.Close()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 2 {
		before := dials.Load()
		res, err := r.Run(ctx, Request{Language: Python, Code: "import t\nr = await t.echo(text='one')\nprint(r.text())", Timeout: 30 * time.Second})
		if err != nil || !res.OK() || res.Calls != 1 {
			t.Fatalf("run %d: %+v, %v", i, res, err)
		}
		if n := dials.Load() - before; n != 1 {
			t.Errorf("run %d dialled the control socket %d times, want once", i, n)
		}
	}
}
