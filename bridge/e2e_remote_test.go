package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/mcpauth"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// remoteServer configures a server reached over HTTP at mcptest's HTTP
// face for sc, returning the face too.
func remoteServer(t *testing.T, name string, sc mcptest.Scenario, o mcptest.HTTPOptions) (config.Server, *mcptest.HTTPServer) {
	t.Helper()
	face := mcptest.NewHTTP(sc, o)
	ts := httptest.NewServer(face)
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	s := config.NewServer(name, "")
	s.Remote = &config.Remote{URL: ts.URL + "/mcp?key=not-for-status", Transport: config.TransportAuto}
	s.StartupTimeout = 30 * time.Second
	return s, face
}

// A remote server is served beside a stdio one under the same custody:
// the same grant reaches both, status names its transport and URL (never
// its query), the audit line its transport and a failure's HTTP status,
// and its bearer token comes from the environment.
func TestRemoteCustody(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	t.Setenv("CAPBRIDGE_TEST_TOKEN", "s3cret-token")
	remote, face := remoteServer(t, "web", mcptest.Scenario{}, mcptest.HTTPOptions{SSE: true, Bearer: "s3cret-token"})
	remote.Remote.BearerTokenEnv = "CAPBRIDGE_TEST_TOKEN"
	var sink lockedBuffer
	tb := startBridge(t, nil, mcptestServer("local", mcptest.Scenario{}), remote)
	tb.audit = zerolog.New(&sink)
	c := tb.dial(tb.grant(map[string][]string{"local": nil, "web": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	for _, server := range []string{"local", "web"} {
		r, err := c.Call(ctx, server, "echo", map[string]any{"text": "hi " + server})
		if err != nil || r.Text() != "hi "+server {
			t.Fatalf("%s: %+v, %v", server, r, err)
		}
	}
	_, err := c.Call(ctx, "web", "echo", map[string]any{"text": mcptest.HTTPFaultPrefix + "status_500"})
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeServerUnavailable || !strings.Contains(d.Message, "HTTP 500") {
		t.Fatalf("a 500 answer: %v", err)
	}
	st, err := tb.control().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Servers {
		want := map[string]string{"local": "stdio", "web": "streamable-http"}[s.Name]
		if s.Transport != want || s.State != "ready" {
			t.Fatalf("status of %s: %+v", s.Name, s)
		}
		if s.Name == "web" && (s.URL != strings.TrimSuffix(remote.Remote.URL, "?key=not-for-status") || strings.Contains(s.URL, "key=")) {
			t.Fatalf("status url %q", s.URL)
		}
	}
	// One line per call, written once each is answered (in any order).
	eventually(t, "three audit lines", func() bool { return len(sink.lines("call")) == 3 })
	seen := map[string]int{}
	for _, l := range sink.lines("call") {
		key, _ := l["transport"].(string)
		if st, ok := l["http_status"].(float64); ok {
			key += " " + strconv.Itoa(int(st))
		}
		seen[key]++
	}
	if seen["stdio"] != 1 || seen["streamable-http"] != 1 || seen["streamable-http 500"] != 1 {
		t.Fatalf("audit lines by transport and status: %v", seen)
	}
	if strings.Contains(sink.String(), "s3cret-token") {
		t.Fatal("the bearer token reached the audit trail")
	}
	if face.LastHeaders("POST tools/call").Get("Authorization") != "Bearer s3cret-token" {
		t.Fatal("the token from bearer_token_env was not sent")
	}
}

// A server that ends its session is met again at once with a new one:
// the call that found the session gone fails server_unavailable naming
// it, audited with the 404 as any HTTP failure is; the next is served.
func TestRemoteSessionRestart(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	remote, face := remoteServer(t, "web", mcptest.Scenario{}, mcptest.HTTPOptions{})
	remote.RestartBackoff = time.Millisecond
	tb := startBridge(t, nil, remote)
	var sink lockedBuffer
	tb.audit = zerolog.New(&sink)
	c := tb.dial(tb.grant(map[string][]string{"web": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	_, err := c.Call(ctx, "web", "echo", map[string]any{"text": mcptest.HTTPFaultPrefix + "expire"})
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeServerUnavailable || !strings.Contains(d.Message, "session") {
		t.Fatalf("the call that found the session gone: %v", err)
	}
	eventually(t, "its audit line", func() bool { return len(sink.lines("call")) == 1 })
	if l := sink.lines("call")[0]; l["outcome"] != capwire.CodeServerUnavailable || l["transport"] != "streamable-http" || l["http_status"] != float64(404) {
		t.Fatalf("the audit line of the call that found the session gone: %v", l)
	}
	eventually(t, "a new session", func() bool {
		return face.Requests("POST initialize") == 2 && tb.srv("web").snapshot().State == StateReady
	})
	r, err := c.Call(ctx, "web", "echo", map[string]any{"text": "again"})
	if err != nil || r.Text() != "again" {
		t.Fatalf("after the new session: %+v, %v", r, err)
	}
}

// A remote server that cannot be reached fails its boot (status says
// why) and waits to restart, while the other servers serve.
func TestRemoteUnreachableBoot(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	remote := config.NewServer("gone", "")
	remote.Remote = &config.Remote{URL: "http://" + addr + "/mcp", Transport: config.TransportAuto}
	tb := startBridge(t, nil, mcptestServer("local", mcptest.Scenario{}), remote)
	st := tb.srv("gone").status()
	if (st.State != string(StateFailed) && st.State != string(StateBackoff)) || !strings.Contains(st.Reason, "connection refused") {
		t.Fatalf("status of an unreachable server: %+v", st)
	}
	c := tb.dial(tb.grant(map[string][]string{"local": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	if _, err := c.Call(ctx, "local", "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
}

// A remote server behind an authorization server is reached with the
// client credentials grant: its 401 leads to the authorization server,
// whose token (for its resource) the calls carry; the secret comes from
// the environment and reaches no log.
func TestRemoteOAuthClientCredentials(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	t.Setenv("CAPBRIDGE_TEST_CLIENT_SECRET", "cl1ent-s3cret")
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddSecretClient("capbridge", "cl1ent-s3cret", "mcp:read")
	g := as.Guard(mcptest.Scenario{}, mcptest.HTTPOptions{})
	t.Cleanup(g.Close)
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: g.URL, Transport: config.TransportAuto,
		OAuth: &config.OAuth{ClientID: "capbridge", ClientSecretEnv: "CAPBRIDGE_TEST_CLIENT_SECRET"}}
	var logs lockedBuffer
	tb := startBridgeLog(t, zerolog.New(&logs), nil, remote)
	c := tb.dial(tb.grant(map[string][]string{"web": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	r, err := c.Call(ctx, "web", "echo", map[string]any{"text": "with a token"})
	if err != nil || r.Text() != "with a token" {
		t.Fatalf("%+v, %v", r, err)
	}
	if n := len(as.Requests()); n != 1 {
		t.Fatalf("%d token requests, want 1", n)
	}
	tb.shutdown()
	if strings.Contains(logs.String(), "cl1ent-s3cret") {
		t.Fatal("the client secret reached the logs")
	}
}

// A remote server that needs a person's login and has none is
// needs_login, its reason the command to run, while it waits; a login
// saved meanwhile is picked up at its next attempt, whatever the restart
// policy: waiting for a person is no failure of the server's.
func TestRemoteNeedsLogin(t *testing.T) {
	for _, restart := range []config.Restart{config.RestartOnFailure, config.RestartNever} {
		t.Run(string(restart), func(t *testing.T) { testRemoteNeedsLogin(t, restart) })
	}
}

func testRemoteNeedsLogin(t *testing.T, restart config.Restart) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddPublicClient("capbridge-cli", "mcp:read", "offline_access")
	g := as.Guard(mcptest.Scenario{}, mcptest.HTTPOptions{})
	t.Cleanup(g.Close)
	cfg := config.NewServer("web", "")
	cfg.Remote = &config.Remote{URL: g.URL, Transport: config.TransportAuto}
	cfg.RestartBackoff, cfg.RestartMax = 10*time.Millisecond, 20*time.Millisecond
	cfg.Restart = restart
	dir := t.TempDir()
	s := newServer(cfg, zerolog.Nop(), zerolog.Nop(), bootOptions{tokenDir: dir}, nil)
	s.begin()
	defer s.retire()
	<-s.firstDone
	st := s.status()
	if st.State != string(StateNeedsLogin) || !strings.Contains(st.Reason, "capbridge login web") {
		t.Fatalf("status without a login: %+v", st)
	}
	saved, err := mcpauth.Login(context.Background(), mcpauth.LoginOptions{Server: "web", URL: cfg.Remote.URL, ClientID: "capbridge-cli", HTTP: as.Client(),
		Open: func(u string) error {
			resp, err := as.Client().Get(u)
			if err == nil {
				err = resp.Body.Close()
			}
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (mcpauth.Store{Dir: dir}).Save(saved); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server ready with the saved login", func() bool { return s.status().State == string(StateReady) })
}

// A server that echoes the request's credential in an error page does
// not pass it on to the caller: the value is redacted, naming the header
// it was sent in.
func TestRemoteRedactsEchoedToken(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	t.Setenv("CAPBRIDGE_TEST_TOKEN", "s3cret-token-value")
	face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Mcp-Name"), "echo") && r.Header.Get("Mcp-Method") == "tools/call" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("upstream refused " + r.Header.Get("Authorization")))
			return
		}
		face.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: ts.URL + "/mcp", Transport: config.TransportAuto, BearerTokenEnv: "CAPBRIDGE_TEST_TOKEN"}
	tb := startBridge(t, nil, remote)
	c := tb.dial(tb.grant(map[string][]string{"web": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	_, err := c.Call(ctx, "web", "echo", map[string]any{"text": "x"})
	var d *capwire.Denied
	if !errors.As(err, &d) || !strings.Contains(d.Message, "HTTP 502") || strings.Contains(d.Message, "s3cret-token-value") || !strings.Contains(d.Message, "[redacted:Authorization]") {
		t.Fatalf("denial %v", err)
	}
}

// A server that echoes the credential in the error page it answers the
// handshake with: the failed boot's reason, which status, the log and the
// restart's audit line repeat, has it redacted too.
func TestRemoteRestartRedactsEchoedToken(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	t.Setenv("CAPBRIDGE_TEST_TOKEN", "s3cret-token-value")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("upstream refused " + r.Header.Get("Authorization")))
	}))
	t.Cleanup(ts.Close)
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: ts.URL + "/mcp", Transport: config.TransportAuto, BearerTokenEnv: "CAPBRIDGE_TEST_TOKEN"}
	remote.RestartBackoff, remote.RestartMax = 5*time.Millisecond, 10*time.Millisecond
	audit, logs := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	tb := startBridgeOpts(t, Options{Log: zerolog.New(logs), Audit: zerolog.New(audit)}, nil, remote)
	eventually(t, "a restart audited", func() bool { return strings.Contains(audit.String(), `"event":"restart"`) })
	st := tb.srv("web").status()
	tb.shutdown()
	for what, text := range map[string]string{"audit": audit.String(), "log": logs.String(), "status": fmt.Sprint(st)} {
		if strings.Contains(text, "s3cret-token-value") || !strings.Contains(text, "[redacted") {
			t.Errorf("%s:\n%s", what, text)
		}
	}
}

// A bearer_token_file that is a FIFO no one writes (a secret agent not
// running yet) fails the boot attempt at once, naming the key, rather
// than holding it, and behind it the server's retirement, for ever.
func TestRemoteTokenFileNotRegular(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	remote, _ := remoteServer(t, "web", mcptest.Scenario{}, mcptest.HTTPOptions{})
	remote.Remote.BearerTokenFile = fifo
	s := newServer(remote, zerolog.Nop(), zerolog.Nop(), bootOptions{}, nil)
	s.begin()
	defer s.retire()
	select {
	case <-s.firstDone:
	case <-time.After(backstop):
		t.Fatal("the boot is still reading the token file")
	}
	if st := s.status(); st.State == string(StateReady) || !strings.Contains(st.Reason, "bearer_token_file") || !strings.Contains(st.Reason, "not a regular file") {
		t.Fatalf("status: %+v", st)
	}
}

// A remote server that quotes what it was sent in a JSON-RPC error (its
// own words, which reach the program whole but for redaction) does not
// pass on a credential read from a file, a header's, or a key in the
// URL's query: the server's redactor knows them all.
func TestRemoteRedactsQuotedCredentials(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	// Some hosted servers put the key in the URL's path.
	const token, header, key, pathKey = "file-token-0123456789", "header-file-secret-42", "query-key-abcdef012", "k3f9a1c0e7b2d4a6f8e1b7c5d"
	for name, v := range map[string]string{"token": token, "header": header} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ts := quotingServer(t, func(r *http.Request) string {
		return "refused " + r.Header.Get("Authorization") + " with " + r.Header.Get("X-Api-Key") + " for " + r.URL.Path + "?" + r.URL.RawQuery
	})
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: ts.URL + "/mcp/" + pathKey + "/sse?key=" + key, Transport: config.TransportAuto,
		BearerTokenFile: filepath.Join(dir, "token"), HeaderFile: map[string]string{"X-Api-Key": filepath.Join(dir, "header")}}
	tb := startBridge(t, nil, remote)
	c := tb.dial(tb.grant(map[string][]string{"web": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	_, err := c.Call(ctx, "web", "echo", map[string]any{"text": "x"})
	d := denial(t, err)
	if !strings.Contains(d.Message, "refused") {
		t.Fatalf("the denial does not quote the server: %s", d.Message)
	}
	for _, secret := range []string{token, header, key, pathKey} {
		if strings.Contains(d.Message, secret) {
			t.Errorf("the program was shown %q: %s", secret, d.Message)
		}
	}
	c.Close()
	tb.shutdown()
}

// A server that quotes a person's login back (its access token, bare,
// in a JSON-RPC error) does not pass it on: the server's redactor holds
// the credentials of the login in use, as a refresh rotates them.
func TestRemoteRedactsLoginToken(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const access, refresh = "login-access-0123456789abcdef", "login-refresh-fedcba9876543210"
	ts := quotingServer(t, func(r *http.Request) string {
		return "credential " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + " lacks the scope; refresh with " + refresh
	})
	dir := t.TempDir()
	url := ts.URL + "/mcp"
	if err := (mcpauth.Store{Dir: dir}).Save(&mcpauth.Saved{Server: "web", URL: url, Resource: url, ClientID: "capbridge-cli", TokenEndpoint: ts.URL + "/token",
		AccessToken: access, RefreshToken: refresh}); err != nil {
		t.Fatal(err)
	}
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: url, Transport: config.TransportAuto}
	tb := startBridgeOpts(t, Options{Log: zerolog.Nop(), Audit: zerolog.Nop(), TokenDir: dir}, nil, remote)
	c := tb.dial(tb.grant(map[string][]string{"web": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	_, err := c.Call(ctx, "web", "echo", map[string]any{"text": "x"})
	d := denial(t, err)
	if !strings.Contains(d.Message, "lacks the scope") {
		t.Fatalf("the denial does not quote the server: %s", d.Message)
	}
	for _, secret := range []string{access, refresh} {
		if strings.Contains(d.Message, secret) {
			t.Errorf("the program was shown %q: %s", secret, d.Message)
		}
	}
	c.Close()
	tb.shutdown()
}

// quotingServer is mcptest's HTTP server, but for tools/call, which it
// fails with a JSON-RPC error whose message is quote's words for the
// request: a server that quotes what it was sent in its own words.
func quotingServer(t *testing.T, quote func(*http.Request) string) *httptest.Server {
	t.Helper()
	face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") != "tools/call" {
			face.ServeHTTP(w, r)
			return
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32000, "message": quote(r)}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	return ts
}

// A header file rotated while capbridge runs is read again when the
// server's session is next set up, and from then on the server's
// redactor knows the new value too: a server that quotes it back does
// not pass it on. (A key with no shape a redactor knows: a bearer
// token's is redacted by its "Bearer" anyway.)
func TestRemoteRedactsRotatedHeaderFile(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const first, rotated = "first-key-0123456789", "rotated-key-9876543210"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Header.Get("Mcp-Method") != "tools/call" || bytes.Contains(body, []byte(mcptest.HTTPFaultPrefix)) {
			face.ServeHTTP(w, r)
			return
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32000, "message": "refused " + r.Header.Get("X-Api-Key")}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: ts.URL + "/mcp", Transport: config.TransportAuto, HeaderFile: map[string]string{"X-Api-Key": file}}
	remote.RestartBackoff = time.Millisecond
	tb := startBridge(t, nil, remote)
	c := tb.dial(tb.grant(map[string][]string{"web": nil}))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()

	if err := os.WriteFile(file, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The server ends the session; the next one is set up with the
	// rotated token.
	_, err := c.Call(ctx, "web", "echo", map[string]any{"text": mcptest.HTTPFaultPrefix + "expire"})
	if d := denial(t, err); d.Code != capwire.CodeServerUnavailable {
		t.Fatalf("the call that found the session gone: %v", err)
	}
	eventually(t, "a new session", func() bool {
		return face.Requests("POST initialize") == 2 && tb.srv("web").snapshot().State == StateReady
	})
	_, err = c.Call(ctx, "web", "echo", map[string]any{"text": "x"})
	d := denial(t, err)
	if !strings.Contains(d.Message, "refused") || !strings.Contains(d.Message, "[redacted") {
		t.Fatalf("the denial does not quote the server, redacted: %s", d.Message)
	}
	if strings.Contains(d.Message, rotated) || strings.Contains(d.Message, first) {
		t.Fatalf("the program was shown a token: %s", d.Message)
	}
	if got := face.LastHeaders("POST initialize").Get("X-Api-Key"); got != rotated {
		t.Fatalf("the new session was set up with %q, not the rotated token", got)
	}
}
