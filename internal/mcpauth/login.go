package mcpauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// LoginOptions configure an interactive login.
type LoginOptions struct {
	// Server is the server's name in the config (the store's key) and
	// URL its MCP endpoint.
	Server, URL string
	// ClientID and ClientSecret are a client registered beforehand;
	// without ClientID, the client registers itself dynamically (RFC
	// 7591) when the authorization server offers it.
	ClientID, ClientSecret string
	// Scopes are asked for when the server's challenge names none.
	Scopes []string
	// Open shows the person the authorization URL (a browser); the URL
	// is also given to Printed first, always.
	Open    func(authURL string) error
	Printed func(authURL string)
	// HTTP makes the discovery and token requests, and the probe of the
	// server.
	HTTP *http.Client
	// Header is sent with the probe (the server's other headers).
	Header http.Header
}

// maxLoginWait bounds how long Login waits for the person.
const maxLoginWait = 10 * time.Minute

// Login runs the authorization code flow with PKCE (S256) for a server
// that needs a person's authorization: it finds the authorization
// server from the server's 401 challenge, registers the client if it
// has no client_id and the server offers registration, opens the
// authorization URL, takes the redirect on a loopback listener, checks
// state and iss (RFC 9207), and exchanges the code for tokens bound to
// the server's resource (RFC 8707). It returns what to save.
func Login(ctx context.Context, o LoginOptions) (*Saved, error) {
	ch, err := probe(ctx, o)
	if err != nil {
		return nil, err
	}
	rm, err := DiscoverResource(ctx, o.HTTP, o.URL, ch)
	if err != nil {
		return nil, err
	}
	meta, err := DiscoverServer(ctx, o.HTTP, rm.AuthorizationServers[0])
	if err != nil {
		return nil, err
	}
	if meta.AuthorizationEndpoint == "" {
		return nil, fail("authorization server metadata", errors.New("has no authorization_endpoint: it cannot log a person in"))
	}
	if m := meta.CodeChallengeMethodsSupported; len(m) > 0 && !slices.Contains(m, "S256") {
		return nil, fail("authorization server metadata", errors.New("does not support PKCE with S256, which MCP requires"))
	}
	resource := rm.Resource
	if resource == "" {
		u, _ := url.Parse(o.URL)
		resource = shown(u)
	}
	scopes := strings.Fields(ch.Scope)
	switch {
	case len(scopes) > 0:
	case o.Scopes != nil:
		scopes = o.Scopes
	default:
		scopes = rm.ScopesSupported
	}
	if slices.Contains(meta.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access") // a refresh token, so serve need not ask again
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fail("the loopback redirect listener", err)
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + "/callback"
	clientID, secret := o.ClientID, o.ClientSecret
	if clientID == "" {
		if clientID, secret, err = register(ctx, o.HTTP, meta, redirect); err != nil {
			return nil, err
		}
	}
	cfg := &oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirect, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint}}
	verifier := oauth2.GenerateVerifier()
	state := randomString()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))

	got := make(chan url.Values, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		select {
		case got <- q:
		default:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if q.Get("error") != "" {
			fmt.Fprintf(w, "<p>capbridge: the authorization failed: %s. You may close this page.</p>", html.EscapeString(q.Get("error")))
			return
		}
		fmt.Fprint(w, "<p>capbridge is authorized. You may close this page.</p>")
	})}
	var served sync.WaitGroup
	served.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		_ = srv.Close()
		served.Wait()
	}()

	if o.Printed != nil {
		o.Printed(authURL)
	}
	if o.Open != nil {
		if err := o.Open(authURL); err != nil && o.Printed == nil {
			return nil, fail("opening the browser", err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, maxLoginWait)
	defer cancel()
	var q url.Values
	select {
	case q = <-got:
	case <-wait.Done():
		return nil, fail("waiting for the authorization", fmt.Errorf("no redirect within %v", maxLoginWait))
	}
	switch {
	case q.Get("state") != state:
		return nil, fail("the authorization response", errors.New("its state is not this login's (a forged or stale redirect)"))
	case q.Get("error") != "":
		return nil, fail("the authorization server refused", fmt.Errorf("%s: %s", q.Get("error"), q.Get("error_description")))
	case q.Get("code") == "":
		return nil, fail("the authorization response", errors.New("carries no code"))
	}
	// RFC 9207: a server that says it sends iss must send its own, and
	// any iss sent must be the issuer's (a mix-up attack otherwise).
	if iss := q.Get("iss"); (meta.IssParameterSupported && iss == "") || (iss != "" && strings.TrimRight(iss, "/") != strings.TrimRight(meta.Issuer, "/")) {
		return nil, fail("the authorization response", fmt.Errorf("its iss %q is not the authorization server's %q", iss, meta.Issuer))
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, o.HTTP), q.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		return nil, fail("exchanging the code at "+meta.TokenEndpoint, tokenError(err))
	}
	return &Saved{Server: o.Server, URL: o.URL, Issuer: meta.Issuer, TokenEndpoint: meta.TokenEndpoint, ClientID: clientID, ClientSecret: secret,
		Resource: resource, Scopes: scopes, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}, nil
}

// probe sends the server an initialize without credentials to read its
// challenge.
func probe(ctx context.Context, o LoginOptions) (Challenge, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"capbridge-login","version":"0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, strings.NewReader(body))
	if err != nil {
		return Challenge{}, fail("the server URL", err)
	}
	for k, v := range o.Header {
		if !strings.EqualFold(k, "Authorization") {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := o.HTTP.Do(req)
	if err != nil {
		return Challenge{}, fail("reaching the server", err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return Challenge{}, fail("the server", fmt.Errorf("answered HTTP %d without credentials, not 401: it asks for no login", resp.StatusCode))
	}
	ch, _ := ParseChallenge(resp.Header.Values("Www-Authenticate"))
	return ch, nil
}

// register registers a public client for the loopback redirect (RFC 7591).
func register(ctx context.Context, hc *http.Client, meta *ServerMetadata, redirect string) (string, string, error) {
	if meta.RegistrationEndpoint == "" {
		return "", "", fail("client registration", errors.New("no client_id is configured and the authorization server offers no registration endpoint: register capbridge there and set oauth.client_id"))
	}
	body, _ := json.Marshal(map[string]any{
		"client_name": "capbridge", "redirect_uris": []string{redirect}, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "none",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, meta.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return "", "", fail("client registration", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", fail("client registration", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if err != nil {
		return "", "", fail("client registration", err)
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Error        string `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode/100 != 2 || out.ClientID == "" {
		return "", "", fail("client registration", fmt.Errorf("HTTP %d %s", resp.StatusCode, out.Error))
	}
	return out.ClientID, out.ClientSecret, nil
}

func randomString() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
