package mcpauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/mcpwire"
)

// echoingAS is an MCP endpoint (/mcp, which refuses every request 401)
// and its authorization server, whose token endpoint refuses a grant
// with an error_description quoting what the request carried (echo
// picks it), and whose revocation endpoint quotes the token, as an authorization server that names the refresh token it
// revoked or the secret it did not know does. The IdP's token exchange
// (the same server) is granted when exchange is set. Every value quoted
// is recorded.
type echoingAS struct {
	*httptest.Server
	echo     func(r *http.Request, raw string, form url.Values) []string
	methods  []string // token_endpoint_auth_methods_supported, if not the default
	exchange bool

	mu     sync.Mutex
	quoted []string
}

func newEchoingAS(t *testing.T, authMethods []string, exchange bool, echo func(r *http.Request, raw string, form url.Values) []string) *echoingAS {
	if authMethods == nil {
		authMethods = []string{"client_secret_basic", "client_secret_post", "private_key_jwt"}
	}
	as := &echoingAS{echo: echo, methods: authMethods, exchange: exchange}
	as.Server = httptest.NewUnstartedServer(http.HandlerFunc(as.serve))
	as.Start()
	t.Cleanup(as.Close)
	return as
}

func (as *echoingAS) serve(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/mcp":
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+as.URL+`/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	case "/prm":
		writeJSON(http.StatusOK, map[string]any{"resource": as.URL + "/mcp", "authorization_servers": []string{as.URL}})
	case "/.well-known/oauth-authorization-server":
		writeJSON(http.StatusOK, map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": as.methods})
	case "/authorize":
		q := r.URL.Query()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=code-5c1e9a7b3d2f&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	case "/token":
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		if as.exchange && form.Get("grant_type") == grantTokenExchange {
			writeJSON(http.StatusOK, map[string]any{"access_token": "jag-0d9c8b7a6f5e4d3c", "token_type": "N_A", "issued_token_type": tokenTypeIDJAG})
			return
		}
		quoted := as.echo(r, string(b), form)
		as.mu.Lock()
		as.quoted = append(as.quoted, quoted...)
		as.mu.Unlock()
		writeJSON(http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "refused " + strings.Join(quoted, ", ")})
	case "/revoke":
		_ = r.ParseForm()
		quoted := []string{r.PostForm.Get("token")}
		as.mu.Lock()
		as.quoted = append(as.quoted, quoted...)
		as.mu.Unlock()
		writeJSON(http.StatusBadRequest, map[string]string{"error": "invalid_grant: refused " + quoted[0]})
	default:
		http.NotFound(w, r)
	}
}

// hidden fails the test when err quotes any value the server quoted, or
// does not say where one was taken out or what the server's error was.
func (as *echoingAS) hidden(t *testing.T, err error) {
	t.Helper()
	as.mu.Lock()
	quoted := as.quoted
	as.mu.Unlock()
	if err == nil || len(quoted) == 0 {
		t.Fatalf("err = %v after the server quoted %q", err, quoted)
	}
	msg := err.Error()
	for _, q := range quoted {
		if len(q) < 4 {
			t.Fatalf("the server quoted %q: the test quotes a parameter the request did not carry", q)
		}
		if strings.Contains(msg, q) {
			t.Errorf("the error holds %q, which the request carried: %s", q, msg)
		}
	}
	if !strings.Contains(msg, "[redacted:") || !strings.Contains(msg, "invalid_grant") {
		t.Errorf("the error does not say what was taken out, or what the server said: %s", msg)
	}
}

// formValue quotes the form's parameter name.
func formValue(name string) func(*http.Request, string, url.Values) []string {
	return func(_ *http.Request, _ string, form url.Values) []string { return []string{form.Get(name)} }
}

// TestTokenErrorsHideCredentials: an authorization server whose refusal
// quotes a credential the request carried (a saved refresh token, as
// sent or form-encoded; a client secret, in the body or the Basic header
// as sent or decoded; a client assertion; the person's ID token and the
// identity assertion grant; a login's code and verifier; the saved
// access token) does not put it into the error, which status, logs and
// a program's denial repeat: each is replaced by a marker naming it, and
// the server's error is kept. So too for the revocation endpoint's
// error (capbridge logout). A description of any length is bounded.
func TestTokenErrorsHideCredentials(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dial := func(t *testing.T, as *echoingAS, auth mcpwire.Authorizer) error {
		_, err := mcpwire.Dial(ctx, mcpwire.Remote{URL: as.URL + "/mcp", Transport: mcpwire.TransportStreamable, Auth: auth}, mcpwire.Config{})
		return err
	}
	refresh := func(t *testing.T, as *echoingAS, sv Saved) error {
		store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
		sv.Server, sv.URL, sv.Issuer, sv.TokenEndpoint, sv.Resource = "web", as.URL+"/mcp", as.URL, as.URL+"/token", as.URL+"/mcp"
		sv.Expiry = time.Now().Add(-time.Hour)
		if err := store.Save(&sv); err != nil {
			t.Fatal(err)
		}
		return dial(t, as, NewStoredAuthorizer(store, "web", as.URL+"/mcp", http.DefaultClient))
	}
	clientCreds := func(creds ClientCredentials) func(*testing.T, *echoingAS) error {
		return func(t *testing.T, as *echoingAS) error {
			a, err := NewAuthorizer(as.URL+"/mcp", creds, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			return dial(t, as, a)
		}
	}
	idToken := "eyJhbGciOiJub25lIn0.eyJzdWIiOiJwZXJzb24ifQ.id-token-sig"
	enterprise := func(t *testing.T, as *echoingAS) error {
		return clientCreds(ClientCredentials{ClientID: "sidecar", Secret: "cs-4e5f6a7b8c",
			IdentityAssertion: &IdentityAssertion{IDPIssuer: as.URL, IDPClientID: "idp-cli", IDPClientSecret: "idp-secret-1a2b3c",
				IDToken: func() (string, error) { return idToken, nil }}})(t, as)
	}
	for _, tc := range []struct {
		name     string
		methods  []string
		exchange bool
		echo     func(*http.Request, string, url.Values) []string
		run      func(*testing.T, *echoingAS) error
	}{
		{"refresh token", nil, false, formValue("refresh_token"), func(t *testing.T, as *echoingAS) error {
			return refresh(t, as, Saved{ClientID: "cli", AccessToken: "at-old-value", RefreshToken: "rt-4b8e1f0c9d7a6e5b3c2d"})
		}},
		{"refresh token form-encoded", nil, false, func(_ *http.Request, raw string, form url.Values) []string {
			_, enc, _ := strings.Cut(raw, "refresh_token=")
			enc, _, _ = strings.Cut(enc, "&")
			return []string{enc, form.Get("refresh_token")}
		}, func(t *testing.T, as *echoingAS) error {
			return refresh(t, as, Saved{ClientID: "cli", AccessToken: "at-old-value", RefreshToken: "rt/4b8e+1f0c=9d7a"})
		}},
		{"saved client secret", nil, false, formValue("client_secret"), func(t *testing.T, as *echoingAS) error {
			return refresh(t, as, Saved{ClientID: "cli", ClientSecret: "saved-secret-77aa", TokenAuth: authPost, AccessToken: "at-old-value", RefreshToken: "rt-0000aaaa"})
		}},
		{"saved access token", nil, false, func(*http.Request, string, url.Values) []string { return []string{"at-9f8e7d6c5b4a"} }, func(t *testing.T, as *echoingAS) error {
			return refresh(t, as, Saved{ClientID: "cli", AccessToken: "at-9f8e7d6c5b4a", RefreshToken: "rt-0000aaaa"})
		}},
		{"client secret basic", nil, false, func(r *http.Request, _ string, _ url.Values) []string {
			_, pass, _ := r.BasicAuth()
			plain, _ := url.QueryUnescape(pass)
			return []string{r.Header.Get("Authorization"), pass, plain}
		}, clientCreds(ClientCredentials{ClientID: "sidecar", Secret: "cs/basic+secret=1"})},
		{"client secret post", []string{"client_secret_post"}, false, formValue("client_secret"),
			clientCreds(ClientCredentials{ClientID: "sidecar", Secret: "cs-post-secret-2"})},
		{"client assertion", nil, false, formValue("client_assertion"),
			clientCreds(ClientCredentials{ClientID: "ec-client", Key: ecKey, KeyID: "k2"})},
		{"ID token at the IdP", nil, false, func(r *http.Request, _ string, form url.Values) []string {
			_, pass, _ := r.BasicAuth()
			return []string{form.Get("subject_token"), pass}
		}, enterprise},
		{"identity assertion grant", nil, true, func(r *http.Request, _ string, form url.Values) []string {
			_, pass, _ := r.BasicAuth()
			return []string{form.Get("assertion"), pass}
		}, enterprise},
		{"code and verifier", nil, false, func(r *http.Request, _ string, form url.Values) []string {
			_, pass, _ := r.BasicAuth()
			return []string{form.Get("code"), form.Get("code_verifier"), pass}
		}, func(t *testing.T, as *echoingAS) error {
			hc := &http.Client{}
			_, err := Login(ctx, LoginOptions{Server: "web", URL: as.URL + "/mcp", ClientID: "cli", ClientSecret: "login-secret-3c4d",
				HTTP: hc, Open: browser(hc)})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newEchoingAS(t, tc.methods, tc.exchange, tc.echo)
			as.hidden(t, tc.run(t, as))
		})
	}

	t.Run("revocation", func(t *testing.T) {
		as := newEchoingAS(t, nil, false, nil)
		_, err := Revoke(ctx, http.DefaultClient, &Saved{RevocationEndpoint: as.URL + "/revoke", ClientID: "cli", RefreshToken: "rt-4b8e1f0c9d7a6e5b3c2d"})
		as.hidden(t, err)
	})

	t.Run("bounded", func(t *testing.T) {
		long := strings.Repeat("d", 64<<10)
		as := newEchoingAS(t, nil, false, func(*http.Request, string, url.Values) []string { return []string{long} })
		err := refresh(t, as, Saved{ClientID: "cli", AccessToken: "at-old-value", RefreshToken: "rt-0000aaaa"})
		if err == nil || len(err.Error()) > 2<<10 || !strings.Contains(err.Error(), "invalid_grant") {
			t.Fatalf("a 64 KiB description: %d bytes of error: %.300v", len(fmt.Sprint(err)), err)
		}
		if !errors.Is(err, ErrNeedsLogin) {
			t.Fatalf("a refused refresh: %v", err)
		}
	})
}
