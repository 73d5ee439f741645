package bridge

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/leakcheck"
)

func TestListenUnixModeAndCleanup(t *testing.T) {
	defer leakcheck.Check(t)()
	path := filepath.Join(t.TempDir(), "sub", "dir", "call.sock")
	l, err := listenUnix(path, 0o660, -1)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, want socket 0660", fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("created parent has mode %v, want 0700", di.Mode().Perm())
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the socket (no temp file left)", len(ents))
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	cred, err := peerCred(s)
	if err != nil {
		t.Fatal(err)
	}
	if int(cred.PID) != os.Getpid() || int(cred.UID) != os.Getuid() || int(cred.GID) != os.Getgid() {
		t.Errorf("peer cred = %+v, want this process", cred)
	}
	c.Close()
	s.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file remains after Close: %v", err)
	}
}

func TestListenUnixRefusesLiveSocket(t *testing.T) {
	defer leakcheck.Check(t)()
	path := filepath.Join(t.TempDir(), "call.sock")
	l, err := listenUnix(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := listenUnix(path, 0o600, -1); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second listen = %v, want ErrSocketInUse", err)
	}
	// The first listener still serves.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live socket was disturbed: %v", err)
	}
	c.Close()
}

func TestListenUnixReplacesStaleSocket(t *testing.T) {
	defer leakcheck.Check(t)()
	path := filepath.Join(t.TempDir(), "call.sock")
	// A stale socket: bound, then its listener closed without unlinking,
	// as after a crash.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	l, err := listenUnix(path, 0o600, -1)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l.Close()
}

func TestListenUnixRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "call.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listenUnix(path, 0o600, -1); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listen over a regular file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Error("the regular file was touched")
	}
}

func TestListenUnixPathTooLong(t *testing.T) {
	if _, err := listenUnix("/tmp/"+strings.Repeat("x", 120), 0o600, -1); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v, want a path-length error", err)
	}
}

// A socket directory someone else could write to is refused: they could
// swap our socket for theirs and read every token.
func TestListenUnixRefusesUnsafeDirectory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"world-writable", func(dir string) error { return os.Chmod(dir, 0o777) }, "others could replace the sockets"},
		{"group-writable", func(dir string) error { return os.Chmod(dir, 0o770) }, "others could replace the sockets"},
		{"another user's", func(dir string) error { return os.Chown(dir, 4242, 4242) }, "belongs to uid 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "socks")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := listenUnix(filepath.Join(dir, "call.sock"), 0o600, -1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("listen = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}
