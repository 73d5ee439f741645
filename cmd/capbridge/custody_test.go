package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// TestServeSweepsEscapee: the real binary serves a test server whose
// grandchild calls setsid() (out of the server's process group and
// session) and ignores SIGTERM and stdin EOF, as a detached browser
// does. A SIGTERM stop exits 0, within docker stop's 10 s, and the
// grandchild has exited by then.
func TestServeSweepsEscapee(t *testing.T) {
	defer leakcheck.Check(t)()
	bin, cfg := escapeeConfig(t)
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)

	// The server spawns its grandchild before it reads stdin, so once
	// serve is ready (handshake and listing done) both are there.
	leader := childOf(t, srv.cmd.Process.Pid)
	gpid := childOf(t, leader)
	if sid, err := unix.Getsid(gpid); err != nil || sid != gpid {
		t.Fatalf("grandchild %d: sid %d, %v; want a session of its own", gpid, sid, err)
	}
	fd, err := unix.PidfdOpen(gpid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	start := time.Now()
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, more stdout %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
	took := time.Since(start)
	t.Logf("stop took %v", took)
	if took > 10*time.Second {
		t.Errorf("stop took %v, more than docker stop's 10 s", took)
	}
	// serve exits 0 only after its sweep confirmed the grandchild's exit:
	// no waiting.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err != nil || n != 1 {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		t.Fatalf("grandchild %d outlived serve (poll %d, %v); stderr:\n%s", gpid, n, err, srv.stderr.String())
	}
}

// childOf returns the one child of pid, found through /proc's parent
// pids.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the parenthesised command name: state, ppid.
		var state rune
		var ppid int
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		if n, _ := fmt.Sscanf(rest, " %c %d", &state, &ppid); n == 2 && ppid == pid {
			kids = append(kids, p)
		}
	}
	if len(kids) != 1 {
		t.Fatalf("children of %d: %v; want exactly one", pid, kids)
	}
	return kids[0]
}

// escapeeConfig builds capbridge and mcptestserver into a short temporary
// directory and writes a config there serving one server, escapee, whose
// grandchild leaves its process group and session and ignores SIGTERM
// and stdin. It returns the binary and the config's path.
func escapeeConfig(t *testing.T) (bin, cfg string) {
	t.Helper()
	dir := shortTempDir(t)
	bin = filepath.Join(dir, "capbridge")
	server := filepath.Join(dir, "mcptestserver")
	for _, b := range [][]string{{bin, "."}, {server, "../../internal/testkit/mcptest/cmd/mcptestserver"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	cfg = filepath.Join(dir, "capbridge.toml")
	toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n\n" +
		"[mcp.escapee]\ncommand = \"" + server + "\"\n" +
		`args = ["-scenario-json", "{\"grandchild\":true,\"grandchild_setsid\":true}"]` + "\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, cfg
}
