package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/otlprecv"
)

// The secrets of the test's config, one per kind of reference, and what
// each must never appear as anywhere capbridge writes.
var testSecrets = map[string]string{
	"SECRET_FILE": "file-secret-q7Zp41",
	"SECRET_CMD":  "cmd-secret-Vb29xK",
	"SECRET_ENV":  "env-secret-Lm08aT",
}

// secretsConfig writes a capbridge.toml whose server s (the mcptest
// child, never restarted, its stderr shown to callers) gets a secret from
// a file beside the config, one from a command and one from capbridge's
// environment; extra is appended to [bridge].
func secretsConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testSecrets["SECRET_FILE"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n")
	b.WriteString("audit_path = \"" + dir + "/audit.log\"\nlog_format = \"json\"\n" + extra + "\n")
	b.WriteString("[mcp.s]\n" + mcptest.TOML(mcptest.Scenario{}, `SECRET_FILE = "${file:token}"`, `SECRET_CMD = "${cmd:echo `+testSecrets["SECRET_CMD"]+`}"`, `SECRET_ENV = "${env:CB_TEST_SECRET}"`))
	b.WriteString("restart = \"never\"\nstderr_to_caller = true\n")
	path := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecrets fails the test if any of the test's secrets is in what.
func noSecrets(t *testing.T, where, what string) {
	t.Helper()
	for name, v := range testSecrets {
		if strings.Contains(what, v) {
			t.Errorf("%s shows %s's value:\n%s", where, name, what)
		}
	}
}

// A server gets its secrets from a file, a command and capbridge's
// environment; doctor says each resolves without printing it; the server
// prints all three on its stderr and dies; and none of them is in
// anything capbridge wrote: doctor's report, serve's logs and ready line,
// the audit file, status (its stderr tail and reason), the denials a
// program got (stderr tail included), or the CLI's output.
func testSecretsNeverWritten(t *testing.T, bin string) {
	dir := shortTempDir(t)
	cfg := secretsConfig(t, dir, "")
	env := []string{"CB_TEST_SECRET=" + testSecrets["SECRET_ENV"]}

	out, errOut, code := runCLI(t, bin, env, "doctor", "-c", cfg)
	if code != 0 || strings.Count(out, " resolves (") != 3 {
		t.Errorf("doctor: exit %d, stdout:\n%s\nstderr:\n%s\nwant each reference said to resolve", code, out, errOut)
	}
	noSecrets(t, "doctor", out+errOut)
	out, errOut, code = runCLI(t, bin, env, "doctor", "--json", "-c", cfg)
	if code != 0 || !strings.Contains(out, `"reference": "${file:token}"`) || !strings.Contains(out, `"bytes": 18`) {
		// The reference is what the file says; its value is not shown.
		t.Errorf("doctor --json: exit %d:\n%s%s", code, out, errOut)
	}
	noSecrets(t, "doctor --json", out)

	// Traces on, to a receiver that keeps every byte exported.
	recv := otlprecv.Start(t)
	srv, ready := startServe(t, bin, append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL), "serve", "-c", cfg)
	noSecrets(t, "the ready line", ready)
	ctl := []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}
	ctx, c, token := grantDial(t, bin, ctl, dir+"/call.sock", "--servers", "s")
	for name := range testSecrets {
		if _, err := c.Call(ctx, "s", "print_env", map[string]any{"name": name}); err != nil {
			t.Fatal(err)
		}
	}
	var denials []string
	_, err := c.Call(ctx, "s", "crash", nil)
	var d *capwire.Denied
	if !errors.As(err, &d) || !strings.Contains(d.Message, "stderr tail") || !strings.Contains(d.Message, "SECRET_FILE=") {
		t.Fatalf("crash: %v; want a denial with the stderr tail", err)
	}
	denials = append(denials, d.Message)
	_, err = c.Call(ctx, "s", "echo", map[string]any{"text": "x"})
	if !errors.As(err, &d) {
		t.Fatalf("a call to the dead server: %v", err)
	}
	denials = append(denials, d.Message)
	noSecrets(t, "the denials", strings.Join(denials, "\n"))

	st, errOut, code := runCLI(t, bin, ctl, "status", "--json")
	if code != 0 || !strings.Contains(st, "SECRET_CMD=") {
		t.Fatalf("status: exit %d, %s%s; want the stderr tail", code, st, errOut)
	}
	noSecrets(t, "status", st)
	text, _, _ := runCLI(t, bin, ctl, "status")
	noSecrets(t, "status (text)", text)
	rev, errOut, _ := runCLI(t, bin, ctl, "revoke", strings.TrimSpace(strings.Split(token, ".")[1]))
	noSecrets(t, "revoke", rev+errOut)

	rest, err := srv.stop()
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, srv.stderr.String())
	}
	logs := srv.stderr.String()
	if !strings.Contains(logs, "SECRET_ENV=[redacted:") {
		t.Errorf("the server's stderr line is not in the logs, redacted:\n%s", logs)
	}
	noSecrets(t, "serve's stdout", string(rest))
	noSecrets(t, "serve's logs", logs)
	audit, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil || !strings.Contains(string(audit), `"event":"call"`) {
		t.Fatalf("audit file: %v\n%s", err, audit)
	}
	noSecrets(t, "the audit file", string(audit))
	// serve flushed its spans before it exited.
	raw := recv.Raw()
	if len(raw) == 0 || len(recv.Spans()) == 0 {
		t.Fatal("serve exported no spans")
	}
	for _, b := range raw {
		noSecrets(t, "the exported traces", string(b))
	}
}

