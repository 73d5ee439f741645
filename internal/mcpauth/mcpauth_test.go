package mcpauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
	"github.com/capbridge/capbridge/mcpwire"
)

func TestMain(m *testing.M) {
	if os.Getenv(refresherEnv) != "" {
		os.Exit(refresher())
	}
	leakcheck.Main(m)
}

// challengeTests are ParseChallenge's cases, and FuzzParseChallenge's seeds.
var challengeTests = []struct {
	in   []string
	want Challenge
	ok   bool
}{
	{[]string{`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="files:read"`}, Challenge{ResourceMetadata: "https://x/.well-known/oauth-protected-resource", Scope: "files:read"}, true},
	{[]string{`Bearer error="insufficient_scope", scope="a b", resource_metadata="https://r"`}, Challenge{ResourceMetadata: "https://r", Scope: "a b", Error: "insufficient_scope"}, true},
	{[]string{`Basic realm="x", Bearer scope=plain`}, Challenge{Scope: "plain"}, true},
	{[]string{`Basic realm="a, Bearer scope=no"`}, Challenge{}, false},
	{[]string{`bearer`}, Challenge{}, true},
	{[]string{`Bearer scope="q\"uote"`}, Challenge{Scope: `q"uote`}, true},
	// A quoted backslash ends with its quote, as authParams reads it.
	{[]string{`Basic realm="a\\", Bearer resource_metadata="https://r.example/x"`}, Challenge{ResourceMetadata: "https://r.example/x"}, true},
	{[]string{`Basic realm=a,b, Bearer scope=s`}, Challenge{Scope: "s"}, true},
	{[]string{"Basic " + strings.Repeat(",", 1<<16) + " Bearer scope=s"}, Challenge{Scope: "s"}, true},
	{nil, Challenge{}, false},
}

func TestParseChallenge(t *testing.T) {
	for _, tc := range challengeTests {
		got, ok := ParseChallenge(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseChallenge(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// BenchmarkParseChallengeCommas: a header of n commas, which a hostile
// server may send up to the response head's limit, costs time linear in
// n.
func BenchmarkParseChallengeCommas(b *testing.B) {
	for _, n := range []int{1 << 16, 1 << 20} {
		h := []string{"Bearer " + strings.Repeat(", ", n/2)}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(h[0])))
			for b.Loop() {
				ParseChallenge(h)
			}
		})
	}
}

