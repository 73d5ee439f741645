// Package oauthtest implements an in-process OAuth 2.1 authorization
// server for tests of MCP authorization, on github.com/ory/fosite (a
// maintained implementation: the grant, client authentication by
// secret and by private_key_jwt, token issue and introspection are
// fosite's, not the test's), with the metadata documents an MCP
// client discovers: the protected resource's (RFC 9728) for a resource
// it guards, and its own (RFC 8414).
package oauthtest

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v3"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/storage"
	"golang.org/x/crypto/bcrypt"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// Server is an authorization server on a loopback socket. Close it when
// the test ends.
type Server struct {
	*httptest.Server
	provider fosite.OAuth2Provider
	store    *clients

	mu sync.Mutex
	// Requests records every token request's form (a secret's or an
	// assertion's value replaced by "[sent]"), newest last.
	requests []map[string][]string
	// AuthMethods is what the metadata advertises as
	// token_endpoint_auth_methods_supported.
	authMethods []string
	registered  int
	revocations int
}

// Options shape the server.
type Options struct {
	// Path is the issuer's path ("" for none: the issuer is the
	// origin), to exercise path-aware discovery.
	Path string
	// AuthMethods advertised; default client_secret_basic,
	// client_secret_post and private_key_jwt.
	AuthMethods []string
	// TokenLifespan of access tokens; default an hour.
	TokenLifespan time.Duration
	// Documents, when set, makes the server take client ID metadata
	// documents: a client_id that is an https URL is the client whose
	// metadata Documents fetches from it (a client trusting the
	// document's TLS server).
	Documents *http.Client
	// Scopes are scopes_supported; default mcp:read, mcp:write and
	// offline_access.
	Scopes []string
	// NoPKCEMethods leaves code_challenge_methods_supported out of the
	// metadata (PKCE is still enforced).
	NoPKCEMethods bool
}

// New starts an authorization server.
func New(o Options) *Server {
	s := &Server{store: &clients{MemoryStore: storage.NewMemoryStore(), byID: map[string]fosite.Client{}, documents: o.Documents}, authMethods: o.AuthMethods}
	if o.Scopes == nil {
		o.Scopes = []string{"mcp:read", "mcp:write", "offline_access"}
	}
	if s.authMethods == nil {
		s.authMethods = []string{"client_secret_basic", "client_secret_post", "private_key_jwt"}
	}
	mux := http.NewServeMux()
	s.Server = httptest.NewServer(mux)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	cfg := &fosite.Config{
		GlobalSecret:        secret,
		AccessTokenLifespan: o.TokenLifespan,
		TokenURL:            s.URL + "/token",
		ScopeStrategy:       fosite.ExactScopeStrategy,
		EnforcePKCE:         true,
	}
	if cfg.AccessTokenLifespan == 0 {
		cfg.AccessTokenLifespan = time.Hour
	}
	s.provider = compose.Compose(cfg, s.store, compose.NewOAuth2HMACStrategy(cfg),
		compose.OAuth2ClientCredentialsGrantFactory, compose.OAuth2AuthorizeExplicitFactory, compose.OAuth2PKCEFactory,
		compose.OAuth2RefreshTokenGrantFactory, compose.OAuth2TokenIntrospectionFactory, compose.OAuth2TokenRevocationFactory)
	// A client assertion's audience is the issuer (RFC 7523bis) or,
	// as RFC 7523 allowed, the token endpoint.
	s.provider.(*fosite.Fosite).Config = audiences{Config: cfg, urls: []string{s.Issuer(o.Path), cfg.TokenURL}}
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/register", s.register)
	mux.HandleFunc("/revoke", s.revoke)
	meta := func(w http.ResponseWriter, _ *http.Request) {
		md := map[string]any{
			"issuer":                                s.Issuer(o.Path),
			"token_endpoint":                        s.URL + "/token",
			"authorization_endpoint":                s.URL + "/authorize",
			"registration_endpoint":                 s.URL + "/register",
			"revocation_endpoint":                   s.URL + "/revoke",
			"code_challenge_methods_supported":      []string{"S256"},
			"grant_types_supported":                 []string{"client_credentials", "authorization_code", "refresh_token"},
			"token_endpoint_auth_methods_supported": s.authMethods,
			"scopes_supported":                      o.Scopes,
			"client_id_metadata_document_supported": o.Documents != nil,
		}
		if o.NoPKCEMethods {
			delete(md, "code_challenge_methods_supported")
		}
		writeJSON(w, md)
	}
	if o.Path == "" {
		mux.HandleFunc("/.well-known/oauth-authorization-server", meta)
	} else {
		mux.HandleFunc("/.well-known/oauth-authorization-server"+o.Path, meta)
	}
	return s
}

