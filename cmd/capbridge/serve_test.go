package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// serve spawns processes (the demo server, the built binary): a child that
// survives the package's tests fails the run. The test binary doubles as
// the mcptest server, for the servers the lock tests configure.
func TestMain(m *testing.M) {
	maybeActAsChild()
	mcptest.MaybeServe()
	maybeBrowse()
	maybeHarness()
	leakcheck.Main(m)
}

// TestServe runs the README's quick start and serve's documented exits
// with the real binary, built once: `capbridge serve` with no config, a
// client command against it, SIGTERM; then a config error and a boot
// failure under --require-all.
func TestServe(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("quick start", func(t *testing.T) { testQuickStart(t, bin) })
	t.Run("version", func(t *testing.T) {
		// The binary prints its own build info, whichever way it was
		// stamped, for both spellings.
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		want := versionText(bi, true)
		for _, args := range [][]string{{"version"}, {"--version"}} {
			if out, stderr, code := runCLI(t, bin, nil, args...); code != 0 || out != want {
				t.Errorf("capbridge %s: exit %d, stdout\n%s\nstderr %s\nwant\n%s", args[0], code, out, stderr, want)
			}
		}
	})
	t.Run("SIGTERM under load", func(t *testing.T) { testSIGTERMUnderLoad(t, bin) })
	t.Run("config error", func(t *testing.T) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "bad.toml")
		if err := os.WriteFile(cfg, []byte("[bridge]\nmax_connections = 8\ncolour = \"blue\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runCLI(t, bin, nil, "serve", "-c", cfg)
		if code != exitConfig || !strings.Contains(stderr, cfg+":3: ") || !strings.Contains(stderr, "colour") {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit %d naming %s:3 and the key", code, stderr, exitConfig, cfg)
		}
	})
	t.Run("a bad OTEL setting", func(t *testing.T) {
		// Traces are asked for in the environment, with a sampler
		// OpenTelemetry does not define: serve stops before it starts
		// anything, naming the variable, rather than sample silently
		// otherwise.
		dir := shortTempDir(t)
		cfg := filepath.Join(dir, "capbridge.toml")
		toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n"
		if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER=sometimes"}
		_, stderr, code := runCLI(t, bin, env, "serve", "-c", cfg)
		if code != exitConfig || !strings.Contains(stderr, "OTEL_TRACES_SAMPLER") || !strings.Contains(stderr, "parentbased_traceidratio") {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit %d naming the variable and its values", code, stderr, exitConfig)
		}
	})
	t.Run("audit_path", func(t *testing.T) { testAuditPath(t, bin) })
	t.Run("the pod manifest's config", func(t *testing.T) { testPodConfig(t, bin) })
	t.Run("SIGHUP reopens the audit file", func(t *testing.T) { testSIGHUP(t, bin) })
	t.Run("SIGHUP refuses a FIFO at audit_path", func(t *testing.T) { testSIGHUPFIFO(t, bin) })
	t.Run("reload and watch", func(t *testing.T) { testReloadAndWatch(t, bin) })
	t.Run("watch applies a save made during the boot", func(t *testing.T) { testWatchSaveDuringBoot(t, bin) })
	t.Run("metrics port flooded", func(t *testing.T) { testMetricsFlood(t, bin) })
	t.Run("metrics on a unix socket", func(t *testing.T) { testMetricsUnixSocket(t, bin) })
	t.Run("lock", func(t *testing.T) { testServeLock(t, bin) })
	t.Run("lock others can write", func(t *testing.T) { testServeLockTrust(t, bin) })
	t.Run("a FIFO at the lock's path", func(t *testing.T) { testServeLockFIFO(t, bin) })
	t.Run("lock a running capbridge", func(t *testing.T) { testLockRunning(t, bin) })
	t.Run("secrets are never written", func(t *testing.T) { testSecretsNeverWritten(t, bin) })
	t.Run("a secret that does not resolve", func(t *testing.T) { testSecretUnresolved(t, bin) })
	t.Run("a reload's secrets are redacted in the audit file", func(t *testing.T) { testReloadSecretsRedacted(t, bin) })
	t.Run("skew names a dropped tool", func(t *testing.T) { testSkewNamesDroppedTool(t, bin) })
	t.Run("a failing server's secrets are redacted by lock, skew, mcp, doctor and serve", func(t *testing.T) { testBootLogsRedacted(t, bin) })
	t.Run("profiles", func(t *testing.T) { testProfiles(t, bin) })
	t.Run("ready when the sockets are open", func(t *testing.T) {
		dir := shortTempDir(t)
		cfg := filepath.Join(dir, "capbridge.toml")
		toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n\n" +
			"[mcp.missing]\ncommand = \"" + dir + "/no-such-server\"\nrestart_backoff = \"50ms\"\nrestart_max = \"100ms\"\n"
		if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		srv, line := startServe(t, bin, nil, "serve", "-c", cfg, "--ready-when=sockets")
		if strings.TrimSpace(line) != `{"ready":true,"call_socket":"`+dir+`/call.sock","control_socket":"`+dir+`/control.sock","servers":{"missing":"starting"}}` {
			t.Errorf("ready line %s", line)
		}
		// The server that cannot start is retried; status shows it.
		env := []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}
		limit := time.Now().Add(60 * time.Second) // a backstop: each status is an event
		for {
			out, errOut, code := runCLI(t, bin, env, "status", "--json")
			if code != 0 {
				t.Fatalf("status: exit %d, %s", code, errOut)
			}
			if strings.Contains(out, `"restarts":2`) {
				// procs = 1 by default; GOMAXPROCS in the environment
				// wins.
				want := "1"
				if v := os.Getenv("GOMAXPROCS"); v != "" {
					want = v
				}
				if !strings.Contains(out, `"procs":`+want+`}`) && !strings.Contains(out, `"procs":`+want+`,`) {
					t.Errorf("status --json does not say procs %s: %s", want, out)
				}
				break
			}
			if time.Now().After(limit) {
				t.Fatalf("no second restart after 60 s: %s", out)
			}
		}
		if rest, err := srv.stop(); err != nil || len(rest) != 0 {
			t.Fatalf("serve after SIGTERM: %v, more stdout %q; stderr:\n%s", err, rest, srv.stderr.String())
		}
		if n := strings.Count(srv.stderr.String(), `"event":"restart"`); n < 2 {
			t.Errorf("%d restarts audited, want at least 2; stderr:\n%s", n, srv.stderr.String())
		}
	})
	t.Run("require-all with a server that cannot start", func(t *testing.T) {
		dir := shortTempDir(t)
		cfg := filepath.Join(dir, "capbridge.toml")
		toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n\n" +
			"[mcp.missing]\ncommand = \"" + dir + "/no-such-server\"\n"
		if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, bin, nil, "serve", "-c", cfg, "--require-all")
		if code != exitBoot || stdout != "" || !strings.Contains(stderr, `"server":"missing"`) {
			t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, no ready line, the server named", code, stdout, stderr, exitBoot)
		}
		for _, s := range []string{"call.sock", "control.sock"} {
			if _, err := os.Lstat(filepath.Join(dir, s)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind: %v", s, err)
			}
		}
	})
}

