package jail

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeInit(nil)
	os.Exit(m.Run())
}

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
	t.Logf("%+v\nstdout:\n%s\nstderr:\n%s\nresult: %s", out, out.Stdout, out.Stderr, out.Result)
}
