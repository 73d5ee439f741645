package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/need"
)

// squatterEnv makes the test binary a squatter: it listens on the path
// given, says "ready", and reports how many bytes its one connection
// carried before it closed.
const squatterEnv = "CONTROL_TEST_SQUATTER"

func TestMain(m *testing.M) {
	if path := os.Getenv(squatterEnv); path != "" {
		os.Exit(squat(path))
	}
	os.Exit(m.Run())
}

func squat(path string) int {
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ready")
	conn, err := l.Accept()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a backstop
	n, err := io.Copy(io.Discard, conn)
	fmt.Printf("got %d bytes (%v)\n", n, err)
	return 0
}

// needRoot ends the test unless it runs as root, which what needs:
// under the test command (CI runs it as root) the test fails, run by
// hand it is skipped (need.Missing).
func needRoot(t *testing.T, what string) {
	t.Helper()
	if uid := os.Getuid(); uid != 0 {
		need.Missing(t, "root", what+" needs it: run the tests as root, as CI does", fmt.Errorf("running as uid %d", uid))
	}
}

// nobody is the uid a squatter runs as.
const nobody = 65534

// A client dialling the default control socket, which another local user
// may have created first (/tmp/capbridge-UID where $XDG_RUNTIME_DIR is
// unset), sends nothing to a socket in a directory that is not ours or
// root's or that others may write to, nor to one served by another
// user; it speaks to one we serve.
func TestDialOwn(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a backstop
	defer cancel()

	// refusedUnheard dials path with DialOwn, wants it refused, then
	// checks that the listener l met no connection before ours.
	refusedUnheard := func(t *testing.T, l net.Listener, path, says string) {
		t.Helper()
		c, err := DialOwn(ctx, path)
		if err == nil {
			c.Close()
			t.Fatalf("DialOwn(%s) connected", path)
		}
		if ue, ok := errors.AsType[*UntrustedError](err); !ok || !strings.Contains(ue.Reason, says) {
			t.Fatalf("DialOwn(%s): %v, want an UntrustedError saying %q", path, err, says)
		}
		mark, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer mark.Close()
		if _, err := mark.Write([]byte("mark")); err != nil {
			t.Fatal(err)
		}
		first, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(first, buf); err != nil || string(buf) != "mark" {
			t.Errorf("the listener's first connection carried %q (%v): DialOwn connected to it", buf, err)
		}
	}
	listenIn := func(t *testing.T, dir string) (net.Listener, string) {
		t.Helper()
		path := filepath.Join(dir, "control.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l, path
	}

	t.Run("others may write to the directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "capbridge")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		l, path := listenIn(t, dir)
		refusedUnheard(t, l, path, "mode 0777")
	})

	t.Run("the directory is another user's", func(t *testing.T) {
		needRoot(t, "giving a directory to another uid")
		dir := filepath.Join(t.TempDir(), "capbridge")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		l, path := listenIn(t, dir)
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		refusedUnheard(t, l, path, fmt.Sprintf("belongs to uid %d", nobody))
	})

	t.Run("another user serves the socket", func(t *testing.T) {
		needRoot(t, "running a process as another uid")
		base := t.TempDir()
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o755); err != nil { // for nobody to reach its own
				t.Fatal(err)
			}
		}
		theirs := filepath.Join(base, "theirs")
		ours := filepath.Join(base, "capbridge")
		for _, d := range []string{theirs, ours} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(theirs, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(base, "control.test") // the build's own directory is ours alone
		if err := copySelf(exe); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), squatterEnv+"="+filepath.Join(theirs, "s.sock"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		r := bufio.NewReader(out)
		if line, err := r.ReadString('\n'); line != "ready\n" {
			t.Fatalf("the squatter said %q (%v)", line, err)
		}
		// A socket keeps its listener when renamed: the squatter's now
		// sits in a directory of ours.
		path := filepath.Join(ours, "control.sock")
		if err := os.Rename(filepath.Join(theirs, "s.sock"), path); err != nil {
			t.Fatal(err)
		}
		c, err := DialOwn(ctx, path)
		if err == nil {
			c.Close()
			t.Fatal("DialOwn connected to a socket served by another uid")
		}
		if ue, ok := errors.AsType[*UntrustedError](err); !ok || !strings.Contains(ue.Reason, fmt.Sprintf("served by uid %d", nobody)) {
			t.Fatalf("DialOwn: %v, want an UntrustedError naming uid %d", err, nobody)
		}
		if line, err := r.ReadString('\n'); !strings.HasPrefix(line, "got 0 bytes") {
			t.Errorf("the squatter %q (%v), want nothing sent to it", line, err)
		}
	})

	t.Run("ours", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "capbridge")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		l, path := listenIn(t, dir)
		done := make(chan struct{})
		go func() {
			defer close(done)
			conn, err := l.Accept()
			if err != nil {
				return
			}
			(&Server{Handler: newFake(), WriteTimeout: time.Minute}).ServeConn(ctx, conn)
		}()
		c, err := DialOwn(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx)
		c.Close()
		<-done
		if err != nil || len(st.Servers) != 1 {
			t.Fatalf("Status through DialOwn: %+v, %v", st, err)
		}
	})
}

// copySelf copies the test binary to path, executable by anyone.
func copySelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o755)
}