func testQuickStart(t *testing.T, bin string) {
	rt := shortTempDir(t)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(rt, "notify.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	readyFile := filepath.Join(rt, "ready.json")
	env := []string{"XDG_RUNTIME_DIR=" + rt}

	srv, line := startServe(t, bin, append(env, "NOTIFY_SOCKET="+notify.LocalAddr().String()), "serve", "--ready-file", readyFile)
	var ready struct {
		Ready         bool              `json:"ready"`
		CallSocket    string            `json:"call_socket"`
		ControlSocket string            `json:"control_socket"`
		Servers       map[string]string `json:"servers"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	sockDir := filepath.Join(rt, "capbridge")
	if !ready.Ready || ready.CallSocket != filepath.Join(sockDir, "call.sock") || ready.ControlSocket != filepath.Join(sockDir, "control.sock") ||
		len(ready.Servers) != 1 || ready.Servers["demo"] != "ready" {
		t.Fatalf("ready line: %s", line)
	}
	if got, err := os.ReadFile(readyFile); err != nil || string(got) != line {
		t.Errorf("ready file = %q, %v; want the ready line %q", got, err, line)
	}
	if got := datagram(t, notify); got != "READY=1" {
		t.Errorf("NOTIFY_SOCKET got %q, want READY=1", got)
	}

	// The README's first client command.
	if out, errOut, code := runCLI(t, bin, env, "call", "demo", "echo", `{"text":"hello"}`); code != 0 || out != "hello\n" {
		t.Errorf("call demo echo: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code := runCLI(t, bin, env, "call", "--json", "demo", "add", `{"a":1,"b":2}`)
	var added struct {
		T          string `json:"t"`
		Structured struct{ Sum float64 }
	}
	if err := json.Unmarshal([]byte(out), &added); code != 0 || err != nil || added.T != "result" || added.Structured.Sum != 3 {
		t.Errorf("call --json demo add: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// grant prints the token alone, and the token works on the call socket.
	out, errOut, code = runCLI(t, bin, env, "grant", "--servers", "demo")
	if code != 0 || !regexp.MustCompile(`^cbt1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{22}\n$`).MatchString(out) {
		t.Fatalf("grant: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := capwire.Dial(ctx, ready.CallSocket, strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Call(ctx, "demo", "echo", map[string]any{"text": "granted"})
	c.Close()
	if err != nil || r.Text() != "granted" {
		t.Fatalf("call with the granted token: %v, %v", r, err)
	}

	out, errOut, code = runCLI(t, bin, env, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^demo +ready +pid=[1-9]`).MatchString(out) || !regexp.MustCompile(`(?m)^  mcp: legacy 20\d\d-\d\d-\d\d, server "`).MatchString(out) {
		t.Errorf("status: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, bin, env, "status", "--json")
	var status struct {
		Servers []struct {
			Name  string `msgpack:"name"`
			State string `msgpack:"state"`
			PID   int    `msgpack:"pid"`
		}
	}
	if err := json.Unmarshal([]byte(out), &status); code != 0 || err != nil || len(status.Servers) != 1 || status.Servers[0].PID <= 0 {
		t.Fatalf("status --json: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	demoPID := status.Servers[0].PID

	// SIGTERM: exit 0, nothing more on stdout (the ready line is said
	// once), STOPPING=1 to the service manager, sockets removed, and the
	// demo server gone.
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, more stdout %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
	if got := datagram(t, notify); got != "STOPPING=1" {
		t.Errorf("NOTIFY_SOCKET got %q, want STOPPING=1", got)
	}
	for _, s := range []string{ready.CallSocket, ready.ControlSocket} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", s, err)
		}
	}
	demoGone(t, demoPID)
}

// testSIGTERMUnderLoad stops the real binary while clients keep calls in
// flight: no call hangs, every reply is the right result or shutting_down
// (a call the bridge never read fails with the closed connection), serve
// exits 0, and it leaves neither sockets nor the demo server behind.
func testSIGTERMUnderLoad(t *testing.T, bin string) {
	rt := shortTempDir(t)
	env := []string{"XDG_RUNTIME_DIR=" + rt}
	srv, _ := startServe(t, bin, env, "serve")
	callSock := filepath.Join(rt, "capbridge", "call.sock")
	out, errOut, code := runCLI(t, bin, env, "status", "--json")
	var status struct{ Servers []struct{ PID int } }
	if err := json.Unmarshal([]byte(out), &status); code != 0 || err != nil || len(status.Servers) != 1 {
		t.Fatalf("status --json: exit %d, %q, %q", code, out, errOut)
	}
	demoPID := status.Servers[0].PID
	out, errOut, code = runCLI(t, bin, env, "grant", "--servers", "demo")
	if code != 0 {
		t.Fatalf("grant: exit %d, %q", code, errOut)
	}
	token := strings.TrimSpace(out)

	// 8 connections, each with 4 callers looping until the service goes.
	const conns, callers = 8, 4
	var ok, shutting, closed, wrong atomic.Int64
	// enough is closed by the call that brings the results to 300: the
	// load is under way, and SIGTERM meets calls in flight.
	const warm = 300
	enough := make(chan struct{})
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range conns {
		c, err := capwire.Dial(ctx, callSock, token)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for j := range callers {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					text := fmt.Sprintf("%d/%d/%d", i, j, n)
					r, err := c.Call(ctx, "demo", "echo", map[string]any{"text": text})
					var d *capwire.Denied
					switch {
					case err == nil && r.Text() == text:
						if ok.Add(1) == warm {
							close(enough)
						}
						continue
					case errors.As(err, &d) && d.Code == capwire.CodeShuttingDown:
						shutting.Add(1)
					case errors.Is(err, capwire.ErrClosed):
						closed.Add(1)
					default:
						wrong.Add(1)
						t.Errorf("call %s: %v, %v", text, r, err)
					}
					return
				}
				wrong.Add(1)
				t.Errorf("a caller was still calling after 60 s")
			})
		}
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatalf("only %d calls answered before the backstop", ok.Load())
	}
	_, err := srv.stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("serve exited %v; stderr:\n%s", err, srv.stderr.String())
	}
	t.Logf("%d results, %d shutting_down, %d on a closed connection", ok.Load(), shutting.Load(), closed.Load())
	if wrong.Load() != 0 || ok.Load() < warm || shutting.Load()+closed.Load() != conns*callers {
		t.Errorf("outcomes: %d ok, %d shutting_down, %d closed, %d wrong; want every caller to end once, cleanly", ok.Load(), shutting.Load(), closed.Load(), wrong.Load())
	}
	for _, sock := range []string{callSock, filepath.Join(rt, "capbridge", "control.sock")} {
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", sock, err)
		}
	}
	demoGone(t, demoPID)
}

