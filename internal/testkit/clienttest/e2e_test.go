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

	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
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
image: image/png 70 bytes
link: file:///mcptest/link.txt read: the linked text
schema: bad_arguments at /a
describe: echo
search: echo
collected: later
cancel: waiting
cancel: gave up
cancelled at the server: hang
not_granted: not_granted
`

// blockingWant is what Python's blocking end-to-end program prints.
const blockingWant = `servers: t
echo: hello blocking
describe: echo
search: echo
link: file:///mcptest/link.txt read: the linked text
collected: later
collect: gave up
dropped at the server: hang
collect after drop: bad_arguments
`

var grantedTools = []string{"echo", "content", "add", "fail", "hang", "cancellations"}

// e2e runs an end-to-end program, TypeScript's or Python's, which must
// print want: it boots a real bridge serving the mcptest server, mints a
// grant through the control plane and runs argv with only the socket and
// the token in its environment (plus what the interpreter needs),
// releasing the program's cancellation once the bridge reports its hang
// call in flight at the server.
func e2e(t *testing.T, dir string, env []string, want string, argv ...string) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := bridgetest.NewServer(t, bridgetest.WithServers(mcptestServer("t", mcptest.Scenario{})))
	defer srv.Close()
	ctl := srv.Control()
	granted, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": grantedTools}, Resources: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	env = append([]string{"CAPBRIDGE_SOCKET=" + srv.CallSocket(), "CAPBRIDGE_TOKEN=" + granted.Token, "PATH=" + os.Getenv("PATH")}, env...)
	if out := runProgram(t, ctx, ctl, dir, env, argv...); out != want {
		t.Errorf("program output:\n%s\nwant:\n%s", out, want)
	}
}

// mcptestServer configures the mcptest server as server name, playing sc.
func mcptestServer(name string, sc mcptest.Scenario) config.Server {
	argv, env := mcptest.Command(sc)
	return bridgetest.Stdio(name, argv, env)
}

// runProgram runs argv in dir with exactly env as its environment and
// returns its output, failing t if it fails. When the program prints
// "cancel: waiting" it has a hang call open at server "t"; once the
// bridge reports that call in flight, runProgram writes "go" to its stdin.
func runProgram(t *testing.T, ctx context.Context, ctl *control.Client, dir string, env []string, argv ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
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
	t.Logf("%s ran %v", filepath.Base(argv[len(argv)-1]), time.Since(start).Round(time.Millisecond))
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return out.String()
}

// waitInflight polls the control plane until server has n calls running
// for their callers; ctx bounds the wait. Abandoned calls are left out:
// one another program cancelled still holds its slot for a while, and
// must not be mistaken for the call this program has open.
func waitInflight(t *testing.T, ctx context.Context, ctl *control.Client, server string, n int64) {
	t.Helper()
	for {
		st, err := ctl.Status(ctx)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		for _, s := range st.Servers {
			if s.Name == server && s.Inflight-s.Abandoned == n {
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