// A server a reload adds brings secrets serve had not seen at boot; they
// are redacted in the audit file (with audit_values, a call's arguments
// and result are written there) as in the logs.
func testReloadSecretsRedacted(t *testing.T, bin string) {
	dir := shortTempDir(t)
	secret := testSecrets["SECRET_FILE"]
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n" +
		"audit_path = \"" + dir + "/audit.log\"\naudit_values = true\nlog_format = \"json\"\n\n[mcp.a]\n" + mcptest.TOML(mcptest.Scenario{}) + "\n"
	cfg := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(cfg, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)
	if err := os.WriteFile(cfg, []byte(head+"[mcp.b]\n"+mcptest.TOML(mcptest.Scenario{}, `SECRET_FILE = "${file:token}"`)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}
	if out, errOut, code := runCLI(t, bin, ctl, "reload"); code != 0 {
		t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
	}
	// Each status is an event; the limit is a backstop.
	for limit := time.Now().Add(60 * time.Second); ; {
		if st := statusOf(t, bin, ctl); len(st.Servers) == 2 && st.Servers[1].State == "ready" {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("the added server was not ready within 60 s; stderr:\n%s", srv.stderr.String())
		}
	}
	ctx, c, _ := grantDial(t, bin, ctl, dir+"/call.sock", "--servers", "b")
	if r, err := c.Call(ctx, "b", "echo", map[string]any{"text": secret}); err != nil || r.Text() != secret {
		t.Fatalf("echo through the added server: %v, %v", r, err)
	}
	c.Close()
	if _, err := srv.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, srv.stderr.String())
	}
	audit, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil || !strings.Contains(string(audit), `"event":"call"`) || !strings.Contains(string(audit), "[redacted:b env.SECRET_FILE]") {
		t.Fatalf("audit file: %v; want the call with the secret redacted:\n%s", err, audit)
	}
	noSecrets(t, "the audit file", string(audit))
	noSecrets(t, "serve's logs", srv.stderr.String())
}