// --cpu-profile and --alloc-profile write pprof profiles of serve, from
// start to exit; a path serve cannot write fails it before anything runs.
func testProfiles(t *testing.T, bin string) {
	rt := shortTempDir(t)
	env := []string{"XDG_RUNTIME_DIR=" + rt}
	cpu, alloc := filepath.Join(rt, "cpu.pprof"), filepath.Join(rt, "allocs.pprof")
	// Every allocation sampled (the default is one in about 512 KiB), so
	// that what the profile counts does not depend on the draw.
	srv, _ := startServe(t, bin, append(env, "GODEBUG=memprofilerate=1"), "serve", "--cpu-profile", cpu, "--alloc-profile", alloc)
	for range 20 {
		if out, errOut, code := runCLI(t, bin, env, "call", "demo", "echo", `{"text":"hello"}`); code != 0 || out != "hello\n" {
			t.Fatalf("call demo echo: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	if _, err := srv.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, srv.stderr.String())
	}
	// A profile is a gzipped protocol buffer whose string table names
	// its sample types and the functions sampled.
	for path, want := range map[string][]string{
		cpu:   {"samples", "cpu", "nanoseconds"},
		alloc: {"alloc_space"},
	} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		raw, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, w := range want {
			if !bytes.Contains(raw, []byte(w)) {
				t.Errorf("%s does not name %q", filepath.Base(path), w)
			}
		}
		if info, err := os.Stat(path); err != nil {
			t.Error(err)
		} else if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(path), info.Mode())
		}
	}
	// The string table names every allocation site ever sampled, counted
	// or not: what pprof reads from the profile must count bytes in the
	// bridge's code, allocated by its boot and its calls.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=alloc_space", bin, alloc).Output()
	if err != nil {
		t.Fatalf("go tool pprof: %v", err)
	}
	counted := false
	for _, line := range strings.Split(string(top), "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && strings.HasPrefix(f[5], "github.com/capbridge/capbridge/bridge.") && f[3] != "0" {
			counted = true
		}
	}
	if !counted {
		t.Errorf("the allocation profile counts nothing in package bridge:\n%s", top)
	}

	stdout, stderr, code := runCLI(t, bin, env, "serve", "--cpu-profile", filepath.Join(rt, "no-such-dir", "cpu.pprof"))
	if code != exitError || stdout != "" || !strings.Contains(stderr, "--cpu-profile") {
		t.Errorf("an unwritable profile: exit %d, stdout %q, stderr %q; want exit %d, no ready line, the flag named", code, stdout, stderr, exitError)
	}
}

