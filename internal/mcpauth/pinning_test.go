package mcpauth

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// recordingTransport answers every request with h, in memory, and
// records it (method, URL, Authorization).
type recordingTransport struct {
	mu   sync.Mutex
	seen []string
	h    http.Handler
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.seen = append(rt.seen, r.Method+" "+r.URL.Scheme+"://"+r.URL.Host+r.URL.Path+" "+r.Header.Get("Authorization"))
	rt.mu.Unlock()
	w := httptest.NewRecorder()
	rt.h.ServeHTTP(w, r)
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

func (rt *recordingTransport) sent(secret string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, s := range rt.seen {
		if strings.Contains(s, secret) {
			return true
		}
	}
	return false
}

// A remote server decides where capbridge's client secret goes only over
// a channel an attacker on the path cannot rewrite, and only with a
// document bound to the server: resource metadata named over plain http
// on another origin is not fetched (it was, even from the link-local
// metadata address), a document naming no resource is refused (RFC 9728
// §2 makes it required), and a remote server cannot name a plain-http
// authorization server on a loopback port, where any local user may
// listen. The secret reaches none of them.
func TestSecretGoesOnlyWhereTheServerIsBound(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const secret = "s3cr3t-client-secret"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("cb:"+secret))
	// asAt is an authorization server's metadata at its well-known URI;
	// every */token answers a token.
	asAt := func(issuer string) (string, string) {
		u, _ := url.Parse(issuer)
		return u.Host + "/.well-known/oauth-authorization-server", fmt.Sprintf(`{"issuer":%q,"token_endpoint":%q}`, issuer, issuer+"/token")
	}
	for _, tc := range []struct {
		name      string
		challenge string
		resource  [2]string // where the resource metadata is, and what it says
		issuer    string
		want      string
	}{
		{"metadata named over http elsewhere", `Bearer resource_metadata="http://169.254.169.254/latest/meta-data/x"`,
			[2]string{"169.254.169.254/latest/meta-data/x", `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://evil-as.example"]}`},
			"https://evil-as.example", "not https"},
		{"metadata naming no resource", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`,
			[2]string{"mcp.example.com/.well-known/oauth-protected-resource/mcp", `{"authorization_servers":["https://evil-as.example"]}`},
			"https://evil-as.example", "names no resource"},
		{"a remote server naming a loopback http authorization server", `Bearer`,
			[2]string{"mcp.example.com/.well-known/oauth-protected-resource/mcp", `{"resource":"https://mcp.example.com/mcp","authorization_servers":["http://127.0.0.1:9"]}`},
			"http://127.0.0.1:9", "not an https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asPath, asDoc := asAt(tc.issuer)
			docs := map[string]string{tc.resource[0]: tc.resource[1], asPath: asDoc}
			rt := &recordingTransport{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch doc, ok := docs[r.URL.Host+r.URL.Path]; {
				case ok:
					fmt.Fprint(w, doc)
				case strings.HasSuffix(r.URL.Path, "/token"):
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, `{"access_token":"a","token_type":"Bearer","expires_in":3600}`)
				default:
					http.NotFound(w, r)
				}
			})}
			a, err := NewAuthorizer("https://mcp.example.com/mcp", ClientCredentials{ClientID: "cb", Secret: secret}, &http.Client{Transport: rt})
			if err != nil {
				t.Fatal(err)
			}
			resp := refusal("https://mcp.example.com/mcp", http.StatusUnauthorized, "", "")
			resp.Header.Set("Www-Authenticate", tc.challenge)
			_, err = a.Challenge(context.Background(), resp)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Challenge: %v; want a refusal saying %q", err, tc.want)
			}
			if rt.sent(basic) {
				t.Errorf("the client secret was sent: %v", rt.seen)
			}
			if tc.name == "metadata named over http elsewhere" && len(rt.seen) != 0 {
				t.Errorf("fetched %v", rt.seen)
			}
		})
	}
}

// An authorization server's metadata must name the issuer asked for
// (RFC 8414 §3.3), one trailing slash more or less let through.
func TestIssuerMatchesExactly(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, tc := range []struct {
		named string
		ok    bool
	}{
		{"https://as.example", true},
		{"https://as.example/", true},
		{"https://as.example///", false},
		{"https://as.example/other", false},
	} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":"https://as.example/token"}`, tc.named)
		})
		_, err := DiscoverServer(context.Background(), &http.Client{Transport: &recordingTransport{h: h}}, "https://as.example")
		if (err == nil) != tc.ok {
			t.Errorf("issuer %q for https://as.example: %v", tc.named, err)
		}
	}
}