func FuzzParseChallenge(f *testing.F) {
	for _, tc := range challengeTests {
		for _, v := range tc.in {
			f.Add(v)
		}
	}
	for _, s := range []string{`Bearer resource_metadata="https://x", scope="a b"`, `Basic realm="x", Bearer error=insufficient_scope`, `Bearer scope="\"`, `,,=,"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ch, ok := ParseChallenge([]string{s})
		if !ok && ch != (Challenge{}) {
			t.Fatalf("no challenge, yet %+v", ch)
		}
		if len(ch.Scope) > len(s) || len(ch.ResourceMetadata) > len(s) {
			t.Fatal("a parameter longer than its header")
		}
	})
}

// Discovery follows the spec's orders: the challenge's resource_metadata
// first, else the path-aware well-known URI, else the root one; the
// authorization server's OAuth metadata with the path inserted, then
// OpenID discovery inserted, then appended.
func TestDiscovery(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	var mu sync.Mutex
	var asked []string
	mux := http.NewServeMux()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	mux.HandleFunc("/.well-known/oauth-protected-resource", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"resource":"` + ts.URL + `","authorization_servers":["` + ts.URL + `/tenant"],"scopes_supported":["s"]}`))
	})
	mux.HandleFunc("/tenant/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"issuer":"` + ts.URL + `/tenant","token_endpoint":"` + ts.URL + `/token"}`))
	})
	mux.HandleFunc("/other", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"resource":"https://elsewhere.example/mcp","authorization_servers":["x"]}`))
	})
	rm, err := DiscoverResource(context.Background(), ts.Client(), ts.URL+"/api/mcp", Challenge{})
	if err != nil || rm.AuthorizationServers[0] != ts.URL+"/tenant" {
		t.Fatalf("resource: %+v, %v", rm, err)
	}
	md, err := DiscoverServer(context.Background(), ts.Client(), rm.AuthorizationServers[0])
	if err != nil || md.TokenEndpoint != ts.URL+"/token" {
		t.Fatalf("server: %+v, %v", md, err)
	}
	want := []string{"/.well-known/oauth-protected-resource/api/mcp", "/.well-known/oauth-protected-resource",
		"/.well-known/oauth-authorization-server/tenant", "/.well-known/openid-configuration/tenant", "/tenant/.well-known/openid-configuration"}
	mu.Lock()
	got := strings.Join(asked, " ")
	mu.Unlock()
	if got != strings.Join(want, " ") {
		t.Fatalf("asked\n %s\nwant\n %s", got, strings.Join(want, " "))
	}
	if _, err := DiscoverResource(context.Background(), ts.Client(), ts.URL+"/mcp", Challenge{ResourceMetadata: ts.URL + "/other"}); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "is for the resource") {
		t.Fatalf("metadata for another resource: %v", err)
	}
	if _, err := DiscoverServer(context.Background(), ts.Client(), ts.URL+"/nowhere"); !errors.Is(err, ErrAuth) {
		t.Fatalf("no metadata: %v", err)
	}
}

// guarded is an MCP server guarded by as, closed when the test ends.
func guarded(t *testing.T, as *oauthtest.Server, o mcptest.HTTPOptions) (*mcptest.HTTPServer, string) {
	t.Helper()
	g := as.Guard(mcptest.Scenario{}, o)
	t.Cleanup(g.Close)
	return g.Face, g.URL
}

func call(t *testing.T, url string, auth mcpwire.Authorizer) {
	t.Helper()
	c, err := mcpwire.Dial(context.Background(), mcpwire.Remote{URL: url, Auth: auth}, mcpwire.Config{})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	res, err := c.CallTool(context.Background(), "echo", mcpwire.JSONArgs([]byte(`{"text":"authorized"}`)), mcpwire.CallOptions{})
	if err != nil || res.Content[0].Text != "authorized" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if _, err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestClientCredentials: a headless client gets a token from the
// server's authorization server, found from the 401, with a secret (basic
// or post, as advertised) or a private_key_jwt assertion (RSA or P-256),
// for the server's resource, with the scopes the resource supports.
func TestClientCredentials(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		methods []string
		creds   ClientCredentials
		basic   bool
	}{
		{"secret basic", nil, ClientCredentials{ClientID: "sidecar", Secret: "s3cret"}, true},
		{"secret post", []string{"client_secret_post"}, ClientCredentials{ClientID: "sidecar", Secret: "s3cret"}, false},
		{"private_key_jwt RS256", nil, ClientCredentials{ClientID: "rsa-client", Key: rsaKey, KeyID: "k1"}, false},
		{"private_key_jwt ES256", nil, ClientCredentials{ClientID: "ec-client", Key: ecKey, KeyID: "k2"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := oauthtest.New(oauthtest.Options{AuthMethods: tc.methods})
			t.Cleanup(as.Close)
			as.AddSecretClient("sidecar", "s3cret", "mcp:read", "mcp:write")
			as.AddKeyClient("rsa-client", rsaKey, "k1", "RS256", "mcp:read")
			as.AddKeyClient("ec-client", ecKey, "k2", "ES256", "mcp:read")
			face, url := guarded(t, as, mcptest.HTTPOptions{})
			a, err := NewAuthorizer(url, tc.creds, as.Client())
			if err != nil {
				t.Fatal(err)
			}
			call(t, url, a)
			reqs := as.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d token requests, want 1 (the token is reused)", len(reqs))
			}
			r := reqs[0]
			if r["resource"][0] != url || r["scope"][0] != "mcp:read" || r["grant_type"][0] != "client_credentials" || (r["basic_auth"] != nil) != tc.basic {
				t.Fatalf("token request %v", r)
			}
			if tc.creds.Key != nil && r["client_assertion_type"][0] != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
				t.Fatalf("no assertion: %v", r)
			}
			if face.Requests("POST unauthorized") != 1 {
				t.Fatalf("%d requests refused, want the first one only", face.Requests("POST unauthorized"))
			}
		})
	}
}

// TestStepUp: a 403 insufficient_scope is answered with a token for the
// scopes it names; a refusal that persists ends after a few step-ups.
func TestStepUp(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddSecretClient("sidecar", "s3cret", "mcp:read", "mcp:write")
	_, url := guarded(t, as, mcptest.HTTPOptions{RequiredScopes: []string{"mcp:write"}})
	a, err := NewAuthorizer(url, ClientCredentials{ClientID: "sidecar", Secret: "s3cret"}, as.Client())
	if err != nil {
		t.Fatal(err)
	}
	call(t, url, a)
	reqs := as.Requests()
	if len(reqs) != 2 || reqs[1]["scope"][0] != "mcp:read mcp:write" {
		t.Fatalf("token requests %v, want a second with the stepped-up scopes", reqs)
	}

	// A scope the client may never have: refused, then given up.
	_, url = guarded(t, as, mcptest.HTTPOptions{RequiredScopes: []string{"admin"}})
	a, err = NewAuthorizer(url, ClientCredentials{ClientID: "sidecar", Secret: "s3cret"}, as.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcpwire.Dial(context.Background(), mcpwire.Remote{URL: url, Auth: a}, mcpwire.Config{})
	if err == nil || !strings.Contains(err.Error(), "client credentials grant") {
		t.Fatalf("an impossible scope: %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatal("the secret is in the error")
	}
}

// A wrong secret fails with what the token endpoint said, and no secret.
func TestBadCredentials(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddSecretClient("sidecar", "s3cret", "mcp:read")
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	a, err := NewAuthorizer(url, ClientCredentials{ClientID: "sidecar", Secret: "wrong-secret"}, as.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcpwire.Dial(context.Background(), mcpwire.Remote{URL: url, Auth: a}, mcpwire.Config{})
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewAuthorizer(url, ClientCredentials{ClientID: "x"}, as.Client()); !errors.Is(err, ErrAuth) {
		t.Fatalf("no secret and no key: %v", err)
	}
}

func TestParsePrivateKey(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	if _, err := ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePrivateKey([]byte("not pem")); !errors.Is(err, ErrAuth) {
		t.Fatalf("not PEM: %v", err)
	}
}