// servedBinary is a running `capbridge serve`. A test that ends with it
// still running (a failed check) stops it the documented way, with
// SIGTERM, and logs what it said. Its stderr may be read while it runs,
// to wait for a line.
type servedBinary struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr syncbuf.Buffer
	exited bool
}

// startServe starts the built binary with args and env added to ours and
// returns it with its ready line, waiting at most 60 s for that line: a
// serve that never gets ready fails the test rather than hanging it.
func startServe(t *testing.T, bin string, env []string, args ...string) (*servedBinary, string) {
	t.Helper()
	s := &servedBinary{cmd: exec.Command(bin, args...)}
	s.cmd.Env = append(os.Environ(), env...)
	pipe, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.exited {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.cmd.Wait()
			t.Logf("serve stderr:\n%s", s.stderr.String())
		}
	})
	s.stdout = bufio.NewReader(pipe)
	lineCh := make(chan string, 1)
	go func() { line, _ := s.stdout.ReadString('\n'); lineCh <- line }()
	select {
	case line := <-lineCh:
		return s, line
	case <-time.After(60 * time.Second):
		t.Fatal("no ready line within 60 s")
		return nil, ""
	}
}

// stop sends SIGTERM and waits for the exit, returning what Wait says
// and anything more it printed on stdout.
func (s *servedBinary) stop() (rest []byte, err error) {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	rest, _ = io.ReadAll(s.stdout)
	err = s.cmd.Wait()
	s.exited = true
	return rest, err
}

