package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
	"github.com/capbridge/capbridge/mcpwire"
)

// A server of the 2025-03-26 authorization spec publishes no protected
// resource metadata: its authorization server is at its origin, by
// metadata (whose issuer must be of that origin) or by the default
// endpoints. Metadata the challenge names but that is missing is an
// error, not that fallback.
func TestDiscover2025(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	var meta string // the root metadata document; "" answers 404
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-authorization-server" && meta != "" {
			_, _ = w.Write([]byte(meta))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(ts.Close)
	ctx := context.Background()

	meta = `{"issuer":"` + ts.URL + `/oauth","authorization_endpoint":"` + ts.URL + `/oauth/authorize","token_endpoint":"` + ts.URL + `/oauth/token"}`
	d, err := Discover(ctx, ts.Client(), ts.URL+"/mcp", Challenge{})
	if err != nil || !d.Legacy2025 || d.Server.TokenEndpoint != ts.URL+"/oauth/token" || d.Resource != ts.URL+"/mcp" {
		t.Fatalf("metadata at the origin: %+v, %v", d, err)
	}

	meta = ""
	d, err = Discover(ctx, ts.Client(), ts.URL+"/mcp", Challenge{})
	if err != nil || !d.Legacy2025 || d.Server.AuthorizationEndpoint != ts.URL+"/authorize" || d.Server.TokenEndpoint != ts.URL+"/token" || d.Server.RegistrationEndpoint != ts.URL+"/register" {
		t.Fatalf("the default endpoints: %+v, %v", d, err)
	}

	meta = `{"issuer":"https://elsewhere.example","token_endpoint":"https://elsewhere.example/token"}`
	if _, err := Discover(ctx, ts.Client(), ts.URL+"/mcp", Challenge{}); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "not of the server's origin") {
		t.Fatalf("metadata of another origin: %v", err)
	}

	if _, err := Discover(ctx, ts.Client(), ts.URL+"/mcp", Challenge{ResourceMetadata: ts.URL + "/prm"}); !errors.Is(err, ErrAuth) || errors.Is(err, ErrNoResourceMetadata) {
		t.Fatalf("metadata the challenge names, missing: %v", err)
	}
}

