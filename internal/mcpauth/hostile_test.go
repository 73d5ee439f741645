package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
)

// refusal is the server's answer to a request that sent token (none when
// ""): a 401, or a 403 insufficient_scope naming scope.
func refusal(url string, status int, token, scope string) *http.Response {
	req := httptest.NewRequest(http.MethodPost, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	h := http.Header{"Www-Authenticate": {`Bearer`}}
	if status == http.StatusForbidden {
		h.Set("Www-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q`, scope))
	}
	return &http.Response{StatusCode: status, Header: h, Request: req}
}

// TestAuthorizerRefusals: the client credentials authorizer answers each
// refusal a server may give, in any order, without crashing or asking
// for more tokens than it needs.
func TestAuthorizerRefusals(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddSecretClient("sidecar", "s3cret", "mcp:read", "mcp:write")
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	ctx := context.Background()
	newAuth := func() *Authorizer {
		a, err := NewAuthorizer(url, ClientCredentials{ClientID: "sidecar", Secret: "s3cret"}, as.Client())
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	token := func(a *Authorizer) string {
		h := http.Header{}
		if err := a.Authorize(ctx, h); err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	}

	// A 403 asking for scopes before any token was sent: the authorization
	// server is found from it as from a 401.
	a := newAuth()
	if retry, err := a.Challenge(ctx, refusal(url, http.StatusForbidden, "", "mcp:write")); !retry || err != nil {
		t.Fatalf("a 403 insufficient_scope first: %v, %v", retry, err)
	}
	first := token(a)
	if scopes, ok := as.Verify(first); !ok || !strings.Contains(strings.Join(scopes, " "), "mcp:write") {
		t.Fatalf("the token after it: %v, %v", scopes, ok)
	}

	// Concurrent refusals of one token for want of a scope: one step-up
	// between them, one token request.
	before, stepUps := len(as.Requests()), a.stepUps
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			if retry, err := a.Challenge(ctx, refusal(url, http.StatusForbidden, first, "mcp:read")); !retry || err != nil {
				errs <- fmt.Errorf("%v, %v", retry, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a concurrent step-up: %v", err)
	}
	if n := len(as.Requests()) - before; n != 1 || a.stepUps != stepUps+1 {
		t.Fatalf("%d token requests and %d step-ups for four refusals of one token", n, a.stepUps-stepUps)
	}

	// A token refused as soon as it was fetched is not replaced at once
	// (the authorization server issues tokens the server does not
	// take); once refetchAfter has passed, it is.
	now := time.Now()
	a.now = func() time.Time { return now }
	a.fetched = now
	before = len(as.Requests())
	if retry, err := a.Challenge(ctx, refusal(url, http.StatusUnauthorized, token(a), "")); retry || err == nil || !strings.Contains(err.Error(), "fresh token") {
		t.Fatalf("a fresh token refused: %v, %v", retry, err)
	}
	now = now.Add(refetchAfter)
	if retry, err := a.Challenge(ctx, refusal(url, http.StatusUnauthorized, token(a), "")); !retry || err != nil {
		t.Fatalf("an older token refused: %v, %v", retry, err)
	}
	if n := len(as.Requests()) - before; n != 1 {
		t.Fatalf("%d token requests, want the one after refetchAfter", n)
	}
}

// TestPlainHTTPAuthorizationServer: client secrets, codes and tokens go
// to an authorization server only over https, or plain http to a
// loopback host; metadata naming another is refused before anything is
// sent there.
func TestPlainHTTPAuthorizationServer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	var asked []string
	var mu sync.Mutex
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		iss := "http://" + r.Host
		fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":"http://as.example.net/token","authorization_endpoint":%q}`, iss, iss+"/authorize")
	}))
	defer ts.Close()
	ctx := context.Background()
	if _, err := DiscoverServer(ctx, ts.Client(), ts.URL); err == nil || !strings.Contains(err.Error(), "token_endpoint") || !strings.Contains(err.Error(), "plain http") {
		t.Fatalf("a plain http token endpoint on another host: %v", err)
	}
	for _, issuer := range []string{"http://as.example.net", "http://10.0.0.1:8080/tenant", "ftp://as.example.net"} {
		if _, err := DiscoverServer(ctx, ts.Client(), issuer); err == nil || !strings.Contains(err.Error(), "not an https URL") {
			t.Fatalf("issuer %s: %v", issuer, err)
		}
	}
	mu.Lock()
	if len(asked) != 1 {
		t.Fatalf("asked %v: a plain http issuer on another host was asked", asked)
	}
	mu.Unlock()

	// A server the config allows plain http (on a LAN) may have its own
	// origin as its authorization server, as the 2025-03-26 way allows;
	// another plain http host is refused all the same.
	lan := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			fmt.Fprintf(w, `{"resource":"http://mcp.lan/mcp","authorization_servers":[%q]}`, r.URL.Query().Get("as"))
		case "/.well-known/oauth-protected-resource/other":
			fmt.Fprint(w, `{"resource":"http://mcp.lan/other","authorization_servers":["http://as.lan"]}`)
		case "/.well-known/oauth-authorization-server":
			fmt.Fprint(w, `{"issuer":"http://mcp.lan","token_endpoint":"http://mcp.lan/token"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer lan.Close()
	hc := &http.Client{Transport: toServer(lan)}
	d, err := Discover(ctx, hc, "http://mcp.lan/mcp", Challenge{ResourceMetadata: "http://mcp.lan/.well-known/oauth-protected-resource/mcp?as=http://mcp.lan"})
	if err != nil || d.Server.TokenEndpoint != "http://mcp.lan/token" {
		t.Fatalf("the server's own origin: %+v, %v", d, err)
	}
	if _, err := Discover(ctx, hc, "http://mcp.lan/other", Challenge{}); err == nil || !strings.Contains(err.Error(), "not an https URL") {
		t.Fatalf("another plain http host: %v", err)
	}
}

// toServer is a transport that sends every request to ts, whatever host
// its URL names: hosts a test cannot listen on.
func toServer(ts *httptest.Server) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = "http", strings.TrimPrefix(ts.URL, "http://")
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestStoredLoginBinding: a saved login is sent only to the server it
// was made for, and one removed (capbridge logout) while serve holds its
// tokens is not refreshed back into the store; a refresh names the
// login's resource (RFC 8707).
func TestStoredLoginBinding(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddPublicClient("capbridge-cli", "mcp:read", "offline_access")
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	ctx := context.Background()
	sv, err := Login(ctx, LoginOptions{Server: "web", URL: url, ClientID: "capbridge-cli", HTTP: as.Client(), Open: browser(as.Client())})
	if err != nil {
		t.Fatal(err)
	}
	store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
	if err := store.Save(sv); err != nil {
		t.Fatal(err)
	}

	// The config's url for the name changed since the login.
	other := "http://127.0.0.1:9/other?key=hidden"
	moved := NewStoredAuthorizer(store, "web", other, as.Client())
	h := http.Header{}
	if err := moved.Authorize(ctx, h); err != nil || h.Get("Authorization") != "" {
		t.Fatalf("a login for another URL: %v, sent %q", err, h.Get("Authorization"))
	}
	_, err = moved.Challenge(ctx, refusal(other, http.StatusUnauthorized, "", ""))
	if !errors.Is(err, ErrNeedsLogin) || !strings.Contains(err.Error(), url) || strings.Contains(err.Error(), "hidden") {
		t.Fatalf("refused with a login for another URL: %v", err)
	}

	// The same endpoint with another query (an API key rotated there) is
	// the same server.
	h = http.Header{}
	if err := NewStoredAuthorizer(store, "web", url+"?key=rotated", as.Client()).Authorize(ctx, h); err != nil || h.Get("Authorization") == "" {
		t.Fatalf("the same endpoint, another query: %v, sent %q", err, h.Get("Authorization"))
	}

	// A refresh names the resource.
	a := NewStoredAuthorizer(store, "web", url, as.Client())
	sv.Expiry = time.Now().Add(-time.Minute)
	if err := store.Save(sv); err != nil {
		t.Fatal(err)
	}
	if err := a.Authorize(ctx, h); err != nil {
		t.Fatal(err)
	}
	reqs := as.Requests()
	if r := reqs[len(reqs)-1]; r["grant_type"][0] != "refresh_token" || len(r["resource"]) != 1 || r["resource"][0] != sv.Resource {
		t.Fatalf("the refresh request %v", r)
	}

	// Logged out while serve holds the tokens: refused, and not saved
	// again.
	if err := store.Delete("web"); err != nil {
		t.Fatal(err)
	}
	sent := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	if _, err := a.Challenge(ctx, refusal(url, http.StatusUnauthorized, sent, "")); !errors.Is(err, ErrNeedsLogin) || !strings.Contains(err.Error(), "logout") {
		t.Fatalf("refused after a logout: %v", err)
	}
	if _, err := store.Load("web"); !errors.Is(err, ErrNeedsLogin) {
		t.Fatalf("the login came back after a logout: %v", err)
	}
}

// TestStoreRefusesPlantedFiles: the store reads only a token file no one
// else could have written (a symbolic link is checked where it leads),
// and locks without following one.
func TestStoreRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	store := Store{Dir: filepath.Join(dir, "oauth")}
	if err := os.MkdirAll(store.Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store.Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.Symlink(victim, filepath.Join(store.Dir, "web.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Lock("web"); err == nil {
		t.Fatal("locked through a symbolic link")
	}
	if _, err := os.Lstat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was created: %v", err)
	}
	if fi, err := os.Stat(store.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the store directory after Lock: %v, %v", fi.Mode(), err)
	}

	// A link to a file others may change is refused; to one they may
	// only read (a mounted secret), taken.
	planted := filepath.Join(dir, "planted.json")
	if err := os.WriteFile(planted, []byte(`{"server":"web","access_token":"x","token_endpoint":"https://attacker.example/token"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(planted, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(planted, filepath.Join(store.Dir, "web.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load("web"); err == nil || !strings.Contains(err.Error(), "others may change it") {
		t.Fatalf("a file others may change, through a symbolic link: %v", err)
	}
	if err := os.Chmod(planted, 0o644); err != nil {
		t.Fatal(err)
	}
	if sv, err := store.Load("web"); err != nil || sv.AccessToken != "x" {
		t.Fatalf("a mounted login, through a symbolic link: %v", err)
	}
}

// TestLoginWithoutPKCEMetadata: since 2025-06-18 a login refuses an
// authorization server whose metadata does not list S256.
func TestLoginWithoutPKCEMetadata(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{NoPKCEMethods: true})
	t.Cleanup(as.Close)
	as.AddPublicClient("capbridge-cli", "mcp:read", "offline_access")
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	opened := false
	_, err := Login(context.Background(), LoginOptions{Server: "web", URL: url, ClientID: "capbridge-cli", HTTP: as.Client(), Open: func(string) error { opened = true; return nil }})
	if err == nil || !strings.Contains(err.Error(), "code_challenge_methods_supported") || opened {
		t.Fatalf("no PKCE methods listed: %v (browser opened: %v)", err, opened)
	}
}
