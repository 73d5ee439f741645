package unixsock

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestListenUnixModeAndCleanup(t *testing.T) {
	defer leakcheck.Check(t)()
	path := filepath.Join(t.TempDir(), "sub", "dir", "call.sock")
	l, err := Listen(path, 0o660, -1)
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
	// The group may connect, so it may search the directory, and no more.
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o710 {
		t.Errorf("created parent has mode %v, want 0710", di.Mode().Perm())
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
	cred, err := ReadPeerCred(s)
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
	l, err := Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Listen(path, 0o600, -1); !errors.Is(err, ErrInUse) {
		t.Fatalf("second listen = %v, want ErrInUse", err)
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
	l, err := Listen(path, 0o600, -1)
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
	if _, err := Listen(path, 0o600, -1); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listen over a regular file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Error("the regular file was touched")
	}
}

func TestListenUnixPathTooLong(t *testing.T) {
	if _, err := Listen("/tmp/"+strings.Repeat("x", 120), 0o600, -1); err == nil || !strings.Contains(err.Error(), "longer than") {
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
			if _, err := Listen(filepath.Join(dir, "call.sock"), 0o600, -1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("listen = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// nobody is a uid that is neither root nor us, for directories that
// belong to another user.
const nobody = 65534

// chownOrSkip gives p to nobody, or skips the test: only root may.
func chownOrSkip(t *testing.T, p string) {
	t.Helper()
	if err := os.Lchown(p, nobody, nobody); err != nil {
		t.Skipf("cannot give %s to uid %d (%v): run as root to test another user's directory", p, nobody, err)
	}
}

// Every directory above the socket directory, on the path as given and
// on the path its symlinks resolve to, is held to the same rule as the
// socket directory, except that a sticky one (as /tmp is) may be
// writable by others: it keeps them from renaming what is ours.
func TestListenUnixChecksAncestors(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup builds the tree under base and returns the socket path
		// and the path the refusal must name ("" when it is accepted).
		setup func(t *testing.T, base string) (sock, names string)
		want  string
	}{
		{"world-writable parent", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/open", 0o777)
			return base + "/open/socks/call.sock", base + "/open"
		}, "which others may write to"},
		{"group-writable grandparent", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/team", 0o770)
			mkdir(t, base+"/team/x", 0o755)
			return base + "/team/x/socks/call.sock", base + "/team"
		}, "chmod go-w " + "BASE/team"},
		{"another user's grandparent", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/theirs", 0o755)
			mkdir(t, base+"/theirs/x", 0o755)
			chownOrSkip(t, base+"/theirs")
			return base + "/theirs/x/socks/call.sock", base + "/theirs"
		}, "belongs to uid 65534"},
		{"another user's symlink", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/real", 0o755)
			symlink(t, base+"/real", base+"/link")
			chownOrSkip(t, base+"/link")
			return base + "/link/socks/call.sock", base + "/link"
		}, "belongs to uid 65534"},
		{"symlink into a world-writable directory", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/open", 0o777)
			mkdir(t, base+"/open/real", 0o755)
			symlink(t, base+"/open/real", base+"/link")
			return base + "/link/socks/call.sock", base + "/open"
		}, "which others may write to"},
		{"sticky world-writable parent", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/tmp", 0o777|fs.ModeSticky)
			return base + "/tmp/socks/call.sock", ""
		}, ""},
		{"our own symlink", func(t *testing.T, base string) (string, string) {
			mkdir(t, base+"/real", 0o755)
			symlink(t, base+"/real", base+"/link")
			return base + "/link/socks/call.sock", ""
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			base, err := os.MkdirTemp("", "cba")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			sock, names := tc.setup(t, base)
			l, err := Listen(sock, 0o600, -1)
			if names == "" {
				if err != nil {
					t.Fatalf("listen = %v, want it accepted", err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("listen on %s succeeded, want a refusal naming %s", sock, names)
			}
			want := strings.ReplaceAll(tc.want, "BASE", base)
			if !strings.Contains(err.Error(), " "+names+",") && !strings.Contains(err.Error(), " "+names+" ") || !strings.Contains(err.Error(), want) {
				t.Fatalf("listen = %v, want a refusal naming %s and saying %q", err, names, want)
			}
			if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a socket was created despite the refusal: %v", err)
			}
		})
	}
}

func mkdir(t *testing.T, p string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	// Chmod, not Mkdir's mode, which the umask would trim.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// A socket others may connect to (call_socket_mode "0666" with
// allowed_uids, for a harness jailing under another uid) is reachable:
// the directories created for it are searchable by others, and an
// existing directory of ours gains that search bit and nothing else.
func TestListenSearchableForOthers(t *testing.T) {
	defer leakcheck.Check(t)()
	root := t.TempDir()
	path := filepath.Join(root, "a", "b", "call.sock")
	l, err := Listen(path, 0o666, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		if di, _ := os.Stat(d); di.Mode().Perm() != 0o711 {
			t.Errorf("%s has mode %v, want 0711", d, di.Mode().Perm())
		}
	}
	existing := filepath.Join(root, "own")
	if err := os.Mkdir(existing, 0o700); err != nil {
		t.Fatal(err)
	}
	l2, err := Listen(filepath.Join(existing, "call.sock"), 0o666, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if di, _ := os.Stat(existing); di.Mode().Perm() != 0o711 {
		t.Errorf("existing directory has mode %v, want 0711 (search added, nothing else)", di.Mode().Perm())
	}
}

// Reachable answers from the allowed uid's point of view: a directory it
// may not search, or a mode that does not let it write, is named.
func TestReachable(t *testing.T) {
	const other = 65534
	root := t.TempDir()
	closed := filepath.Join(root, "closed")
	open := filepath.Join(root, "open")
	for d, m := range map[string]os.FileMode{closed: 0o700, open: 0o711} {
		if err := os.Mkdir(d, m); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
		ok   bool
	}{
		{filepath.Join(open, "call.sock"), 0o666, true},
		{filepath.Join(open, "new", "call.sock"), 0o666, true}, // created 0711
		{filepath.Join(closed, "call.sock"), 0o666, false},     // the directory
		{filepath.Join(open, "call.sock"), 0o600, false},       // the mode
		{filepath.Join(open, "new", "call.sock"), 0o600, false},
	} {
		err := Reachable(c.path, c.mode, -1, other)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUnreachable)) {
			t.Errorf("Reachable(%s, %04o) = %v, want ok=%v", c.path, c.mode, err, c.ok)
		}
	}
	if err := Reachable(filepath.Join(closed, "call.sock"), 0o600, -1, 0); err != nil {
		t.Errorf("root: %v", err)
	}
}