// A login's client identity comes in the spec's order, and authenticates
// at the token endpoint as it was registered: a pre-registered client
// with its secret (basic, or post where only that is advertised), the
// client ID metadata document where the server takes them, a client
// that registered itself as public or, where the server wants a secret,
// confidential. A step-up login uses the client it registered before.
func TestLoginClient(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	docs := httptest.NewTLSServer(nil)
	t.Cleanup(docs.Close)
	docURL := docs.URL + "/capbridge/client.json"
	doc, err := ClientMetadataDocument(docURL)
	if err != nil {
		t.Fatal(err)
	}
	docs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/capbridge/client.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
	for _, tc := range []struct {
		name       string
		o          oauthtest.Options
		login      LoginOptions
		client     string // the client_id the token request names; "dyn" for a registered one
		basic      bool   // the secret in the Authorization header
		post       bool   // the secret in the body
		registered int
	}{
		{name: "pre-registered, basic", o: oauthtest.Options{AuthMethods: []string{"client_secret_basic"}},
			login: LoginOptions{ClientID: "pre", ClientSecret: "pre-secret"}, client: "pre", basic: true},
		{name: "pre-registered, post", o: oauthtest.Options{AuthMethods: []string{"client_secret_post"}},
			login: LoginOptions{ClientID: "pre", ClientSecret: "pre-secret"}, client: "pre", post: true},
		{name: "pre-registered public", login: LoginOptions{ClientID: "public"}, client: "public"},
		{name: "client metadata document", o: oauthtest.Options{Documents: docs.Client()},
			login: LoginOptions{ClientMetadataURL: docURL}, client: docURL},
		{name: "document configured, not taken: registration", o: oauthtest.Options{AuthMethods: []string{"none", "client_secret_basic"}},
			login: LoginOptions{ClientMetadataURL: docURL}, client: "dyn", registered: 1},
		{name: "registered confidential, post", o: oauthtest.Options{AuthMethods: []string{"client_secret_post"}},
			client: "dyn", post: true, registered: 1},
		{name: "registered confidential, basic", o: oauthtest.Options{AuthMethods: []string{"client_secret_basic"}},
			client: "dyn", basic: true, registered: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := oauthtest.New(tc.o)
			t.Cleanup(as.Close)
			as.AddConfidentialClient("pre", "pre-secret", "mcp:read", "offline_access")
			as.AddPublicClient("public", "mcp:read", "offline_access")
			_, srv := guarded(t, as, mcptest.HTTPOptions{})
			o := tc.login
			o.Server, o.URL, o.HTTP, o.Open = "web", srv, as.Client(), browser(as.Client())
			sv, err := Login(context.Background(), o)
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			reqs := as.Requests()
			r := reqs[len(reqs)-1]
			id := r["client_id"]
			if tc.basic {
				id = []string{sv.ClientID} // in the header, checked by fosite
			}
			switch {
			case tc.client == "dyn" && (len(id) != 1 || !strings.HasPrefix(id[0], "dyn-")):
				t.Fatalf("token request by %v, want a registered client", id)
			case tc.client != "dyn" && (len(id) != 1 || id[0] != tc.client):
				t.Fatalf("token request by %v, want %s", id, tc.client)
			case (r["basic_auth"] != nil) != tc.basic || (r["client_secret"] != nil) != tc.post:
				t.Fatalf("token request %v: basic %v, post %v wanted", r, tc.basic, tc.post)
			case as.Registered() != tc.registered:
				t.Fatalf("%d registrations, want %d", as.Registered(), tc.registered)
			}
			// serve refreshes with the same client authentication.
			sv.Expiry = time.Now().Add(-time.Minute)
			store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
			if err := store.Save(sv); err != nil {
				t.Fatal(err)
			}
			call(t, srv, NewStoredAuthorizer(store, "web", srv, as.Client()))
			reqs = as.Requests()
			if g := reqs[len(reqs)-1]; g["grant_type"][0] != "refresh_token" || (g["basic_auth"] != nil) != tc.basic || (g["client_secret"] != nil) != tc.post {
				t.Fatalf("refresh %v", g)
			}
		})
	}
}

