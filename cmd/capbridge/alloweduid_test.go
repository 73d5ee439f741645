package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// envHarness makes the test binary a harness's program: it dials the call
// socket from CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN, calls the demo's echo
// and prints the answer.
const envHarness = "CAPBRIDGE_TEST_HARNESS"

func maybeHarness() {
	if os.Getenv(envHarness) == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := capwire.FromEnv(ctx)
	if err == nil {
		var r *capwire.Result
		if r, err = c.Call(ctx, "demo", "echo", map[string]any{"text": "hello as " + fmt.Sprint(os.Getuid())}); err == nil {
			fmt.Println(r.Text())
		}
		c.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// A harness that jails its programs under another uid configures the call
// socket for it (call_socket_mode "0666", allowed_uids). doctor checks the
// path from that uid's point of view: it finds the directory the uid
// cannot search, and passes once it can; then a process running as that
// uid connects to serve's call socket and calls, under a grant bound to
// its uid.
func TestAllowedUIDSocket(t *testing.T) {
	defer leakcheck.Check(t)()
	if os.Getuid() != 0 {
		t.Skip("running a process as another uid needs root (CI runs as root)")
	}
	const nobody = 65534
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := shortTempDir(t) // 0700: nobody cannot search it
	// The demo server runs as root from a binary nobody need not reach.
	cfg := writeConfig(t, dir, fmt.Sprintf(`
[bridge]
call_socket = %q
control_socket = %q
call_socket_mode = "0666"
allowed_uids = [%d]

[mcp.demo]
command = %q
args = ["demo-server"]
`, dir+"/run/call.sock", dir+"/ctl/control.sock", nobody, bin))

	r := doctorJSON(t, bin, nil, exitError, "-c", cfg)
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Where, "call_socket") ||
		!strings.Contains(r.Problems[0].Problem, dir) || !strings.Contains(r.Problems[0].Problem, fmt.Sprint(nobody)) {
		t.Fatalf("doctor with %s closed to uid %d: %+v", dir, nobody, r.Problems)
	}
	demoGone(t, r.Servers[0].PID)
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	r = doctorJSON(t, bin, nil, exitOK, "-c", cfg)
	if !r.OK {
		t.Fatalf("doctor once uid %d can search %s: %+v", nobody, dir, r.Problems)
	}
	demoGone(t, r.Servers[0].PID)

	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	cc, err := control.Dial(ctx, dir+"/ctl/control.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	uid := uint32(nobody)
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"demo": {"echo"}}, PeerUID: &uid})
	if err != nil {
		t.Fatal(err)
	}
	// The harness's program: this test binary, copied where nobody may
	// execute it, run as nobody.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	harness := filepath.Join(dir, "harness")
	if err := copyFile(self, harness, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, harness)
	cmd.Env = []string{envHarness + "=1", capwire.EnvSocket + "=" + dir + "/run/call.sock", capwire.EnvToken + "=" + g.Token}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("hello as %d", nobody) {
		t.Errorf("the harness's program as uid %d: %v\n%s", nobody, err, out)
	}
	cc.Close()
	if _, err := srv.stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