// A reference that does not resolve stops serve before it starts
// anything, naming the file, the line and the key; doctor reports it.
func testSecretUnresolved(t *testing.T, bin string) {
	dir := shortTempDir(t)
	cfg := secretsConfig(t, dir, "")
	_, errOut, code := runCLI(t, bin, nil, "serve", "-c", cfg) // CB_TEST_SECRET is not set
	if code != exitConfig || !strings.Contains(errOut, cfg+":") || !strings.Contains(errOut, "mcp.s.env.SECRET_ENV: uses ${env:CB_TEST_SECRET} and CB_TEST_SECRET is not set") {
		t.Errorf("serve: exit %d, stderr:\n%s\nwant exit %d naming the reference", code, errOut, exitConfig)
	}
	noSecrets(t, "serve's refusal", errOut)
	out, _, code := runCLI(t, bin, nil, "doctor", "-c", cfg)
	if code != exitError || !strings.Contains(out, "secret    FAIL  s env.SECRET_ENV") || strings.Count(out, " resolves (") != 2 {
		t.Errorf("doctor: exit %d:\n%s", code, out)
	}
	noSecrets(t, "doctor", out)
}

// lock, skew, mcp and doctor boot the servers too, and report a server
// that fails to boot with its stderr: a server that prints its secrets as it dies
// leaves them redacted in those logs as in serve's (an MCP host keeps
// mcp's stderr in its own log files). serve's ready line names a failed
// server's reason, which holds them when the server refused the
// handshake quoting them: redacted there too.
func testBootLogsRedacted(t *testing.T, bin string) {
	dir := shortTempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testSecrets["SECRET_FILE"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\nlog_format = \"json\"\n\n" +
		"[mcp.s]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"echo SECRET_FILE=$SECRET_FILE SECRET_CMD=$SECRET_CMD SECRET_ENV=$SECRET_ENV >&2; exit 3\"]\n" +
		"restart = \"never\"\n[mcp.s.env]\nSECRET_FILE = \"${file:token}\"\nSECRET_CMD = \"${cmd:echo " + testSecrets["SECRET_CMD"] + "}\"\nSECRET_ENV = \"${env:CB_TEST_SECRET}\"\n"
	cfg := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	// skew needs a lock to compare with: one of a server s that boots.
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("[mcp.s]\n"+mcptest.TOML(mcptest.Scenario{})), 0o644); err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(dir, "capbridge.lock")
	if _, errOut, code := runCLI(t, bin, nil, "lock", "-c", good, "--out", lockFile); code != 0 {
		t.Fatalf("lock: exit %d\n%s", code, errOut)
	}
	env := []string{"CB_TEST_SECRET=" + testSecrets["SECRET_ENV"]}
	for _, args := range [][]string{
		{"lock", "-c", cfg, "--out", filepath.Join(dir, "other.lock")},
		{"skew", "-c", cfg, "--lock", lockFile},
		{"mcp", "-c", cfg, "--warm", "0"},
		{"doctor", "-c", cfg},
	} {
		out, errOut, _ := runCLI(t, bin, env, args...)
		if !strings.Contains(out+errOut, "SECRET_FILE=[redacted:") {
			t.Errorf("%s: the server's dying words are not in what it wrote, redacted:\n%s%s", args[0], out, errOut)
		}
		noSecrets(t, args[0], out+errOut)
	}
	// serve's ready line names a failed server's reason: one that refuses
	// the handshake quoting a secret has it redacted there too.
	script := filepath.Join(dir, "refuse.sh")
	if err := os.WriteFile(script, []byte(`while read -r l; do
  id=$(printf '%s' "$l" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"bad keys %s %s %s"}}\n' "$id" "$SECRET_FILE" "$SECRET_CMD" "$SECRET_ENV"
done
`), 0o644); err != nil {
		t.Fatal(err)
	}
	refusing := strings.Replace(toml, `args = ["-c", "echo SECRET_FILE=$SECRET_FILE SECRET_CMD=$SECRET_CMD SECRET_ENV=$SECRET_ENV >&2; exit 3"]`, `args = ["`+script+`"]`, 1)
	if err := os.WriteFile(cfg, []byte(refusing), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, ready := startServe(t, bin, env, "serve", "-c", cfg)
	if !strings.Contains(ready, "bad keys [redacted:") {
		t.Errorf("the ready line does not quote the refusal, redacted: %s", ready)
	}
	noSecrets(t, "serve's ready line", ready)
	if _, err := srv.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, srv.stderr.String())
	}
	noSecrets(t, "serve's logs", srv.stderr.String())
}
