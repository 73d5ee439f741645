package clienttest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/leakcheck"
	"github.com/capbridge/capbridge/internal/mcptest"
)

// e2eWant is what both end-to-end programs print. The grant reaches server t for the
// listed tools only, so slow is not_granted.
const e2eWant = `servers: t
echo: hello e2e is_error=false
content: text,other:image,other:audio,other:resource_link,other:resource,other:resource
structured: kinds=text,image,audio,resource_link,resource,resource
add: 42 sum=42
fail: as asked is_error=true
denied: bad_arguments at /blob/bytes
cancel: waiting
cancel: gave up
cancelled at the server: hang
not_granted: not_granted
`

var grantedTools = []string{"echo", "content", "add", "fail", "hang", "cancellations"}

// e2e runs an end-to-end program, TypeScript's or Python's: it boots a
// real bridge serving the mcptest server, mints a grant through the
// control plane and runs argv with only the socket and the token in its
// environment (plus what the interpreter needs), releasing the program's
// cancellation once the bridge reports its hang call in flight at the
// server.
func e2e(t *testing.T, dir string, env []string, argv ...string) {
	defer leakcheck.Check(t)()
	sockDir, err := os.MkdirTemp("", "cb") // socket paths must fit 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	cfg := config.Defaults()
	cfg.Bridge.CallSocket = filepath.Join(sockDir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(sockDir, "control.sock")
	cfg.Bridge.ShutdownGrace = 2 * time.Second
	scArgv, scEnv := mcptest.Command(mcptest.Scenario{})
	srv := config.NewServer("t", scArgv[0])
	srv.Args = scArgv[1:]
	srv.Env = map[string]string{}
	for _, kv := range scEnv {
		k, v, _ := strings.Cut(kv, "=")
		srv.Env[k] = v
	}
	srv.StartupTimeout = time.Minute
	cfg.Servers = []config.Server{srv}

	b := bridge.New(bridge.Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if st := b.Boot(ctx); len(st) != 1 || st[0].State != bridge.StateReady {
		_ = b.Shutdown(0)
		t.Fatalf("boot: %v", st)
	}
	if err := b.Listen(); err != nil {
		_ = b.Shutdown(0)
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { b.Serve(); close(served) }()
	defer func() {
		if err := b.Shutdown(cfg.Bridge.ShutdownGrace); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
	}()

	ctl, err := control.Dial(ctx, b.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	granted, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": grantedTools}})
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	// Only what a jail hands in, plus what the interpreter needs.
	cmd.Env = append([]string{"CAPBRIDGE_SOCKET=" + b.CallSocket(), "CAPBRIDGE_TOKEN=" + granted.Token, "PATH=" + os.Getenv("PATH")}, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() == "cancel: waiting" {
			waitInflight(t, ctx, ctl, "t", 1)
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Errorf("releasing the cancellation: %v", err)
			}
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", argv, err, out.String(), stderr.String())
	}
	t.Logf("program ran %v", time.Since(start).Round(time.Millisecond))
	if out.String() != e2eWant {
		t.Errorf("program output:\n%s\nwant:\n%s\nstderr:\n%s", out.String(), e2eWant, stderr.String())
	}
}

// waitInflight polls the control plane until server has n calls in
// flight; ctx bounds the wait.
func waitInflight(t *testing.T, ctx context.Context, ctl *control.Client, server string, n int64) {
	t.Helper()
	for {
		st, err := ctl.Status(ctx)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		for _, s := range st.Servers {
			if s.Name == server && s.Inflight == n {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("server %s never had %d calls in flight: %v", server, n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
