package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
)

// browseEnv makes the test binary a browser that approves at once: it
// fetches its last argument and follows the redirects (to login's
// loopback listener), as login's --browser runs it.
const browseEnv = "CAPBRIDGE_TEST_BROWSE"

func maybeBrowse() {
	if os.Getenv(browseEnv) == "" {
		return
	}
	resp, err := http.Get(os.Args[len(os.Args)-1])
	if err != nil {
		os.Exit(1)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	os.Exit(0)
}

// TestLoginLogout: capbridge login NAME saves a login for a remote
// server behind an authorization server (fosite), registering itself
// and opening the page with --browser; logout forgets it.
func TestLoginLogout(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	g := as.Guard(mcptest.Scenario{}, mcptest.HTTPOptions{})
	t.Cleanup(g.Close)
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv(browseEnv, "1") // inherited by the browser the test binary runs as
	cfg := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(cfg, []byte("[mcp.web]\nurl = \""+g.URL+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runInProcess("login", "-c", cfg, "--browser", exe+" -test.run=^$", "web")
	if code != exitOK || !strings.Contains(stdout, "logged in to web") || !strings.Contains(stderr, "code_challenge_method=S256") {
		t.Fatalf("login: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	file := filepath.Join(state, "capbridge", "oauth", "web.json")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved login: %v", err)
	}
	if as.Registered() != 1 {
		t.Fatalf("%d dynamic registrations, want 1", as.Registered())
	}
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sv struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(saved, &sv); err != nil {
		t.Fatal(err)
	}
	if _, ok := as.Verify(sv.AccessToken); !ok {
		t.Fatal("the saved token is not active")
	}
	// logout revokes the tokens where it can, then forgets them.
	if stdout, _, code := runInProcess("logout", "web"); code != exitOK || !strings.Contains(stdout, "logged out of web") || !strings.Contains(stdout, "revoked the tokens at "+as.URL+"/revoke") {
		t.Fatalf("logout: exit %d %s", code, stdout)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the login is still saved: %v", err)
	}
	if _, ok := as.Verify(sv.AccessToken); ok || as.Revocations() != 2 {
		t.Fatalf("the token is still active after logout (%d revocation requests)", as.Revocations())
	}
	if stdout, _, code := runInProcess("logout", "web"); code != exitOK || strings.Contains(stdout, "revoked") {
		t.Fatalf("logout without a login: exit %d %s", code, stdout)
	}
	// The client metadata document to publish, for oauth.client_metadata_url.
	if stdout, _, code := runInProcess("login", "--client-metadata", "https://example.com/capbridge.json"); code != exitOK || !strings.Contains(stdout, `"client_id": "https://example.com/capbridge.json"`) {
		t.Fatalf("--client-metadata: exit %d %s", code, stdout)
	}
	if _, stderr, code := runInProcess("login", "--client-metadata", "http://example.com/c.json"); code != exitError || !strings.Contains(stderr, "not an https URL") {
		t.Fatalf("--client-metadata over http: exit %d %s", code, stderr)
	}
	if _, stderr, code := runInProcess("login", "-c", cfg, "nope"); code != exitError || !strings.Contains(stderr, `no server is called "nope"`) {
		t.Fatalf("an unknown server: exit %d %s", code, stderr)
	}
}

// --browser none runs no command: the authorization URL, with the
// login's state, is then on no command's arguments for other local
// users to read; the person opens the printed URL.
func TestLoginBrowserNone(t *testing.T) {
	var out strings.Builder
	if err := opener("none", &out)("https://as.example/authorize?state=s"); err != nil || out.Len() != 0 {
		t.Fatalf("--browser none: %v, wrote %q", err, out.String())
	}
	// A command is run: one that does not exist says so.
	if err := opener(filepath.Join(t.TempDir(), "no-such-browser"), &out)("https://as.example/"); err != nil || !strings.Contains(out.String(), "could not run") {
		t.Fatalf("a missing browser: %v, wrote %q", err, out.String())
	}
}

// A browser that stays in the foreground after its redirect (firefox
// started with none running, w3m, lynx) does not hold the login, whose
// code would expire meanwhile: login ends at the redirect.
func TestLoginDoesNotWaitForTheBrowser(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	g := as.Guard(mcptest.Scenario{}, mcptest.HTTPOptions{})
	t.Cleanup(g.Close)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv(browseEnv, "1")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("[mcp.web]\nurl = \""+g.URL+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The browser approves, then stays until the test lets it go.
	quit := filepath.Join(dir, "quit")
	if err := syscall.Mkfifo(quit, 0o600); err != nil {
		t.Fatal(err)
	}
	browser := filepath.Join(dir, "browser")
	script := "#!/bin/sh\n\"" + exe + "\" -test.run='^$' \"$1\" || exit 1\nread line < \"" + quit + "\"\n"
	if err := os.WriteFile(browser, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if err := os.WriteFile(quit, []byte("quit\n"), 0); err != nil { // waits for the browser to read
				t.Error(err)
			}
		}
	}
	defer release()
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		stdout, stderr, code := runInProcess("login", "-c", cfg, "--browser", browser, "web")
		done <- result{stdout, stderr, code}
	}()
	select {
	case r := <-done:
		if r.code != exitOK || !strings.Contains(r.stdout, "logged in to web") {
			t.Fatalf("login: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
	case <-time.After(time.Minute): // a backstop: login ends at the redirect
		release()
		<-done
		t.Fatal("login waited for the browser to exit")
	}
}
