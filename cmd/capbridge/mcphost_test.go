package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/need"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// backstop bounds each wait on an event that should come: it fires only
// when what is under test is broken.
const backstop = 2 * time.Minute

// mcpHost is a stand-in MCP host driving a `capbridge mcp` process over
// stdio, one JSON-RPC message per line. Messages are read by one
// goroutine into msgs; next takes them in order.
type mcpHost struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	msgs   chan map[string]any
	stderr syncbuf.Buffer
	waited bool
}

// startMCP starts bin with args as an MCP host would, and completes the
// legacy handshake.
func startMCP(t *testing.T, bin string, args ...string) *mcpHost {
	t.Helper()
	h := &mcpHost{t: t, cmd: exec.Command(bin, args...), msgs: make(chan map[string]any, 64)}
	h.cmd.Stderr = &h.stderr
	var err error
	if h.in, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !h.waited {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
			t.Logf("capbridge mcp stderr:\n%s", h.stderr.String())
		}
	})
	go func() {
		defer close(h.msgs)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			h.msgs <- m
		}
	}()
	h.send(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test", "version": "1"}}})
	if r := h.next(); r["id"] != float64(0) || r["result"] == nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", r, h.stderr.String())
	}
	h.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return h
}

func (h *mcpHost) send(msg map[string]any) {
	h.t.Helper()
	b, _ := json.Marshal(msg)
	if _, err := h.in.Write(append(b, '\n')); err != nil {
		h.t.Fatalf("writing to capbridge mcp: %v", err)
	}
}

// next is the next message capbridge mcp sends.
func (h *mcpHost) next() map[string]any {
	h.t.Helper()
	select {
	case m, ok := <-h.msgs:
		if !ok {
			h.t.Fatalf("capbridge mcp closed its stdout\nstderr:\n%s", h.stderr.String())
		}
		return m
	case <-time.After(backstop):
		h.t.Fatalf("nothing from capbridge mcp in %v\nstderr:\n%s", backstop, h.stderr.String())
		return nil
	}
}

// call sends a request and returns its response, failing on an error
// response; notifications before it are handed to note, when not nil.
func (h *mcpHost) call(id any, method string, params map[string]any, note func(map[string]any)) map[string]any {
	h.t.Helper()
	h.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	want, _ := json.Marshal(id)
	for {
		m := h.next()
		if got, _ := json.Marshal(m["id"]); m["method"] == nil && bytes.Equal(got, want) {
			if m["error"] != nil {
				h.t.Fatalf("%s: %v", method, m["error"])
			}
			return m["result"].(map[string]any)
		}
		if note != nil {
			note(m)
		}
	}
}

// close ends the session as a host does, closing stdin, and waits for
// the exit status.
func (h *mcpHost) close() error {
	h.in.Close()
	for range h.msgs {
	}
	err := h.cmd.Wait()
	h.waited = true
	return err
}

// mcptestConfig writes a capbridge.toml in dir serving mcptest as "t",
// with the audit trail in dir/audit.log and extra appended. As root, the
// jail runs as nobody, whom the call socket then lets in.
func mcptestConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	argv, env := mcptest.Command(mcptest.Scenario{})
	var b strings.Builder
	fmt.Fprintf(&b, "[bridge]\ncall_socket = %q\ncontrol_socket = %q\naudit_path = %q\nlog_format = \"json\"\n",
		dir+"/call.sock", dir+"/control.sock", dir+"/audit.log")
	if os.Getuid() == 0 {
		b.WriteString("call_socket_mode = \"0666\"\nallowed_uids = [0, 65534]\n")
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintf(&b, "\n[mcp.t]\ncommand = %q\nargs = %s\nenv = { ", argv[0], tomlList(argv[1:]))
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + " = " + strconv.Quote(v))
	}
	b.WriteString(" }\n" + extra)
	path := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// auditRuns reads the run lines of an audit file.
func auditRuns(path string) []map[string]any {
	data, _ := os.ReadFile(path)
	var out []map[string]any
	for line := range strings.Lines(string(data)) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == "run" {
			out = append(out, m)
		}
	}
	return out
}

// waitFor polls cond until it holds; the limit is a backstop.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(backstop)
	defer limit.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-limit.C:
			t.Fatalf("after %v: still waiting for %s", backstop, what)
		}
	}
}