// Issuer is the issuer identifier for path.
func (s *Server) Issuer(path string) string { return s.URL + path }

// AddSecretClient registers a client authenticating with a secret.
func (s *Server) AddSecretClient(id, secret string, scopes ...string) {
	h, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	s.store.set(id, &fosite.DefaultClient{ID: id, Secret: h, GrantTypes: []string{"client_credentials"}, Scopes: scopes})
}

// AddKeyClient registers a client authenticating with private_key_jwt,
// signing with key (its public half is registered, as kid).
func (s *Server) AddKeyClient(id string, key crypto.Signer, kid string, alg string, scopes ...string) {
	s.store.set(id, &fosite.DefaultOpenIDConnectClient{
		DefaultClient:                     &fosite.DefaultClient{ID: id, GrantTypes: []string{"client_credentials"}, Scopes: scopes},
		JSONWebKeys:                       &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: kid, Algorithm: alg, Use: "sig"}}},
		TokenEndpointAuthMethod:           "private_key_jwt",
		TokenEndpointAuthSigningAlgorithm: alg,
	})
}

// AddConfidentialClient registers a client of the authorization code
// flow from a loopback redirect that authenticates with a secret, sent
// the first way the server advertises (client_secret_basic unless that
// is client_secret_post).
func (s *Server) AddConfidentialClient(id, secret string, scopes ...string) {
	h, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	method := "client_secret_basic"
	if slices.Contains(s.authMethods, "client_secret_post") && !slices.Contains(s.authMethods, method) {
		method = "client_secret_post"
	}
	s.store.set(id, &fosite.DefaultOpenIDConnectClient{
		DefaultClient: &fosite.DefaultClient{ID: id, Secret: h, RedirectURIs: []string{"http://127.0.0.1/callback"},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, Scopes: scopes},
		TokenEndpointAuthMethod: method,
	})
}

// AddPublicClient registers a client without a secret, for the
// authorization code flow from a loopback redirect (any port, RFC 8252).
func (s *Server) AddPublicClient(id string, scopes ...string) {
	s.store.set(id, &fosite.DefaultClient{ID: id, Public: true, RedirectURIs: []string{"http://127.0.0.1/callback"},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, Scopes: scopes})
}

// authorize approves every request at once, as a person who always
// says yes would: fosite checks the client, the redirect and PKCE, and
// issues the code.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	for _, sc := range ar.GetRequestedScopes() {
		ar.GrantScope(sc)
	}
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, &fosite.DefaultSession{Subject: "alice"})
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	s.provider.WriteAuthorizeResponse(ctx, w, ar, resp)
}

// register is dynamic client registration (RFC 7591), which fosite
// does not serve: a client with the redirect URIs asked for is put in
// fosite's store, public when it asks for token endpoint authentication
// none (or none it the server supports), else confidential with a
// secret, and fosite does the rest.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	s.mu.Lock()
	s.registered++
	id := "dyn-" + strconv.Itoa(s.registered)
	methods := s.authMethods
	s.mu.Unlock()
	if req.Method == "" || !slices.Contains(append([]string{"none"}, methods...), req.Method) {
		req.Method = methods[0]
	}
	cl := &fosite.DefaultOpenIDConnectClient{
		DefaultClient: &fosite.DefaultClient{ID: id, Public: req.Method == "none", RedirectURIs: req.RedirectURIs,
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, Scopes: []string{"mcp:read", "mcp:write", "offline_access"}},
		TokenEndpointAuthMethod: req.Method,
	}
	out := map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs, "token_endpoint_auth_method": req.Method}
	if req.Method != "none" {
		secret := rand.Text()
		h, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
		if err != nil {
			panic(err)
		}
		cl.Secret = h
		out["client_secret"] = secret
	}
	s.store.set(id, cl)
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, out)
}

// revoke is token revocation (RFC 7009), fosite's.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	err := s.provider.NewRevocationRequest(ctx, r)
	s.mu.Lock()
	s.revocations++
	s.mu.Unlock()
	s.provider.WriteRevocationResponse(ctx, w, err)
}

// Revocations reports how many revocation requests were made.
func (s *Server) Revocations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revocations
}

