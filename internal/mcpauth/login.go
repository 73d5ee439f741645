package mcpauth

import (
	"bytes"
	"cmp"
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

	"github.com/capbridge/capbridge/internal/netlimit"
	"golang.org/x/oauth2"
)

// LoginOptions configure an interactive login.
type LoginOptions struct {
	// Server is the server's name in the config (the store's key) and
	// URL its MCP endpoint.
	Server, URL string
	// ClientID and ClientSecret are a client registered beforehand.
	// Without ClientID, the client is ClientMetadataURL where the
	// authorization server takes client ID metadata documents, else it
	// registers itself (RFC 7591) where the server offers that.
	ClientID, ClientSecret string
	// ClientMetadataURL is the https URL where the operator publishes
	// capbridge's client ID metadata document (ClientMetadataDocument).
	ClientMetadataURL string
	// Scopes are asked for when the server's challenge names none.
	Scopes []string
	// Previous is the login saved before, if any: a step-up (a server
	// that refused its token for want of scopes) asks for its scopes and
	// the wanted ones, and a client it registered is used again.
	Previous *Saved
	// Open shows the person the authorization URL (a browser); the URL
	// is also given to Printed first, always.
	Open    func(authURL string) error
	Printed func(authURL string)
	// HTTP makes the discovery and token requests, and the probe of the
	// server.
	HTTP *http.Client
	// Header is sent with the probe (the server's other headers).
	Header http.Header
	// Issuer, when set, is the one authorization server the login may
	// use (Discovery.Pinned).
	Issuer string

	// fetchTimeout is loginFetchTimeout but in tests.
	fetchTimeout time.Duration
}

// maxLoginWait bounds how long Login waits for the person.
const maxLoginWait = 10 * time.Minute

// Bounds of the loopback listener the browser is redirected to.
const (
	callbackTimeout   = 10 * time.Second // to read a request, or write its page
	maxCallbackHeader = 16 << 10         // a redirect's query is a code, a state and an issuer
	callbackConns     = 32               // open at once; more wait in the backlog
)

// loginFetchTimeout bounds each of a login's requests (the probe, the
// discoveries, the registration, the code's exchange) whatever client
// it is given: a server that accepts and never answers ends the login
// then, not when the person gives up.
const loginFetchTimeout = 30 * time.Second

// The token endpoint authentication methods (RFC 7591 §2) a login's
// client may use.
const (
	authNone     = "none"
	authBasic    = "client_secret_basic"
	authPost     = "client_secret_post"
	redirectPath = "/callback"
)

