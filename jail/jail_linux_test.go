package jail

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	MaybeInit(nil)
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
