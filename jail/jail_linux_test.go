package jail

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	MaybeInit(nil)
	switch os.Getenv(jailHelperEnv) {
	case "":
	case helperSubmounts:
		os.Exit(submountsHelper())
	case helperPipes:
		os.Exit(pipesHelper())
	default:
		os.Exit(jailHelper())
	}
	leakcheck.Main(m)
}

// A program sees its files, its own root and nothing else, runs as
// root of its own user namespace with no capability, under
// no_new_privs and the seccomp filter, and returns a result on fd 4.
func TestSmoke(t *testing.T) {
	var c Config
	out, err := c.Run(context.Background(), &Program{
		Argv:      []string{"/bin/sh", "-c", "echo hi; id; ls /; cat /work/x; echo err >&2; echo '{\"a\":1}' >&4; ls -la /tmp; cat /proc/self/status | grep -i -E 'cap|nonew|seccomp'"},
		Env:       []string{"PATH=/usr/bin:/bin"},
		Files:     []File{{Path: "/work/x", Data: []byte("file content\n")}},
		WallClock: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hi\n", "file content", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(out.Stdout), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.Stdout)
		}
	}
	if string(out.Result) != "{\"a\":1}\n" || string(out.Stderr) != "err\n" || out.ExitCode != 0 {
		t.Errorf("outcome %+v", out)
	}
}

// An overlay: the program reads the host directory's files and writes
// beside and over them; the host directory is untouched, and the writes
// are gone with the run. A wrapper cannot give one, and says so.
func TestOverlay(t *testing.T) {
	defer leakcheck.Check(t)()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "kept"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The directory belongs to the jail's user (as root, the jail runs as
	// nobody), who may write it: the overlay, not the modes, keeps the
	// host's copy untouched. (An overlay copies a file up as its owner,
	// who must be mapped in the jail.)
	if os.Getuid() == 0 {
		if err := os.Chmod(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{host, filepath.Join(host, "kept")} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	var c Config
	p := &Program{
		Argv:      []string{"/bin/sh", "-c", "cat /cache/kept && echo new > /cache/new && echo over > /cache/kept && cat /cache/new /cache/kept"},
		Env:       []string{"PATH=/usr/bin:/bin"},
		Overlays:  []Overlay{{Source: host, Target: "/cache"}},
		WallClock: 30 * time.Second,
	}
	out, err := c.Run(context.Background(), p)
	if err != nil {
		if strings.Contains(err.Error(), "5.11") {
			t.Skipf("this kernel cannot mount an overlay in a user namespace: %v", err)
		}
		t.Fatal(err)
	}
	if out.ExitCode != 0 || string(out.Stdout) != "from the host\nnew\nover\n" {
		t.Fatalf("outcome %+v\n%s", out, out.Stderr)
	}
	entries, _ := os.ReadDir(host)
	if b, _ := os.ReadFile(filepath.Join(host, "kept")); string(b) != "from the host\n" || len(entries) != 1 {
		t.Errorf("the host directory changed: kept %q, %d entries", b, len(entries))
	}
	w := Config{Wrap: []string{"/bin/sh", "-c", "exit 0", "--"}}
	if _, err := w.Run(context.Background(), p); !errors.Is(err, ErrSetup) {
		t.Errorf("a wrapped run with an overlay: %v, want ErrSetup", err)
	}
}