// Login runs the authorization code flow with PKCE (S256) for a server
// that needs a person's authorization: it finds the authorization
// server (from the server's 401 challenge and its protected resource
// metadata, or the 2025-03-26 way), takes the client identity in the
// spec's order (pre-registered, a client ID metadata document, dynamic
// registration), opens the authorization URL, takes the redirect on a
// loopback listener, checks state and iss (RFC 9207), and exchanges the
// code for tokens bound to the server's resource (RFC 8707). It returns
// what to save.
func Login(ctx context.Context, o LoginOptions) (*Saved, error) {
	limit := cmp.Or(o.fetchTimeout, loginFetchTimeout)
	if o.HTTP == nil {
		o.HTTP = http.DefaultClient
	}
	if hc := *o.HTTP; hc.Timeout == 0 || hc.Timeout > limit {
		hc.Timeout = limit
		o.HTTP = &hc
	}
	ch, challenged, err := probe(ctx, o)
	if err != nil {
		return nil, err
	}
	d, err := Discover(ctx, o.HTTP, o.URL, ch)
	if errors.Is(err, ErrNoResourceMetadata) && !challenged {
		return nil, fail("the server", errors.New("answered without asking for authorization, and publishes no protected resource metadata: it asks for no login"))
	}
	if err != nil {
		return nil, err
	}
	if err := d.Pinned(o.Issuer); err != nil {
		return nil, err
	}
	meta := d.Server
	if meta.AuthorizationEndpoint == "" {
		return nil, fail("authorization server metadata", errors.New("has no authorization_endpoint: it cannot log a person in"))
	}
	// MCP requires PKCE with S256. Since 2025-06-18 a client must refuse
	// an authorization server whose metadata does not say it supports
	// it; a 2025-03-26 server (no protected resource metadata) may not
	// say, and is sent S256 all the same.
	if m := meta.CodeChallengeMethodsSupported; !slices.Contains(m, "S256") && (len(m) > 0 || !d.Legacy2025) {
		return nil, fail("authorization server metadata", errors.New("does not list S256 in code_challenge_methods_supported: PKCE with S256, which MCP requires, is not offered"))
	}
	scopes := loginScopes(ch, o, d)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fail("the loopback redirect listener", err)
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + redirectPath
	cl, err := client(ctx, o, meta, redirect)
	if err != nil {
		return nil, err
	}
	cfg := &oauth2.Config{ClientID: cl.id, ClientSecret: cl.secret, RedirectURL: redirect, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: authStyle(cl.method)}}
	verifier := oauth2.GenerateVerifier()
	state := randomString()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.Resource))

	// Only a redirect with this login's state ends the wait: any other
	// request to the listener (a stale tab, a forged redirect, another
	// local process) is refused and the wait goes on.
	got := make(chan url.Values, 1)
	srv := &http.Server{
		// Any local process can reach the listener: each connection
		// carries one request with a small header, in bounded time, and
		// at most callbackConns are open at once.
		ReadHeaderTimeout: callbackTimeout, ReadTimeout: callbackTimeout, WriteTimeout: callbackTimeout,
		MaxHeaderBytes: maxCallbackHeader,
	}
	srv.SetKeepAlivesEnabled(false)
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != redirectPath {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("state") != state {
			http.Error(w, "capbridge: this is not the redirect of the login in progress", http.StatusBadRequest)
			return
		}
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
	})
	var served sync.WaitGroup
	served.Go(func() { _ = srv.Serve(netlimit.New(ln, callbackConns, nil)) })
	defer func() {
		// The page of the redirect taken is still being written: let it
		// reach the browser, bounded.
		end, cancel := context.WithTimeout(context.Background(), callbackTimeout)
		_ = srv.Shutdown(end)
		cancel()
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
		if ctx.Err() != nil {
			return nil, fail("waiting for the authorization", context.Cause(ctx))
		}
		return nil, fail("waiting for the authorization", fmt.Errorf("no redirect with this login's state within %v", maxLoginWait))
	}
	switch {
	case q.Get("error") != "":
		// Its words, bounded and without control characters: they
		// reach a terminal.
		return nil, fail("the authorization server refused", errors.New(said(q.Get("error")+": "+q.Get("error_description"), nil)))
	case q.Get("code") == "":
		return nil, fail("the authorization response", errors.New("carries no code"))
	}
	// RFC 9207: a server that says it sends iss must send its own, and
	// any iss sent must be the issuer's (a mix-up attack otherwise).
	if iss := q.Get("iss"); (meta.IssParameterSupported && iss == "") || (iss != "" && !sameIssuer(iss, meta.Issuer)) {
		return nil, fail("the authorization response", fmt.Errorf("its iss %q is not the authorization server's %q", said(iss, nil), meta.Issuer))
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, o.HTTP), q.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", d.Resource))
	if err != nil {
		return nil, fail("exchanging the code at "+meta.TokenEndpoint, tokenError(err,
			credential{"code", q.Get("code")}, credential{"code_verifier", verifier}, credential{"client_secret", cl.secret}))
	}
	if tok, err = bearer(tok, time.Now()); err != nil {
		return nil, fail("exchanging the code at "+meta.TokenEndpoint, err)
	}
	sv := &Saved{Server: o.Server, URL: o.URL, Issuer: meta.Issuer, TokenEndpoint: meta.TokenEndpoint, RevocationEndpoint: meta.RevocationEndpoint,
		ClientID: cl.id, ClientSecret: cl.secret, TokenAuth: cl.method, Registered: cl.registered,
		Resource: d.Resource, Scopes: scopes, Granted: granted(tok, scopes), AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
	if p := o.Previous; p != nil && len(p.StepUp) > 0 {
		sv.StepUps = p.StepUps + 1
	}
	return sv, nil
}

