package mcpauth

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
	"github.com/capbridge/capbridge/mcpwire"
)

// browser is a person who approves at once: it fetches the
// authorization URL and follows the redirects to the loopback listener.
func browser(hc *http.Client) func(string) error {
	return func(u string) error {
		resp, err := hc.Get(u)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
}

// TestLogin: the authorization code flow with PKCE, from the server's
// 401 to saved tokens, with a pre-registered client and with dynamic
// registration; then serve's authorizer uses and refreshes the saved
// tokens, saving the rotated ones.
func TestLogin(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for _, preRegistered := range []bool{true, false} {
		as := oauthtest.New(oauthtest.Options{})
		t.Cleanup(as.Close)
		as.AddPublicClient("capbridge-cli", "mcp:read", "offline_access")
		_, url := guarded(t, as, mcptest.HTTPOptions{})
		store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
		o := LoginOptions{Server: "web", URL: url, HTTP: as.Client(), Open: browser(as.Client()), Printed: func(u string) {
			if !strings.Contains(u, "code_challenge_method=S256") || !strings.Contains(u, "resource=") {
				t.Errorf("authorization URL %s", u)
			}
		}}
		if preRegistered {
			o.ClientID = "capbridge-cli"
		}
		sv, err := Login(context.Background(), o)
		if err != nil {
			t.Fatalf("Login (pre-registered %v): %v", preRegistered, err)
		}
		if sv.RefreshToken == "" || sv.Resource != url || (as.Registered() == 1) == preRegistered {
			t.Fatalf("saved %+v, registered %d", sv, as.Registered())
		}
		if err := store.Save(sv); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(store.Dir, "web.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("token file: %v, %v", fi.Mode(), err)
		}
		if di, err := os.Stat(store.Dir); err != nil || di.Mode().Perm() != 0o700 {
			t.Fatalf("store dir: %v, %v", di.Mode(), err)
		}

		// Saved long enough ago for its access token to have expired:
		// serve's authorizer refreshes it before use.
		old := *sv
		old.Expiry = time.Now().Add(-time.Minute)
		if err := store.Save(&old); err != nil {
			t.Fatal(err)
		}
		call(t, url, NewStoredAuthorizer(store, "web", url, as.Client()))
		after, err := store.Load("web")
		if err != nil || after.AccessToken == sv.AccessToken || after.RefreshToken == sv.RefreshToken {
			t.Fatalf("the refreshed tokens were not saved: %+v, %v", after, err)
		}
		refreshed := false
		for _, r := range as.Requests() {
			refreshed = refreshed || r["grant_type"][0] == "refresh_token"
		}
		if !refreshed {
			t.Fatal("no refresh_token grant")
		}
	}
}

// Without a saved login the authorizer says to log in; a refresh the
// server refuses says so too.
func TestNeedsLogin(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	store := Store{Dir: t.TempDir()}
	_, err := mcpwire.Dial(context.Background(), mcpwire.Remote{URL: url, Auth: NewStoredAuthorizer(store, "web", url, as.Client())}, mcpwire.Config{})
	if !errors.Is(err, ErrNeedsLogin) {
		t.Fatalf("no saved login: %v", err)
	}
	if err := store.Save(&Saved{Server: "web", URL: url, TokenEndpoint: as.URL + "/token", ClientID: "nobody", AccessToken: "stale", RefreshToken: "bogus", Expiry: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, err = mcpwire.Dial(context.Background(), mcpwire.Remote{URL: url, Auth: NewStoredAuthorizer(store, "web", url, as.Client())}, mcpwire.Config{})
	if !errors.Is(err, ErrNeedsLogin) || strings.Contains(err.Error(), "bogus") {
		t.Fatalf("a refused refresh: %v", err)
	}
	if err := store.Delete("web"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load("web"); !errors.Is(err, ErrNeedsLogin) {
		t.Fatalf("after Delete: %v", err)
	}
}

// A redirect that is not this login's (wrong state: a stale tab, a
// forged redirect, another local process) is refused by the listener,
// and the login waits on for its own; one that names another issuer (a
// mix-up, RFC 9207) fails the login.
func TestLoginState(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddPublicClient("capbridge-cli", "mcp:read", "offline_access")
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	param := func(u, name string) string {
		q, _ := neturl.Parse(u)
		return q.Query().Get(name)
	}
	redirect := func(u, query string) (int, error) {
		resp, err := http.Get(param(u, "redirect_uri") + query)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	refused := 0
	forgeFirst := func(u string) error {
		code, err := redirect(u, "?code=x&state=forged")
		if err != nil {
			return err
		}
		if code == http.StatusBadRequest {
			refused++
		}
		return browser(as.Client())(u)
	}
	sv, err := Login(context.Background(), LoginOptions{Server: "web", URL: url, ClientID: "capbridge-cli", HTTP: as.Client(), Open: forgeFirst})
	if err != nil || refused != 1 || sv.AccessToken == "" {
		t.Fatalf("a forged redirect before the real one: %v (refused %d)", err, refused)
	}
	mixUp := func(u string) error {
		_, err := redirect(u, "?code=x&state="+neturl.QueryEscape(param(u, "state"))+"&iss=https%3A%2F%2Fevil.example")
		return err
	}
	_, err = Login(context.Background(), LoginOptions{Server: "web", URL: url, ClientID: "capbridge-cli", HTTP: as.Client(), Open: mixUp})
	if err == nil || !strings.Contains(err.Error(), "iss") {
		t.Fatalf("another issuer: %v", err)
	}
}

// Any local process can reach the loopback listener while a login waits
// (up to maxLoginWait): it answers each connection's one request and
// closes it, refuses a header larger than a redirect's, and the refused
// redirect that ends a login still gets its page.
func TestCallbackListenerBounded(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{})
	t.Cleanup(as.Close)
	as.AddPublicClient("capbridge-cli", "mcp:read", "offline_access")
	_, url := guarded(t, as, mcptest.HTTPOptions{})
	listener := func(u string) string {
		q, _ := neturl.Parse(u)
		r, _ := neturl.Parse(q.Query().Get("redirect_uri"))
		return r.Host
	}
	// exchange sends req on a new connection and returns the status line
	// of the answer, and whether the connection was closed after it.
	exchange := func(addr, req string) (status string, closed bool, err error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return "", false, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute)) // a backstop
		if _, err := io.WriteString(c, req); err != nil {
			return "", false, err
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_, err = br.ReadByte()
		return resp.Status, err == io.EOF, nil
	}
	var problems []string
	probe := func(u string) error {
		addr := listener(u)
		status, closed, err := exchange(addr, "GET /callback?state=nope HTTP/1.1\r\nHost: x\r\n\r\n")
		if err != nil || !strings.HasPrefix(status, "400") || !closed {
			problems = append(problems, fmt.Sprintf("a refused redirect: %q, closed %v, %v; want 400 and the connection closed", status, closed, err))
		}
		big := "GET /callback?state=nope HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
		status, _, err = exchange(addr, big)
		if err != nil || !strings.HasPrefix(status, "431") {
			problems = append(problems, fmt.Sprintf("a 64 KiB header: %q, %v; want 431", status, err))
		}
		return browser(as.Client())(u)
	}
	if _, err := Login(context.Background(), LoginOptions{Server: "web", URL: url, ClientID: "capbridge-cli", HTTP: as.Client(), Open: probe}); err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}

	// A refused authorization ends Login as its page is written: the
	// page must still reach the browser.
	lost := 0
	for range 200 {
		page := make(chan error, 1)
		refuse := func(u string) error {
			q, _ := neturl.Parse(u)
			go func() {
				resp, err := as.Client().Get(q.Query().Get("redirect_uri") + "?error=access_denied&state=" + neturl.QueryEscape(q.Query().Get("state")))
				if err == nil {
					var b []byte
					b, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && !strings.Contains(string(b), "You may close this page") {
						err = fmt.Errorf("the page reads %q", b)
					}
				}
				page <- err
			}()
			return nil
		}
		if _, err := Login(context.Background(), LoginOptions{Server: "web", URL: url, ClientID: "capbridge-cli", HTTP: as.Client(), Open: refuse}); err == nil {
			t.Fatal("a refused authorization logged in")
		}
		if err := <-page; err != nil {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("the page of a refused authorization was lost %d times in 200", lost)
	}
}
