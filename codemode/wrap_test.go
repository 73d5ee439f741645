package codemode

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/need"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/jail"
)

// bwrapLine is docs/jail.md's bubblewrap line: every namespace unshared
// (no network), the system read-only, the run's files and the call
// socket bound, a fresh /proc, /dev and /tmp.
var bwrapLine = []string{"bwrap", "--unshare-all", "--die-with-parent", "--new-session",
	"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	"--ro-bind", "{files}/work", "/work", "--ro-bind", "{files}/capbridge", "/capbridge",
	"--ro-bind-try", "{files}/node_modules", "/node_modules",
	"--ro-bind", "{bind:/run/capbridge/call.sock}", "/run/capbridge/call.sock",
	"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--"}

// needBwrap finds bubblewrap: under the test command (make deps installs
// it) its absence fails the test; elsewhere it skips (internal/testkit/need).
func needBwrap(t *testing.T) string {
	t.Helper()
	return need.Command(t, "bwrap", "`make bwrap` installs bubblewrap")
}

// TestRunWrapped runs programs under a real bubblewrap instead of the
// built-in jail (capbridge mcp --wrap): each language's program calls
// through the bound call socket and returns its value on file descriptor
// 4; a connection to a listener on the host's loopback is refused; the
// wall clock still ends a program that never would, with everything it
// started.
func TestRunWrapped(t *testing.T) {
	defer leakcheck.Check(t)()
	needBwrap(t)
	r, srv := newRunner(t, func(c *Config) {
		c.Jail = &jail.Config{Wrap: bwrapLine, Transformer: StripTypes}
	})
	defer srv.Close()
	progs := map[string]string{
		TypeScript: `import * as t from "./t.js";
const r = await t.echo({ text: "wrapped ts" });
export default r.text();`,
		Python: `import t
r = await t.echo(text="wrapped python")
r.text()`,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, lang := range r.Languages() {
		res, err := r.Run(ctx, Request{Language: lang, Code: progs[lang], Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		want := `"wrapped ` + map[string]string{TypeScript: "ts", Python: "python"}[lang] + `"`
		if !res.OK() || string(res.Value) != want || res.Calls != 1 {
			t.Errorf("%s under bwrap: %+v, want %s after 1 call", lang, res, want)
		}
	}
	if !strings.Contains(strings.Join(r.Languages(), ","), Python) {
		return
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res, err := r.Run(ctx, Request{Language: Python, Timeout: time.Minute, Code: fmt.Sprintf(`import socket
try:
    socket.create_connection(("127.0.0.1", %d), timeout=5)
    out = "connected"
except OSError as e:
    out = e.strerror
out`, l.Addr().(*net.TCPAddr).Port)})
	if err != nil || res.Value == nil || strings.Contains(string(res.Value), "connected") {
		t.Errorf("a wrapped program's connection to the host's loopback: %+v, %v", res, err)
	}

	marker := fmt.Sprintf("%d.%d", 100000+os.Getpid()%100000, time.Now().UnixNano()%1e6)
	res, err = r.Run(ctx, Request{Language: Python, Timeout: time.Second, Code: `import os, time
if os.fork() == 0:
    os.execv("/bin/sleep", ["sleep", "` + marker + `"])
time.sleep(3600)`})
	if err != nil || res.Ended != "wall_clock" {
		t.Fatalf("a wrapped program past its wall clock: %+v, %v", res, err)
	}
	// --die-with-parent and the wrapper's process group, killed when the
	// run ends, take the program's children along.
	eventually(t, "the wrapped program's child to be gone", func() bool { return len(leakcheck.Named(marker)) == 0 })
}