// loginScopes are the scopes a login asks for: the challenge's, else the
// configured ones, else the resource's scopes_supported, else none (the
// spec's order); in a step-up, with the previous login's and those the
// server wanted; and offline_access when the authorization server lists
// it (so serve gets a refresh token).
func loginScopes(ch Challenge, o LoginOptions, d *Discovery) []string {
	scopes := strings.Fields(ch.Scope)
	switch {
	case len(scopes) > 0:
	case o.Scopes != nil:
		scopes = slices.Clone(o.Scopes)
	default:
		scopes = slices.Clone(d.ScopesSupported)
	}
	if p := o.Previous; p != nil && len(p.StepUp) > 0 {
		had := slices.DeleteFunc(slices.Clone(p.Scopes), func(s string) bool { return s == "offline_access" })
		scopes = union(union(scopes, had), p.StepUp)
	}
	if slices.Contains(d.Server.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	return scopes
}

// union is a with the elements of b it lacks appended, in order.
func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

// granted is the scopes a token response says were granted (its scope),
// else those asked for (RFC 6749 §5.1: an omitted scope is the one
// requested).
func granted(tok *oauth2.Token, asked []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return asked
}

// loginClient is the client a login authenticates as.
type loginClient struct {
	id, secret string
	method     string // token endpoint authentication: authNone, authBasic, authPost
	registered bool   // by dynamic registration
}

// client picks the login's client identity in the MCP spec's order: a
// pre-registered client; the client ID metadata document's URL where
// the authorization server supports them; the client a previous login
// registered at the same server; dynamic registration.
func client(ctx context.Context, o LoginOptions, meta *ServerMetadata, redirect string) (loginClient, error) {
	switch p := o.Previous; {
	case o.ClientID != "":
		return loginClient{id: o.ClientID, secret: o.ClientSecret, method: secretMethod(o.ClientSecret, meta)}, nil
	case o.ClientMetadataURL != "" && meta.ClientIDMetadataDocumentSupported:
		return loginClient{id: o.ClientMetadataURL, method: authNone}, nil
	case p != nil && p.Registered && p.Issuer == meta.Issuer && p.ClientID != "":
		return loginClient{id: p.ClientID, secret: p.ClientSecret, method: p.TokenAuth, registered: true}, nil
	}
	return register(ctx, o.HTTP, meta, redirect)
}

// secretMethod is how a pre-registered client authenticates at the token
// endpoint: none without a secret; with one, client_secret_basic unless
// the server lists only client_secret_post (RFC 8414's default is basic).
func secretMethod(secret string, meta *ServerMetadata) string {
	m := meta.TokenEndpointAuthMethodsSupported
	switch {
	case secret == "":
		return authNone
	case len(m) > 0 && !slices.Contains(m, authBasic) && slices.Contains(m, authPost):
		return authPost
	}
	return authBasic
}

// authStyle is x/oauth2's way of sending a client's credentials for a
// token endpoint authentication method: in the body for none (the
// client_id alone) and client_secret_post, in the Authorization header
// for client_secret_basic.
func authStyle(method string) oauth2.AuthStyle {
	if method == authBasic {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// probe reads the server's challenge to an unauthenticated request: the
// server/discover a modern client sends first, then initialize, then the
// GET of a stream, until one is answered 401 (a server may let the
// handshake through and guard only what follows). challenged is false
// when none was refused.
func probe(ctx context.Context, o LoginOptions) (Challenge, bool, error) {
	const info = `"clientInfo":{"name":"capbridge-login","version":"0"}`
	tries := []struct{ method, body, version string }{
		{http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"capbridge-login","version":"0"}}}}`, "2026-07-28"},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` + info + `}}`, ""},
		{http.MethodGet, "", ""},
	}
	for _, t := range tries {
		var body io.Reader
		if t.body != "" {
			body = strings.NewReader(t.body)
		}
		req, err := http.NewRequestWithContext(ctx, t.method, o.URL, body)
		if err != nil {
			return Challenge{}, false, fail("the server URL", err)
		}
		for k, v := range o.Header {
			if !strings.EqualFold(k, "Authorization") {
				req.Header[k] = v
			}
		}
		if t.body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		} else {
			req.Header.Set("Accept", "text/event-stream")
		}
		if t.version != "" {
			req.Header.Set("Mcp-Protocol-Version", t.version)
		}
		resp, err := o.HTTP.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = shownURL(ue.URL) // its query may be an API key
			}
			return Challenge{}, false, fail("reaching the server", err)
		}
		// A stream that opened is not read: closing it ends it.
		if resp.StatusCode != http.StatusOK {
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			ch, _ := ParseChallenge(resp.Header.Values("Www-Authenticate"))
			return ch, true, nil
		}
	}
	return Challenge{}, false, nil
}