// Registered reports how many clients registered themselves.
func (s *Server) Registered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := r.ParseForm(); err == nil {
		form := map[string][]string{}
		for k, v := range r.PostForm {
			form[k] = slices.Clone(v)
			if k == "client_secret" || k == "client_assertion" {
				form[k] = []string{"[sent]"} // present, not kept
			}
		}
		if _, _, ok := r.BasicAuth(); ok {
			form["basic_auth"] = []string{"yes"}
		}
		s.mu.Lock()
		s.requests = append(s.requests, form)
		s.mu.Unlock()
	}
	ar, err := s.provider.NewAccessRequest(ctx, r, &fosite.DefaultSession{})
	if err != nil {
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	for _, sc := range ar.GetRequestedScopes() {
		ar.GrantScope(sc)
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	s.provider.WriteAccessResponse(ctx, w, ar, resp)
}

// Requests returns the token requests' forms so far.
func (s *Server) Requests() []map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Verify introspects an access token: the scopes it was granted, or
// false when it is not an active access token of this server.
func (s *Server) Verify(token string) ([]string, bool) {
	_, ar, err := s.provider.IntrospectToken(context.Background(), token, fosite.AccessToken, &fosite.DefaultSession{})
	if err != nil {
		return nil, false
	}
	return ar.GetGrantedScopes(), true
}

// ProtectedResource returns a handler of the RFC 9728 metadata of the
// resource (an MCP endpoint URL) this server guards, with scopes as
// scopes_supported (nil: none).
func (s *Server) ProtectedResource(resource, issuerPath string, scopes []string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		md := map[string]any{"resource": resource, "authorization_servers": []string{s.Issuer(issuerPath)}}
		if scopes != nil {
			md["scopes_supported"] = scopes
		}
		writeJSON(w, md)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Scope joins scopes as a token request carries them.
func Scope(scopes ...string) string { return strings.Join(scopes, " ") }

// audiences is fosite's configuration with the client assertion
// audiences it accepts.
type audiences struct {
	*fosite.Config
	urls []string
}

// GetTokenURLs is what a client assertion's aud may name.
func (a audiences) GetTokenURLs(context.Context) []string { return a.urls }

// clients is fosite's memory store with its clients under a lock of
// ours, so a test may register one while fosite reads them.
type clients struct {
	*storage.MemoryStore
	mu   sync.Mutex
	byID map[string]fosite.Client
	// documents fetches client ID metadata documents; nil: none taken.
	documents *http.Client
}

func (c *clients) set(id string, cl fosite.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[id] = cl
}

// GetClient is fosite's lookup of a client: a registered one, or, where
// client ID metadata documents are taken, the public client an https
// client_id's document describes.
func (c *clients) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	c.mu.Lock()
	cl, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return cl, nil
	}
	if c.documents == nil || !strings.HasPrefix(id, "https://") {
		return nil, fosite.ErrNotFound
	}
	return c.document(ctx, id)
}

// document fetches and checks a client ID metadata document: its
// client_id must be its own URL, and it must name redirect URIs.
func (c *clients) document(ctx context.Context, id string) (fosite.Client, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, fosite.ErrNotFound
	}
	resp, err := c.documents.Do(req)
	if err != nil {
		return nil, fosite.ErrNotFound
	}
	defer resp.Body.Close()
	var md struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		GrantTypes   []string `json:"grant_types"`
		Method       string   `json:"token_endpoint_auth_method"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&md) != nil ||
		md.ClientID != id || len(md.RedirectURIs) == 0 || md.Method != "none" {
		return nil, fosite.ErrNotFound
	}
	return &fosite.DefaultClient{ID: id, Public: true, RedirectURIs: md.RedirectURIs, GrantTypes: md.GrantTypes,
		ResponseTypes: []string{"code"}, Scopes: []string{"mcp:read", "mcp:write", "offline_access"}}, nil
}

// Guard serves mcptest's HTTP face for sc on a loopback socket, at
// /mcp, guarded by s: tokens are checked with s.Verify, and the
// resource's metadata (RFC 9728, scopes_supported mcp:read) is at the
// path-aware well-known URI, which the face's challenges do not name,
// so a client must find it by the spec's order. Close ends both.
func (s *Server) Guard(sc mcptest.Scenario, o mcptest.HTTPOptions) *Guarded {
	o.Verify = s.Verify
	g := &Guarded{Face: mcptest.NewHTTP(sc, o)}
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.Face)
	g.srv = httptest.NewServer(mux)
	g.URL = g.srv.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", s.ProtectedResource(g.URL, "", []string{"mcp:read"}))
	return g
}

// Guarded is an MCP server behind an authorization server (Guard).
type Guarded struct {
	Face *mcptest.HTTPServer
	URL  string // the MCP endpoint
	srv  *httptest.Server
}

// Close ends the face and its listener.
func (g *Guarded) Close() {
	g.Face.Close()
	g.srv.Close()
}