// TestLoginStepUp: a server that refuses a login's token for want of a
// scope (403 insufficient_scope) has the scope saved for the next login,
// which asks for it with the scopes it had, using the client it
// registered; serve then picks the new token up without a restart. A
// refusal a new login cannot answer (the token has the scopes), or one
// after maxStepUps step-ups, is final.
func TestLoginStepUp(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{AuthMethods: []string{"none"}})
	t.Cleanup(as.Close)
	face, srv := guarded(t, as, mcptest.HTTPOptions{RequiredScopes: []string{"mcp:read", "mcp:write"}, ChallengeScope: "mcp:read"})
	store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
	var asked []string
	o := LoginOptions{Server: "web", URL: srv, HTTP: as.Client(), Open: browser(as.Client()), Printed: func(u string) {
		pu, _ := url.Parse(u)
		asked = append(asked, pu.Query().Get("scope"))
	}}
	sv, err := Login(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(sv); err != nil {
		t.Fatal(err)
	}
	auth := NewStoredAuthorizer(store, "web", srv, as.Client())
	_, err = mcpwire.Dial(context.Background(), mcpwire.Remote{URL: srv, Auth: auth}, mcpwire.Config{})
	if !errors.Is(err, ErrStepUp) || !errors.Is(err, ErrNeedsLogin) || !errors.Is(err, mcpwire.ErrAuthorization) || !strings.Contains(err.Error(), `"mcp:write" missing`) {
		t.Fatalf("a token without mcp:write: %v", err)
	}
	if got := auth.StepUp(); !slices.Equal(got, []string{"mcp:read", "mcp:write"}) {
		t.Fatalf("StepUp() = %v", got)
	}

	prev, err := store.Load("web")
	if err != nil || !slices.Equal(prev.StepUp, []string{"mcp:read", "mcp:write"}) {
		t.Fatalf("saved %+v, %v", prev, err)
	}
	o.Previous = prev
	next, err := Login(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[0] != "mcp:read offline_access" || asked[1] != "mcp:read mcp:write offline_access" {
		t.Fatalf("scopes asked %q", asked)
	}
	if next.ClientID != prev.ClientID || as.Registered() != 1 || next.StepUps != 1 || next.StepUp != nil {
		t.Fatalf("the step-up login %+v (registered %d)", next, as.Registered())
	}
	if err := store.Save(next); err != nil {
		t.Fatal(err)
	}
	call(t, srv, auth) // the same authorizer: it finds the new login when refused
	if face.Requests("POST forbidden") < 2 {
		t.Fatalf("%d refusals", face.Requests("POST forbidden"))
	}

	// The token carries the scopes (so the saved login says), yet the
	// server wants them: a new login would not help.
	next.Granted, next.AccessToken = []string{"mcp:read", "mcp:write"}, sv.AccessToken
	if err := store.Save(next); err != nil {
		t.Fatal(err)
	}
	_, err = mcpwire.Dial(context.Background(), mcpwire.Remote{URL: srv, Auth: NewStoredAuthorizer(store, "web", srv, as.Client())}, mcpwire.Config{})
	if errors.Is(err, ErrNeedsLogin) || !strings.Contains(err.Error(), "would not help") {
		t.Fatalf("scopes held already: %v", err)
	}
	next.Granted, next.StepUps = []string{"mcp:read"}, maxStepUps
	if err := store.Save(next); err != nil {
		t.Fatal(err)
	}
	_, err = mcpwire.Dial(context.Background(), mcpwire.Remote{URL: srv, Auth: NewStoredAuthorizer(store, "web", srv, as.Client())}, mcpwire.Config{})
	if errors.Is(err, ErrNeedsLogin) || !strings.Contains(err.Error(), "after 3 logins") {
		t.Fatalf("after maxStepUps: %v", err)
	}
}

// TestRevoke: logout's revocation (RFC 7009) revokes both tokens at the
// endpoint the login's authorization server named; a server without
// one is reported, and nothing is sent.
func TestRevoke(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{AuthMethods: []string{"client_secret_basic"}})
	t.Cleanup(as.Close)
	_, srv := guarded(t, as, mcptest.HTTPOptions{})
	sv, err := Login(context.Background(), LoginOptions{Server: "web", URL: srv, HTTP: as.Client(), Open: browser(as.Client())})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := as.Verify(sv.AccessToken); !ok || sv.RevocationEndpoint != as.URL+"/revoke" || sv.RefreshToken == "" {
		t.Fatalf("login %+v", sv)
	}
	revoked, err := Revoke(context.Background(), as.Client(), sv)
	if err != nil || !revoked || as.Revocations() != 2 {
		t.Fatalf("Revoke = %v, %v; %d requests", revoked, err, as.Revocations())
	}
	if _, ok := as.Verify(sv.AccessToken); ok {
		t.Fatal("the access token is still active")
	}
	sv.RevocationEndpoint = ""
	if revoked, err := Revoke(context.Background(), as.Client(), sv); revoked || err != nil || as.Revocations() != 2 {
		t.Fatalf("no endpoint: %v, %v", revoked, err)
	}
}

// The client metadata document names its URL as client_id and a loopback
// redirect on any port; a URL that cannot be a client_id is refused.
func TestClientMetadataDocument(t *testing.T) {
	b, err := ClientMetadataDocument("https://example.com/capbridge.json")
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	if err := json.Unmarshal(b, &md); err != nil || md["client_id"] != "https://example.com/capbridge.json" || md["token_endpoint_auth_method"] != "none" ||
		md["redirect_uris"].([]any)[0] != "http://127.0.0.1/callback" {
		t.Fatalf("document %s, %v", b, err)
	}
	for _, bad := range []string{"http://example.com/c.json", "https://example.com", "https://example.com/", "https://example.com/c.json#x", "https://u:p@example.com/c.json", "https://example.com/a/../c.json", "::"} {
		if _, err := ClientMetadataDocument(bad); !errors.Is(err, ErrAuth) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