// register registers a client for the loopback redirect (RFC 7591): a
// public one where the authorization server takes that (or says nothing),
// else one with a secret sent as the server prefers. The method the
// server registered, when it says, is the one used.
func register(ctx context.Context, hc *http.Client, meta *ServerMetadata, redirect string) (loginClient, error) {
	if meta.RegistrationEndpoint == "" {
		return loginClient{}, fail("client registration", errors.New("no client_id is configured, the authorization server takes no client ID metadata document (or none is configured: oauth.client_metadata_url) and offers no registration endpoint: register capbridge there and set oauth.client_id"))
	}
	method := authNone
	if m := meta.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, authNone) {
		method = secretMethod("secret", meta)
	}
	body, _ := json.Marshal(map[string]any{
		"client_name": "capbridge", "redirect_uris": []string{redirect}, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": method,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, meta.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return loginClient{}, fail("client registration", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return loginClient{}, fail("client registration", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if err != nil {
		return loginClient{}, fail("client registration", err)
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Method       string `json:"token_endpoint_auth_method"`
		Error        string `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode/100 != 2 || out.ClientID == "" {
		return loginClient{}, fail("client registration", fmt.Errorf("HTTP %d %s", resp.StatusCode, said(out.Error, req)))
	}
	switch out.Method {
	case authNone, authBasic, authPost:
		method = out.Method
	case "":
	default:
		return loginClient{}, fail("client registration", fmt.Errorf("the server registered the token endpoint authentication %q, which a login's client cannot use", out.Method))
	}
	if method != authNone && out.ClientSecret == "" {
		return loginClient{}, fail("client registration", fmt.Errorf("the server registered %s without issuing a secret", method))
	}
	if method == authNone {
		out.ClientSecret = ""
	}
	return loginClient{id: out.ClientID, secret: out.ClientSecret, method: method, registered: true}, nil
}

// ClientMetadataDocument is capbridge's client ID metadata document for
// the URL it is published at: a public client of the authorization code
// flow whose redirect is a loopback listener on any port (RFC 8252
// §7.3), asking for refresh tokens.
func ClientMetadataDocument(u string) ([]byte, error) {
	if err := CheckClientMetadataURL(u); err != nil {
		return nil, err
	}
	return json.MarshalIndent(map[string]any{
		"client_id":                  u,
		"client_name":                "capbridge",
		"client_uri":                 "https://github.com/capbridge/capbridge",
		"redirect_uris":              []string{"http://127.0.0.1" + redirectPath},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": authNone,
	}, "", "  ")
}

// CheckClientMetadataURL says what is wrong with a URL as a client ID
// metadata document's (the client_id itself): it must be https, with a
// path, and no fragment, credentials or dot segments.
func CheckClientMetadataURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "":
		return fail("the client metadata URL", fmt.Errorf("%q is not an https URL", s))
	case u.Path == "" || u.Path == "/":
		return fail("the client metadata URL", fmt.Errorf("%q has no path: the document must be at a path of its own", s))
	case u.Fragment != "" || u.User != nil || strings.Contains(u.Path, "/./") || strings.Contains(u.Path, "/../"):
		return fail("the client metadata URL", fmt.Errorf("%q may not carry a fragment, credentials or dot segments", s))
	}
	return nil
}

func randomString() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