// TestMCPAttach runs one bridge for a harness and an MCP host at once:
// `capbridge serve`, and `capbridge mcp --attach` on its control socket.
// While the host's run is blocked in a call (its progress notifications
// arriving, one per interval), the harness takes a grant of its own and
// calls through the same bridge. The host then cancels the run: the
// jail's whole PID namespace is gone (the daemon the program left in a
// session of its own too), the run's grant is revoked while the
// harness's lives on, the audit line says cancelled, and the cancelled
// request gets no answer while the next one does.
func TestMCPAttach(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := shortTempDir(t)
	cfg := mcptestConfig(t, dir, "")
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)
	host := startMCP(t, bin, "mcp", "--attach", dir+"/control.sock", "--languages", "python")

	marker := fmt.Sprintf("%d.%d", 100000+os.Getpid()%100000, time.Now().UnixNano()%1e6)
	code := `import os, t
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sleep", ["sleep", "` + marker + `"])
await t.hang()
`
	host.send(map[string]any{"jsonrpc": "2.0", "id": "run-1", "method": "tools/call", "params": map[string]any{
		"name": "run", "arguments": map[string]any{"language": "python", "code": code, "timeout": 300},
		"_meta": map[string]any{"progressToken": "p1"}}})
	// Two progress notifications, growing: the run has outlived the
	// progress interval twice, and the host was told.
	var last float64
	for n := 0; n < 2; {
		m := host.next()
		if m["method"] != "notifications/progress" {
			t.Fatalf("while the run is blocked: %v", m)
		}
		p := m["params"].(map[string]any)
		if p["progressToken"] != "p1" || p["progress"].(float64) <= last || p["total"] != float64(300) {
			t.Fatalf("progress %v after %v", p, last)
		}
		last = p["progress"].(float64)
		n++
	}

	// The harness's side, through the same bridge while the run lives.
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	cc, err := control.Dial(ctx, dir+"/control.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": {"echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	wc, err := capwire.Dial(ctx, dir+"/call.sock", g.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	res, err := wc.Call(ctx, "t", "echo", map[string]any{"text": "from the harness"})
	if err != nil || res.Text() != "from the harness" {
		t.Fatalf("the harness's call: %v, %v", res, err)
	}
	st, err := cc.Status(ctx)
	if err != nil || st.Grants != 2 || st.Servers[0].Inflight != 1 {
		t.Fatalf("status with both at work: %+v, %v; want 2 grants and the run's call in flight", st, err)
	}
	daemons := leakcheck.Named(marker)
	if len(daemons) != 1 {
		t.Fatalf("the run's daemon: %v", daemons)
	}
	// The run's jail: the child of capbridge mcp the daemon descends
	// from (the others, if any, are warm jails waiting for a run).
	jail := daemons[0]
	for p := parentOf(t, jail); p != host.cmd.Process.Pid; p = parentOf(t, jail) {
		if p <= 1 {
			t.Fatalf("the run's daemon %d does not descend from capbridge mcp", daemons[0])
		}
		jail = p
	}

	host.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "run-1", "reason": "the user stopped it"}})
	audit := dir + "/audit.log"
	waitFor(t, "the run's audit line", func() bool { return len(auditRuns(audit)) > 0 })
	runs := auditRuns(audit)
	if len(runs) != 1 || runs[0]["ended"] != "cancelled" || runs[0]["language"] != "python" {
		t.Errorf("run audit lines: %v", runs)
	}
	// The audit line is written at revoke, after the jail's init was
	// reaped: its namespace is empty by then.
	for _, pid := range append([]int{jail}, daemons...) {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d of the run outlived its cancellation: %v", pid, err)
		}
	}
	if st, err := cc.Status(ctx); err != nil || st.Grants != 1 {
		t.Errorf("status after the cancellation: %+v, %v; want the harness's grant alone", st, err)
	}
	if res, err := wc.Call(ctx, "t", "echo", map[string]any{"text": "still here"}); err != nil || res.Text() != "still here" {
		t.Errorf("the harness after the run's cancellation: %v, %v", res, err)
	}
	// The cancelled request is not answered (MCP, cancellation); a ping
	// sent after it is, and nothing for run-1 comes before it.
	host.call(7, "ping", map[string]any{}, func(m map[string]any) {
		if m["id"] == "run-1" {
			t.Errorf("the cancelled run was answered: %v", m)
		}
	})
	if _, err := cc.Revoke(ctx, &control.RevokeRequest{Grant: g.Grant}); err != nil {
		t.Fatal(err)
	}
	wc.Close()
	cc.Close()
	if err := host.close(); err != nil {
		t.Errorf("capbridge mcp: %v\n%s", err, host.stderr.String())
	}
	// Once, at start: whether runs get cgroup v2 limits, or why not.
	if n := strings.Count(host.stderr.String(), "cgroup v2"); n != 1 {
		t.Errorf("capbridge mcp's log names cgroup v2 %d times, want once:\n%s", n, host.stderr.String())
	}
	if _, err := srv.stop(); err != nil {
		t.Errorf("serve: %v\n%s", err, srv.stderr.String())
	}
}

// `capbridge run --wrap` runs the program under the operator's jail
// command, a real bubblewrap here, against a running serve.
func TestRunWrapCLI(t *testing.T) {
	defer leakcheck.Check(t)()
	need.Command(t, "bwrap", "`make bwrap` installs bubblewrap")
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := shortTempDir(t)
	srv, _ := startServe(t, bin, nil, "serve", "-c", mcptestConfig(t, dir, ""))
	prog := filepath.Join(dir, "prog.py")
	if err := os.WriteFile(prog, []byte("import os, t\nr = await t.echo(text='wrapped')\nprint(r.text(), os.path.exists('/usr/lib/os-release'))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrap := "bwrap --unshare-all --die-with-parent --new-session --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib " +
		"--symlink usr/lib64 /lib64 --ro-bind {files}/work /work --ro-bind {files}/capbridge /capbridge " +
		"--ro-bind {bind:/run/capbridge/call.sock} /run/capbridge/call.sock --proc /proc --dev /dev --tmpfs /tmp --chdir /tmp --"
	out, errOut, code := runCLI(t, bin, nil, "run", "--attach", dir+"/control.sock", "--wrap", wrap, prog)
	if code != 0 || out != "wrapped True\n" {
		t.Errorf("capbridge run --wrap: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if _, err := srv.stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
	runs := auditRuns(dir + "/audit.log")
	if len(runs) != 1 || runs[0]["ended"] != "exit" || runs[0]["calls"] != float64(1) {
		t.Errorf("audit: %v", runs)
	}
}
