package mcpauth

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
	asMetadata := func(w http.ResponseWriter, issuer string) {
		fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":%q}`, issuer, issuer+"/token")
	}
	token := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"a","token_type":"Bearer","expires_in":3600}`)
	}
	for _, tc := range []struct {
		name      string
		challenge string
		serve     func(w http.ResponseWriter, r *http.Request)
		want      string
	}{
		{"metadata named over http elsewhere", `Bearer resource_metadata="http://169.254.169.254/latest/meta-data/x"`,
			func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Host + r.URL.Path {
				case "169.254.169.254/latest/meta-data/x":
					fmt.Fprint(w, `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://evil-as.example"]}`)
				case "evil-as.example/.well-known/oauth-authorization-server":
					asMetadata(w, "https://evil-as.example")
				case "evil-as.example/token":
					token(w)
				default:
					http.NotFound(w, r)
				}
			}, "not https"},
		{"metadata naming no resource", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`,
			func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Host + r.URL.Path {
				case "mcp.example.com/.well-known/oauth-protected-resource/mcp":
					fmt.Fprint(w, `{"authorization_servers":["https://evil-as.example"]}`)
				case "evil-as.example/.well-known/oauth-authorization-server":
					asMetadata(w, "https://evil-as.example")
				case "evil-as.example/token":
					token(w)
				default:
					http.NotFound(w, r)
				}
			}, "names no resource"},
		{"a remote server naming a loopback http authorization server", `Bearer`,
			func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Host + r.URL.Path {
				case "mcp.example.com/.well-known/oauth-protected-resource/mcp":
					fmt.Fprint(w, `{"resource":"https://mcp.example.com/mcp","authorization_servers":["http://127.0.0.1:9"]}`)
				case "127.0.0.1:9/.well-known/oauth-authorization-server":
					asMetadata(w, "http://127.0.0.1:9")
				case "127.0.0.1:9/token":
					token(w)
				default:
					http.NotFound(w, r)
				}
			}, "not an https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &recordingTransport{h: http.HandlerFunc(tc.serve)}
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