// stopWithin is stop, failing the test should serve not have exited
// within backstop; unstick then releases whatever serve waits on, so
// that it exits and no process outlives the test.
func (s *servedBinary) stopWithin(t *testing.T, unstick func()) (rest []byte, err error) {
	t.Helper()
	type stopped struct {
		rest []byte
		err  error
	}
	done := make(chan stopped, 1)
	go func() {
		rest, err := s.stop()
		done <- stopped{rest, err}
	}()
	select {
	case r := <-done:
		return r.rest, r.err
	case <-time.After(backstop):
		unstick()
		<-done
		t.Fatalf("serve had not exited %v after SIGTERM; stderr:\n%s", backstop, s.stderr.String())
		return nil, nil
	}
}

// grantDial issues a grant through the control socket env names
// (`capbridge grant` with grantArgs) and dials callSock with its token,
// which it returns too. The returned context bounds the test's calls
// (60 s); the connection is closed when the test ends, or earlier by the
// caller.
func grantDial(t *testing.T, bin string, env []string, callSock string, grantArgs ...string) (context.Context, *capwire.Client, string) {
	t.Helper()
	token, errOut, code := runCLI(t, bin, env, append([]string{"grant"}, grantArgs...)...)
	if code != 0 {
		t.Fatalf("grant %v: exit %d, %s", grantArgs, code, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c, err := capwire.Dial(ctx, callSock, strings.TrimSpace(token))
	if err != nil {
		t.Fatalf("dialling %s with the granted token: %v", callSock, err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c, strings.TrimSpace(token)
}

// runCLI runs the built binary with env added to ours, bounded in time,
// and returns its output and exit status.
func runCLI(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("capbridge %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// demoGone checks that the demo server serve spawned is gone. serve
// exits 0 only once its shutdown has confirmed every server's exit, and
// mcpwire reaps the child before it confirms, so by the time serve has
// exited the pid names no process: one look is enough, no waiting.
func demoGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("demo server (pid %d) outlived serve: kill(pid, 0) = %v", pid, err)
	}
}

// datagram reads one notification. The deadline is a backstop: serve
// sends it before the event the caller waited for.
func datagram(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("NOTIFY_SOCKET: %v", err)
	}
	return string(buf[:n])
}

// demoConfig writes a capbridge.toml in dir serving the built-in demo
// server of bin, on sockets in dir, with bridgeKeys added to [bridge],
// and returns its path.
func demoConfig(t *testing.T, dir, bin, bridgeKeys string) string {
	t.Helper()
	cfg := filepath.Join(dir, "capbridge.toml")
	toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
		bridgeKeys + "\n[mcp.demo]\ncommand = \"" + bin + "\"\nargs = [\"demo-server\"]\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// shortTempDir is a fresh directory whose paths fit a Unix socket
// address (t.TempDir's can exceed its 108 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cbs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// With audit_path, the audit trail goes to its own file, created 0600,
// one line per call and none on stderr; a file others can read is
// refused with the fix.
func testAuditPath(t *testing.T, bin string) {
	dir := shortTempDir(t)
	audit := filepath.Join(dir, "audit.log")
	cfg := demoConfig(t, dir, bin, "audit_path = \""+audit+"\"\nlog_format = \"json\"\n")
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)
	const calls = 3
	for i := range calls {
		if out, errOut, code := runCLI(t, bin, nil, "call", "-c", cfg, "demo", "echo", fmt.Sprintf(`{"text":"audited %d"}`, i)); code != 0 {
			t.Fatalf("call: exit %d, %q, %q", code, out, errOut)
		}
	}
	if _, err := srv.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, srv.stderr.String())
	}
	fi, err := os.Stat(audit)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit file: %v, %v; want mode 0600", fi, err)
	}
	data, _ := os.ReadFile(audit)
	n := 0
	for line := range strings.Lines(string(data)) {
		var l struct{ Event, Tool, Grant string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if l.Event == "call" && l.Tool == "echo" && l.Grant == "operator" {
			n++
		}
	}
	if n != calls {
		t.Errorf("audit file has %d call lines, want %d:\n%s", n, calls, data)
	}
	if strings.Contains(srv.stderr.String(), `"event":"call"`) {
		t.Errorf("audit lines on stderr too:\n%s", srv.stderr.String())
	}

	if err := os.Chmod(audit, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, bin, nil, "serve", "-c", cfg)
	if code != exitConfig || !strings.Contains(errOut, "chmod 600 "+audit) {
		t.Errorf("serve with a readable audit file: exit %d, stderr %q; want %d and the fix", code, errOut, exitConfig)
	}
}

// logrotate renames the audit file and sends SIGHUP (postrotate kill
// -HUP, or a systemd ExecReload): serve reopens the file under its name
// and carries on, every call audited in one file or the other, none
// lost, and does not read the config again (a server added to it is not
// served); SIGTERM still ends it cleanly, sockets removed.
func testSIGHUP(t *testing.T, bin string) {
	dir := shortTempDir(t)
	audit := filepath.Join(dir, "audit.log")
	cfg := demoConfig(t, dir, bin, "audit_path = \""+audit+"\"\nlog_format = \"json\"\n")
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)
	calls := &demoCalls{t: t, bin: bin, cfg: cfg}
	callLines := func(path string) int {
		data, _ := os.ReadFile(path)
		return strings.Count(string(data), `"event":"call"`)
	}
	for range 3 {
		calls.call()
	}
	rotated := audit + ".1"
	if err := os.Rename(audit, rotated); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(text, "\n[mcp.second]\ncommand = \"/nonexistent\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Calls go on until one is audited in the reopened file: serve
	// reopening is the event waited for, bounded by a backstop.
	limit := time.Now().Add(60 * time.Second)
	for callLines(audit) == 0 {
		if time.Now().After(limit) {
			t.Fatalf("after SIGHUP and %d calls, nothing in a new %s; serve stderr:\n%s", calls.n, audit, srv.stderr.String())
		}
		calls.call()
	}
	calls.call()
	// The reopen came first: it is what the calls waited for.
	if st := statusOf(t, bin, []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}); len(st.Servers) != 1 || st.Reloaded != nil {
		t.Errorf("SIGHUP reloaded the config: %d servers, last reload %+v", len(st.Servers), st.Reloaded)
	}
	rest, err := srv.stop()
	if err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGHUP and SIGTERM: %v, stdout %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
	if old, cur := callLines(rotated), callLines(audit); old < 3 || old+cur != calls.n {
		t.Errorf("%d call lines in the rotated file, %d in the new one; want at least 3 and %d in all", old, cur, calls.n)
	}
	if fi, err := os.Stat(audit); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the reopened file: %v, %v; want mode 0600", fi, err)
	}
	if !strings.Contains(srv.stderr.String(), "SIGHUP: reopened the audit trail") {
		t.Errorf("serve did not say it reopened the trail:\n%s", srv.stderr.String())
	}
	for _, sock := range []string{"call.sock", "control.sock"} {
		if _, err := os.Lstat(filepath.Join(dir, sock)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", sock, err)
		}
	}
}

