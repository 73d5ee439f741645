package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/jail"
)

// TestDoctor runs doctor with the real binary, built once, against the
// built-in demo, a config with servers that cannot start, an unmatched
// tools.deny entry with and without --strict, unsafe socket paths and a
// config error; and, in this process, checks that doctor leaves no child
// process, goroutine or descriptor behind.
func TestDoctor(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	t.Run("demo", func(t *testing.T) {
		env := []string{"XDG_RUNTIME_DIR=" + shortTempDir(t)}
		out, errOut, code := runCLI(t, bin, env, "doctor")
		if code != exitOK || !strings.Contains(out, "all checks passed") || !strings.Contains(out, "demo ready in ") {
			t.Fatalf("doctor: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		r := doctorJSON(t, bin, env, exitOK)
		if !r.OK || r.Config.Source != "built-in demo" || len(r.Servers) != 1 || len(r.Problems) != 0 {
			t.Fatalf("report: %+v", r)
		}
		// The jail's cgroup v2 limits, or why there are none here (a
		// note: this project's CI host has cgroup v1 controllers).
		if _, st := jail.DetectCgroup(); r.Jail.Cgroup != st || (!st.Available && (r.Jail.Fix == "" || !strings.Contains(out, "jail      note  no cgroup v2 limits: "+st.Reason))) {
			t.Errorf("jail: %+v; this host: %+v\n%s", r.Jail, st, out)
		}
		s := r.Servers[0]
		// Every phase measured, from the events doctor reads: a renamed
		// event fails here.
		if s.Name != "demo" || s.State != "ready" || s.PID <= 0 || s.SpawnMS == nil || s.InitializeMS == nil || s.ToolsListMS == nil ||
			*s.SpawnMS <= 0 || *s.InitializeMS <= 0 || *s.ToolsListMS <= 0 || s.TotalMS < *s.SpawnMS+*s.InitializeMS+*s.ToolsListMS-0.01 ||
			s.Protocol == "" || s.ServerName != "demo" || s.ServerVersion == "" || s.Tools != 6 || s.Listed != 6 || !s.Exited {
			t.Errorf("demo server: %+v", s)
		}
		if r.Shutdown == nil || r.Shutdown.Started != 1 || r.Shutdown.Confirmed != 1 || r.Shutdown.Error != "" {
			t.Errorf("shutdown: %+v", r.Shutdown)
		}
		if len(r.Sockets) != 2 || r.Sockets[0].Error != "" || !r.Sockets[0].CreateDir {
			t.Errorf("sockets: %+v", r.Sockets)
		}
		// doctor never listens: the directory serve would create is not
		// there.
		if _, err := os.Stat(filepath.Dir(r.Sockets[0].Path)); !os.IsNotExist(err) {
			t.Errorf("doctor created the socket directory: %v", err)
		}
		demoGone(t, s.PID)
	})

	t.Run("remote servers", func(t *testing.T) {
		dir := shortTempDir(t)
		face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
		defer face.Close()
		served := httptest.NewServer(face)
		defer served.Close()
		lockedFace := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{Bearer: "t", ResourceMetadata: "http://127.0.0.1/.well-known/oauth-protected-resource"})
		defer lockedFace.Close()
		locked := httptest.NewServer(lockedFace)
		defer locked.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone := ln.Addr().String()
		_ = ln.Close()
		cfg := filepath.Join(dir, "c.toml")
		body := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
			"[mcp.web]\nurl = \"" + served.URL + "/mcp?key=k\"\nrestart = \"never\"\n" +
			"[mcp.locked]\nurl = \"" + locked.URL + "/mcp\"\nrestart = \"never\"\n" +
			"[mcp.gone]\nurl = \"http://" + gone + "/mcp\"\nrestart = \"never\"\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := doctorJSON(t, bin, nil, exitError, "-c", cfg)
		byName := map[string]serverReport{}
		for _, s := range r.Servers {
			byName[s.Name] = s
		}
		if w := byName["web"]; w.State != "ready" || w.Transport != "streamable-http" || w.URL != served.URL+"/mcp" || w.Protocol != "2025-11-25" || w.InitializeMS == nil {
			t.Errorf("the served remote server: %+v", w)
		}
		fixes := map[string]string{}
		for _, p := range r.Problems {
			fixes[p.Where] = p.Problem + " | " + p.Fix
		}
		for name, want := range map[string]string{"locked": "bearer_token_env", "gone": "nothing accepts connections"} {
			got := ""
			for where, f := range fixes {
				if strings.HasPrefix(where, "server "+name+" ") {
					got = f
				}
			}
			if !strings.Contains(got, want) {
				t.Errorf("%s: problem and fix %q, want %q in it (all: %v)", name, got, want, fixes)
			}
		}
	})

	// Each remote server is looked at step by step: the step that fails
	// is named with its fix, and the steps after it are not tried.
	t.Run("remote servers step by step", func(t *testing.T) {
		dir := shortTempDir(t)
		face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
		defer face.Close()
		tlsServer := httptest.NewUnstartedServer(face)
		tlsServer.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusting clients' handshakes fail, as they should
		tlsServer.StartTLS()
		defer tlsServer.Close()
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsServer.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		notFound := httptest.NewServer(http.NotFoundHandler())
		defer notFound.Close()
		cfg := filepath.Join(dir, "c.toml")
		body := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
			"[mcp.tls]\nurl = \"" + tlsServer.URL + "/mcp\"\nca_file = \"" + ca + "\"\nrestart = \"never\"\n" +
			"[mcp.untrusted]\nurl = \"" + tlsServer.URL + "/mcp\"\nrestart = \"never\"\n" +
			"[mcp.nowhere]\nurl = \"http://mcp.capbridge.invalid/mcp\"\nallow_http = true\nrestart = \"never\"\n" +
			"[mcp.wrongpath]\nurl = \"" + notFound.URL + "/nope\"\nrestart = \"never\"\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := doctorJSON(t, bin, []string{"XDG_STATE_HOME=" + dir}, exitError, "-c", cfg)
		steps := func(name string) (string, *probeStep) {
			for _, s := range r.Servers {
				if s.Name == name && s.Probe != nil {
					var names []string
					for _, st := range s.Probe.Steps {
						names = append(names, st.Step)
					}
					return strings.Join(names, " "), failedStep(s.Probe)
				}
			}
			t.Fatalf("no probe for %s: %+v", name, r.Servers)
			return "", nil
		}
		if got, failed := steps("tls"); got != "dns connect tls http auth era" || failed != nil {
			t.Errorf("tls: steps %q, failed %+v", got, failed)
		}
		for name, want := range map[string]struct{ steps, failed, fix string }{
			"untrusted": {"dns connect tls", "tls", "ca_file"},
			"nowhere":   {"dns", "dns", "does not resolve"},
			"wrongpath": {"dns connect http", "http", "not as an MCP endpoint"},
		} {
			got, failed := steps(name)
			if got != want.steps || failed == nil || failed.Step != want.failed || !strings.Contains(failed.Fix, want.fix) {
				t.Errorf("%s: steps %q, failed %+v; want %q failing at %s with %q", name, got, failed, want.steps, want.failed, want.fix)
			}
		}
		out, _, _ := runCLI(t, bin, []string{"XDG_STATE_HOME=" + dir}, "doctor", "-c", cfg)
		if !strings.Contains(out, "tls     FAIL tls: failed to verify certificate: x509: certificate signed by unknown authority") || !strings.Contains(out, "fix: the server's certificate is issued by an authority") {
			t.Errorf("doctor's text:\n%s", out)
		}
	})

	// HTTPS_PROXY and HTTP_PROXY carry a remote server's traffic, the
	// boot's and the probe's; NO_PROXY sends a host around them. The
	// servers are on loopback, which Go never proxies, so they are named
	// by names the proxy alone resolves.
	t.Run("through a proxy", func(t *testing.T) {
		dir := shortTempDir(t)
		face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
		defer face.Close()
		tlsServer := httptest.NewTLSServer(face) // its certificate names example.com
		defer tlsServer.Close()
		plain := httptest.NewServer(face)
		defer plain.Close()
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsServer.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		proxy := startProxy(t, map[string]string{"example.com": "127.0.0.1", "mcp.capbridge.test": "127.0.0.1"})
		tlsPort, plainPort := tlsServer.Listener.Addr().(*net.TCPAddr).Port, plain.Listener.Addr().(*net.TCPAddr).Port
		httpsURL := "https://example.com:" + strconv.Itoa(tlsPort) + "/mcp"
		httpURL := "http://mcp.capbridge.test:" + strconv.Itoa(plainPort) + "/mcp"
		cfg := filepath.Join(dir, "c.toml")
		body := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
			"[mcp.secure]\nurl = \"" + httpsURL + "\"\nca_file = \"" + ca + "\"\nrestart = \"never\"\n" +
			"[mcp.clear]\nurl = \"" + httpURL + "\"\nallow_http = true\nrestart = \"never\"\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"HTTPS_PROXY=" + proxy.URL, "HTTP_PROXY=" + proxy.URL, "NO_PROXY=", "XDG_STATE_HOME=" + dir}
		r := doctorJSON(t, bin, env, exitOK, "-c", cfg)
		for _, s := range r.Servers {
			if s.State != "ready" || s.Probe == nil || s.Probe.Proxy != proxy.URL || failedStep(s.Probe) != nil || s.Tools == 0 {
				t.Errorf("%s through the proxy: %+v %+v", s.Name, s, s.Probe)
			}
		}
		if !proxy.saw("CONNECT example.com:"+strconv.Itoa(tlsPort)) || !proxy.saw("POST "+httpURL) {
			t.Fatalf("the proxy was not asked for both servers: %v", proxy.asked)
		}

		// NO_PROXY: the name is resolved here, where it is no one's.
		proxy.mu.Lock()
		proxy.asked = nil
		proxy.mu.Unlock()
		body = "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
			"[mcp.clear]\nurl = \"" + httpURL + "\"\nallow_http = true\nrestart = \"never\"\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r = doctorJSON(t, bin, []string{"HTTP_PROXY=" + proxy.URL, "NO_PROXY=mcp.capbridge.test", "XDG_STATE_HOME=" + dir}, exitError, "-c", cfg)
		if s := r.Servers[0]; s.State == "ready" || s.Probe == nil || s.Probe.Proxy != "" || failedStep(s.Probe) == nil || failedStep(s.Probe).Step != "dns" {
			t.Errorf("NO_PROXY: %+v %+v", s, s.Probe)
		}
		if proxy.saw("") {
			t.Fatalf("NO_PROXY's host went through the proxy: %v", proxy.asked)
		}
	})

	t.Run("servers that cannot start", func(t *testing.T) {
		dir := shortTempDir(t)
		cfg := writeConfig(t, dir, `
[mcp.demo]
command = "`+bin+`"
args = ["demo-server"]

[mcp.missing]
command = "`+dir+`/no-such-server"

[mcp.crash]
command = "/bin/sh"
args = ["-c", "echo 'fatal: no API key' >&2; exit 3"]
`)
		r := doctorJSON(t, bin, nil, exitError, "-c", cfg)
		byName := map[string]serverReport{}
		for _, s := range r.Servers {
			byName[s.Name] = s
			if s.PID != 0 {
				demoGone(t, s.PID)
			}
		}
		if r.OK || byName["demo"].State != "ready" || byName["missing"].State != "failed" || byName["crash"].State != "failed" {
			t.Fatalf("report: %+v", r)
		}
		if c := byName["crash"]; !strings.Contains(c.StderrTail, "fatal: no API key") || c.ExitStatus != "exit status 3" || c.SpawnMS == nil || c.InitializeMS != nil {
			t.Errorf("crash: %+v", c)
		}
		if r.Shutdown.Started != 2 || r.Shutdown.Confirmed != 2 {
			t.Errorf("shutdown: %+v", r.Shutdown)
		}
		wantFix := map[string]string{
			"server missing (" + cfg + ":5)": "check the command at " + cfg + ":5",
			"server crash (" + cfg + ":8)":   "run `/bin/sh -c",
		}
		for _, p := range r.Problems {
			if fix, ok := wantFix[p.Where]; ok && strings.Contains(p.Fix, fix) {
				delete(wantFix, p.Where)
			}
		}
		if len(wantFix) != 0 || len(r.Problems) != 2 {
			t.Errorf("problems %+v; missing %v", r.Problems, wantFix)
		}
		out, _, code := runCLI(t, bin, nil, "doctor", "-c", cfg)
		if code != exitError || !strings.Contains(out, "stderr: fatal: no API key") || !strings.Contains(out, "2 problem(s)") {
			t.Errorf("readable: exit %d\n%s", code, out)
		}
	})

	t.Run("unmatched tools.deny", func(t *testing.T) {
		dir := shortTempDir(t)
		cfg := writeConfig(t, dir, `
[mcp.demo]
command = "`+bin+`"
args = ["demo-server"]
tools.deny = ["echo", "no_such_tool"]
`)
		r := doctorJSON(t, bin, nil, exitOK, "-c", cfg)
		if d := r.Servers[0]; d.Tools != 5 || d.Listed != 6 || len(d.Unmatched) != 1 || d.Unmatched[0] != `tools.deny "no_such_tool"` || len(r.Warnings) != 1 {
			t.Errorf("without --strict: %+v", r)
		}
		r = doctorJSON(t, bin, nil, exitError, "-c", cfg, "--strict")
		if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Problem, `tools.deny "no_such_tool"`) ||
			!strings.Contains(r.Problems[0].Problem, "serve --strict") || !strings.Contains(r.Problems[0].Fix, "where demo is defined ("+cfg+":1)") {
			t.Errorf("--strict: %+v", r.Problems)
		}
		demoGone(t, r.Servers[0].PID)
	})

	t.Run("sockets", func(t *testing.T) {
		dir := shortTempDir(t)
		open := filepath.Join(dir, "open")
		if err := os.Mkdir(open, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(open, 0o777); err != nil {
			t.Fatal(err)
		}
		live, err := net.Listen("unix", filepath.Join(dir, "live.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		cfg := writeConfig(t, dir, `
[bridge]
call_socket = "`+open+`/call.sock"
control_socket = "`+dir+`/live.sock"

[mcp.demo]
command = "`+bin+`"
args = ["demo-server"]
`)
		r := doctorJSON(t, bin, nil, exitError, "-c", cfg)
		if len(r.Problems) != 2 || !strings.Contains(r.Problems[0].Problem, "chmod go-w") ||
			!strings.Contains(r.Problems[1].Fix, "another capbridge") {
			t.Errorf("problems: %+v", r.Problems)
		}
		demoGone(t, r.Servers[0].PID)
	})

	t.Run("config error", func(t *testing.T) {
		cfg := writeConfig(t, shortTempDir(t), "[bridge]\ncolour = \"blue\"\n")
		r := doctorJSON(t, bin, nil, exitError, "-c", cfg)
		if r.Config.Loaded || len(r.Problems) != 1 || r.Problems[0].Where != cfg+":2: bridge.colour" || r.Problems[0].Fix == "" || len(r.Servers) != 0 {
			t.Errorf("report: %+v", r)
		}
	})

	// In this process, so that leakcheck sees doctor's children as its
	// own: when doctor returns, none is left, nor any goroutine or
	// descriptor it started.
	t.Run("leaves nothing behind", func(t *testing.T) {
		defer leakcheck.Check(t)()
		dir := shortTempDir(t)
		t.Setenv("XDG_RUNTIME_DIR", dir)
		cfg := writeConfig(t, dir, `
[mcp.demo]
command = "`+bin+`"
args = ["demo-server"]

[mcp.crash]
command = "/bin/sh"
args = ["-c", "exit 3"]
`)
		out, errOut, code := runInProcess("doctor", "-c", cfg)
		if code != exitError || !strings.Contains(out, "demo ready") || !strings.Contains(out, "2 of 2 server process(es) confirmed exited") {
			t.Errorf("doctor: exit %d\n%s\n%s", code, out, errOut)
		}
		if kids := leakcheck.Children(); len(kids) != 0 {
			t.Errorf("children alive as doctor returned: %v", kids)
		}
	})
}

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(path, []byte(strings.TrimPrefix(text, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// doctorJSON runs doctor --json and decodes its report, failing the test
// unless it exits with code.
func doctorJSON(t *testing.T, bin string, env []string, code int, args ...string) doctorReport {
	t.Helper()
	out, errOut, got := runCLI(t, bin, env, append([]string{"doctor", "--json"}, args...)...)
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || got != code {
		t.Fatalf("doctor --json %s: exit %d (want %d), %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, err, out, errOut)
	}
	return r
}

// Doctor's CONNECT carries the proxy URL's credentials, as serve's
// transport does: without them a proxy that wants them answers 407, and
// doctor would blame the proxy's rules for what serve does not meet.
func TestConnectThroughAuthenticates(t *testing.T) {
	client, proxy := net.Pipe()
	defer client.Close()
	got := make(chan string, 1)
	go func() {
		defer proxy.Close()
		req, err := http.ReadRequest(bufio.NewReader(proxy))
		if err != nil {
			got <- err.Error()
			return
		}
		got <- req.Method + " " + req.Host + " " + req.Header.Get("Proxy-Authorization")
		_, _ = io.WriteString(proxy, "HTTP/1.1 200 Connection established\r\n\r\n")
	}()
	if err := connectThrough(client, "mcp.example.test:443", url.UserPassword("alice", "pw")); err != nil {
		t.Fatal(err)
	}
	if g, want := <-got, "CONNECT mcp.example.test:443 Basic "+base64.StdEncoding.EncodeToString([]byte("alice:pw")); g != want {
		t.Fatalf("the proxy got %q, want %q", g, want)
	}
}

// A variable an editor entry uses outside env and headers (in args, or in
// a URL's path, as per-user URLs carry keys) is a credential as much as
// one in env: doctor does not print its value, in the server's URL, the
// reason it failed, or the command it suggests running by hand.
func TestDoctorHidesVariableValuesOutsideEnv(t *testing.T) {
	const key = "sk_live_rt_9f8e7d6c5b4a3921"
	t.Setenv("RT_API_KEY", key)
	mcp := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(mcp, []byte(`{"mcpServers": {
  "api": {"command": "/bin/sh", "args": ["-c", "exit 1", "${RT_API_KEY}"]},
  "zap": {"url": "http://127.0.0.1:1/api/mcp/s/${RT_API_KEY}/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	runDoctor([]string{"--mcp-config", mcp, "--json"}, &stdout, &stderr)
	for _, line := range strings.Split(stdout.String()+stderr.String(), "\n") {
		if strings.Contains(line, key) {
			t.Errorf("doctor printed the value: %s", strings.TrimSpace(line))
		}
	}
}