// An issuer the operator pins is the only authorization server the
// client's credentials go to: a server whose metadata names another is
// refused, before anything is sent there, for a sidecar's client
// credentials and for a person's login; the one pinned is used.
func TestIssuerPinned(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const secret = "s3cr3t-client-secret"
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Host + r.URL.Path {
		case "mcp.example.com/.well-known/oauth-protected-resource/mcp":
			fmt.Fprint(w, `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://other-as.example"]}`)
		case "other-as.example/.well-known/oauth-authorization-server":
			fmt.Fprint(w, `{"issuer":"https://other-as.example","token_endpoint":"https://other-as.example/token","authorization_endpoint":"https://other-as.example/authorize","code_challenge_methods_supported":["S256"]}`)
		case "other-as.example/token":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"a","token_type":"Bearer","expires_in":3600}`)
		case "mcp.example.com/mcp":
			w.Header().Set("Www-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	})
	for _, pin := range []string{"https://as.example", "https://other-as.example"} {
		rt := &recordingTransport{h: serve}
		a, err := NewAuthorizer("https://mcp.example.com/mcp", ClientCredentials{ClientID: "cb", Secret: secret, Issuer: pin}, &http.Client{Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Challenge(context.Background(), refusal("https://mcp.example.com/mcp", http.StatusUnauthorized, "", ""))
		pinnedElsewhere := pin != "https://other-as.example"
		if pinnedElsewhere != (err != nil && strings.Contains(err.Error(), "oauth.issuer")) {
			t.Errorf("pinned to %s: Challenge %v", pin, err)
		}
		if sent := rt.sent(base64.StdEncoding.EncodeToString([]byte("cb:" + secret))); sent == pinnedElsewhere {
			t.Errorf("pinned to %s: the secret was sent: %v, want %v (%v)", pin, sent, !pinnedElsewhere, rt.seen)
		}
	}
	rt := &recordingTransport{h: serve}
	// A backstop: a login not refused would wait for the person.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Login(ctx, LoginOptions{Server: "web", URL: "https://mcp.example.com/mcp", ClientID: "cb", Issuer: "https://as.example",
		HTTP: &http.Client{Transport: rt}, Open: func(string) error { t.Error("a login pinned elsewhere opened the browser"); return nil }})
	if err == nil || !strings.Contains(err.Error(), "oauth.issuer") {
		t.Errorf("a login whose server names another authorization server: %v", err)
	}
}

// Origins are compared as RFC 6454 compares them: a server configured
// with its host in capitals, or with its scheme's port spelled out, is
// the resource its metadata names in lower case and without the port,
// and its plain-http metadata on its own origin is its own.
func TestOriginsCompareWithoutCaseOrDefaultPort(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.ToLower(r.URL.Hostname()) + r.URL.Path {
		case "mcp.example.com/.well-known/oauth-protected-resource/mcp":
			fmt.Fprint(w, `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example"]}`)
		case "local.test/meta":
			fmt.Fprint(w, `{"resource":"http://local.test/mcp","authorization_servers":["https://as.example"]}`)
		case "as.example/.well-known/oauth-authorization-server":
			fmt.Fprint(w, `{"issuer":"https://as.example","token_endpoint":"https://as.example/token"}`)
		case "as.example/token":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"a","token_type":"Bearer","expires_in":3600}`)
		default:
			http.NotFound(w, r)
		}
	})
	for _, tc := range []struct{ server, challenge string }{
		{"https://MCP.Example.COM/mcp", "Bearer"},
		{"https://mcp.example.com:443/mcp", "Bearer"},
		{"http://LOCAL.test/mcp", `Bearer resource_metadata="http://local.test:80/meta"`},
	} {
		rt := &recordingTransport{h: serve}
		a, err := NewAuthorizer(tc.server, ClientCredentials{ClientID: "cb", Secret: "s3cr3t-client-secret"}, &http.Client{Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		resp := refusal(tc.server, http.StatusUnauthorized, "", "")
		resp.Header.Set("Www-Authenticate", tc.challenge)
		if _, err := a.Challenge(context.Background(), resp); err != nil {
			t.Errorf("%s: %v (%v)", tc.server, err, rt.seen)
		}
	}
}