// After logrotate's rename, a FIFO planted at audit_path is refused by
// the SIGHUP that would reopen it, at once and saying why, whether
// something reads it or not: the trail stays in the file it was in, and
// SIGTERM still ends serve; a serve started with it there exits 3. The
// reopen waited for a reader for ever, and serve's exit waited on the
// reopen.
func testSIGHUPFIFO(t *testing.T, bin string) {
	dir := shortTempDir(t)
	audit := filepath.Join(dir, "audit.log")
	cfg := demoConfig(t, dir, bin, "audit_path = \""+audit+"\"\nlog_format = \"json\"\n")
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)
	// Should serve wait on the FIFO after all, a reader that comes and
	// goes releases it, so that the test ends with no process left.
	unstick := func() {
		if r, err := os.OpenFile(audit, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			r.Close()
		}
	}
	t.Cleanup(unstick)
	calls := &demoCalls{t: t, bin: bin, cfg: cfg}
	calls.call()
	rotated := audit + ".1"
	if err := os.Rename(audit, rotated); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(audit, 0o600); err != nil {
		t.Fatal(err)
	}
	refused := func(n int) {
		t.Helper()
		if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("refused reopen %d", n), func() bool {
			return strings.Count(srv.stderr.String(), "SIGHUP: cannot reopen the audit trail; it stays in the file it was in") == n
		})
		calls.call()
	}
	refused(1) // no one reads the FIFO
	r, err := os.OpenFile(audit, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused(2) // someone does
	r.Close()

	rest, err := srv.stopWithin(t, unstick)
	if err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGHUP and SIGTERM: %v, stdout %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
	log := srv.stderr.String()
	if want := "audit_path " + audit + " is not a regular file"; strings.Count(log, want) != 2 {
		t.Errorf("the refusals do not say %q twice:\n%s", want, log)
	}
	if strings.Contains(log, "SIGHUP: reopened the audit trail") {
		t.Errorf("serve says it reopened the trail:\n%s", log)
	}
	data, _ := os.ReadFile(rotated)
	if n := strings.Count(string(data), `"event":"call"`); n != calls.n {
		t.Errorf("%d call lines in the file the trail was in, want all %d", n, calls.n)
	}
	if fi, err := os.Lstat(audit); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO: %v, %v; want it left as it was", fi, err)
	}
	// At start too, before anything starts; runCLI's bound is the
	// backstop.
	if _, errOut, code := runCLI(t, bin, nil, "serve", "-c", cfg); code != exitConfig || !strings.Contains(errOut, "audit_path "+audit+" is not a regular file") {
		t.Errorf("serve with a FIFO at audit_path: exit %d, stderr %q; want exit %d, the path named", code, errOut, exitConfig)
	}
}

// A config path that names a FIFO (or a device) is refused at once, by
// everything that reads a config: serve, doctor, reload and --watch
// (readTrusted), status -c and init --from (readBounded). They waited
// for a writer for ever, before any timeout had started.
func TestConfigFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "capbridge.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for what, read := range map[string]func(string) ([]byte, error){
		"readTrusted": func(p string) ([]byte, error) { return readTrusted(p, "config file") },
		"readBounded": readBounded,
	} {
		done := make(chan error, 1)
		go func() { _, err := read(fifo); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file but a named pipe (FIFO)") {
				t.Errorf("%s of a FIFO: %v", what, err)
			}
		case <-time.After(time.Minute): // a backstop: it answers at once
			t.Errorf("%s: still waiting on the FIFO", what)
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			<-done
		}
	}
}

// demoCalls calls the demo's echo through the CLI, each call's text its
// number, and counts the calls (n).
type demoCalls struct {
	t        *testing.T
	bin, cfg string
	n        int
}

func (d *demoCalls) call() {
	d.t.Helper()
	d.n++
	if out, errOut, code := runCLI(d.t, d.bin, nil, "call", "-c", d.cfg, "demo", "echo", fmt.Sprintf(`{"text":"call %d"}`, d.n)); code != 0 {
		d.t.Fatalf("call: exit %d, %q, %q", code, out, errOut)
	}
}
