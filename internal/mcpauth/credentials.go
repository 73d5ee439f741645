package mcpauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ClientCredentials is a client's identity for the client credentials
// grant: a sidecar with no person present. Exactly one of Secret and Key
// authenticates it.
type ClientCredentials struct {
	ClientID string
	// Secret authenticates with client_secret_basic, or
	// client_secret_post when the server advertises only that.
	Secret string
	// Key signs a private_key_jwt assertion (RFC 7523): an RSA key
	// (RS256) or a P-256 key (ES256); KeyID is its kid, if the server
	// wants one.
	Key   crypto.Signer
	KeyID string
	// Scopes are asked for when the server's challenge names none; nil
	// falls back to the resource's scopes_supported (and to none).
	Scopes []string
	// Issuer, when set, is the one authorization server the credentials
	// may go to (Discovery.Pinned).
	Issuer string
	// IdentityAssertion, when set, gets tokens with enterprise-managed
	// authorization (the MCP extension for cross-app access) instead of
	// the client credentials grant: a person's ID token from their
	// enterprise IdP is exchanged there for an identity assertion grant
	// (RFC 8693 token exchange), which the server's authorization
	// server exchanges for an access token (the RFC 7523 JWT bearer
	// grant), the client authenticating with Secret or Key there.
	IdentityAssertion *IdentityAssertion
}

// IdentityAssertion is where a person's identity comes from for
// enterprise-managed authorization.
type IdentityAssertion struct {
	// IDPIssuer is the enterprise IdP's issuer; its token endpoint is
	// found by its metadata (OpenID Connect discovery or RFC 8414).
	IDPIssuer string
	// IDPClientID and IDPClientSecret are capbridge's client at the IdP
	// (the secret may be empty: a public client).
	IDPClientID, IDPClientSecret string
	// IDToken returns the person's current ID token, read at each
	// exchange (what signs the person in renews it).
	IDToken func() (string, error)
}

// The grant and token types of enterprise-managed authorization.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
)

// Limits of an Authorizer.
const (
	// renewBefore: a token this close to its expiry is renewed before it
	// is sent.
	renewBefore = 30 * time.Second
	// maxStepUps bounds the 403 insufficient_scope step-ups of one
	// token: a server that asks for ever more scopes is refused.
	maxStepUps = 3
	// assertionLife is how long a private_key_jwt assertion is valid.
	assertionLife = 5 * time.Minute
	// refetchAfter: a token the server refuses this soon after it was
	// fetched is not replaced by another fetch (the authorization server
	// issues tokens the server does not take), so a server that refuses
	// every token costs at most one token request in this time, not one
	// a request.
	refetchAfter = 30 * time.Second
)

// Authorizer authorizes a remote server's requests with the client
// credentials grant. It discovers the server's authorization server on
// its first challenge (a 401), fetches a token for the server's resource
// (RFC 8707) and sends it until it nears its expiry or the server
// refuses it; a 403 insufficient_scope is answered with a token for the
// scopes the challenge names, at most maxStepUps times. Safe for
// concurrent use: one fetch at a time, whose token every request shares.
type Authorizer struct {
	server string // the MCP endpoint
	creds  ClientCredentials
	hc     *http.Client

	now   func() time.Time // time.Now but in tests
	limit time.Duration    // bounds discovery and each fetch: loginFetchTimeout but in tests

	turn     turn // held by Authorize and Challenge, discovery and fetches included
	meta     *ServerMetadata
	idpToken string // the IdP's token endpoint, once found
	resource string // the resource indicator
	scopes   []string
	token    *oauth2.Token
	fetched  time.Time // when token was fetched
	stepUps  int
}

// NewAuthorizer returns an Authorizer for the MCP endpoint server. hc
// makes the discovery and token requests (it need not be the client the
// MCP requests use).
func NewAuthorizer(server string, creds ClientCredentials, hc *http.Client) (*Authorizer, error) {
	switch {
	case creds.ClientID == "":
		return nil, fail("client credentials", errors.New("no client_id"))
	case (creds.Secret == "") == (creds.Key == nil):
		return nil, fail("client credentials", errors.New("give a client secret or a private key, exactly one"))
	case creds.IdentityAssertion != nil && (creds.IdentityAssertion.IDPIssuer == "" || creds.IdentityAssertion.IDToken == nil):
		return nil, fail("enterprise-managed authorization", errors.New("give the IdP's issuer and the person's ID token"))
	}
	return &Authorizer{server: server, creds: creds, hc: hc, now: time.Now, limit: loginFetchTimeout, turn: newTurn()}, nil
}

// Authorize puts the current token on h, fetching one first when the
// server's authorization server is known and the token is missing or
// about to expire. Before the first challenge nothing is sent: the
// server's 401 says where to get a token.
func (a *Authorizer) Authorize(ctx context.Context, h http.Header) error {
	if err := a.turn.take(ctx); err != nil {
		return err
	}
	defer a.turn.give()
	if a.meta == nil {
		return nil
	}
	if a.token == nil || time.Until(a.token.Expiry) < renewBefore && !a.token.Expiry.IsZero() {
		if err := a.fetchLocked(ctx); err != nil {
			return err
		}
	}
	h.Set("Authorization", "Bearer "+a.token.AccessToken)
	return nil
}

// Challenge answers a 401 (discovery on the first, then a new token) or
// a 403 insufficient_scope (a token for the challenge's scopes), and
// reports whether the request should be tried again. A refusal of a
// token older than the current one is answered with the current one:
// another request's challenge fetched it, and counts its step-up.
func (a *Authorizer) Challenge(ctx context.Context, resp *http.Response) (bool, error) {
	ch, _ := ParseChallenge(resp.Header.Values("Www-Authenticate"))
	sent := strings.TrimPrefix(resp.Request.Header.Get("Authorization"), "Bearer ")
	stepUp := resp.StatusCode == http.StatusForbidden && ch.Error == "insufficient_scope"
	if resp.StatusCode == http.StatusForbidden && !stepUp {
		return false, nil // forbidden for another reason: the caller sees the 403
	}
	if err := a.turn.take(ctx); err != nil {
		return false, err
	}
	defer a.turn.give()
	if a.token != nil && sent != a.token.AccessToken {
		return true, nil // another request has fetched a newer token already
	}
	if a.meta == nil {
		// The first refusal, a 401 or a 403 that asks for scopes before
		// any token was sent: it says where tokens come from.
		if err := a.discoverLocked(ctx, ch); err != nil {
			return false, err
		}
	}
	switch {
	case stepUp:
		if a.stepUps == maxStepUps {
			return false, fail("step-up", fmt.Errorf("the server asked for more scopes %d times (now %q); refusing", maxStepUps, ch.Scope))
		}
		a.stepUps++
		for _, s := range strings.Fields(ch.Scope) {
			if !slices.Contains(a.scopes, s) {
				a.scopes = append(a.scopes, s)
			}
		}
	case a.token != nil && a.now().Sub(a.fetched) < refetchAfter:
		return false, fail("the server refused a fresh token", errors.New("check the client's registration and scopes at the authorization server"))
	case a.token != nil && ch.Scope != "":
		a.scopes = strings.Fields(ch.Scope)
	}
	if err := a.fetchLocked(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// discoverLocked finds the authorization server from the challenge and
// picks the scopes: the challenge's, else the configured ones, else the
// resource's scopes_supported, else none (the spec's order).
func (a *Authorizer) discoverLocked(ctx context.Context, ch Challenge) error {
	ctx, cancel := context.WithTimeout(ctx, a.limit) // the turn is held meanwhile
	defer cancel()
	d, err := Discover(ctx, a.hc, a.server, ch)
	if err != nil {
		return err
	}
	if err := d.Pinned(a.creds.Issuer); err != nil {
		return err
	}
	a.meta, a.resource = d.Server, d.Resource
	switch {
	case ch.Scope != "":
		a.scopes = strings.Fields(ch.Scope)
	case a.creds.Scopes != nil:
		a.scopes = a.creds.Scopes
	default:
		a.scopes = d.ScopesSupported
	}
	return nil
}

// fetchLocked gets a token: with the client credentials grant, or with
// the JWT bearer grant of an identity assertion the IdP issued.
func (a *Authorizer) fetchLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.limit) // the turn is held meanwhile
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, a.hc)
	cfg := clientcredentials.Config{
		ClientID:       a.creds.ClientID,
		TokenURL:       a.meta.TokenEndpoint,
		Scopes:         a.scopes,
		EndpointParams: url.Values{"resource": {a.resource}},
	}
	grant := "the client credentials grant"
	sent := []credential{{"client_secret", a.creds.Secret}} // what the token endpoint may echo
	if ia := a.creds.IdentityAssertion; ia != nil {
		jag, err := a.identityAssertionLocked(ctx, ia)
		if err != nil {
			return err
		}
		// clientcredentials.Config lets grant_type be replaced, and does
		// the client authentication and the token response for us.
		cfg.EndpointParams.Set("grant_type", grantJWTBearer)
		cfg.EndpointParams.Set("assertion", jag)
		grant = "the JWT bearer grant"
		sent = append(sent, credential{"assertion", jag})
	}
	if a.creds.Key != nil {
		assertion, err := a.assertion()
		if err != nil {
			return fail("signing the client assertion", err)
		}
		cfg.AuthStyle = oauth2.AuthStyleInParams
		cfg.EndpointParams.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		cfg.EndpointParams.Set("client_assertion", assertion)
		sent = append(sent, credential{"client_assertion", assertion})
	} else {
		cfg.ClientSecret = a.creds.Secret
		cfg.AuthStyle = oauth2.AuthStyleInHeader
		if m := a.meta.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post") {
			cfg.AuthStyle = oauth2.AuthStyleInParams
		}
	}
	tok, err := cfg.Token(ctx)
	if err != nil {
		return fail(grant+" at "+a.meta.TokenEndpoint, tokenError(err, sent...))
	}
	if tok, err = bearer(tok, a.now()); err != nil {
		return fail(grant+" at "+a.meta.TokenEndpoint, err)
	}
	a.token, a.fetched = tok, a.now()
	return nil
}

// bearer vets a token endpoint's answer before it is sent as a bearer
// token. Its type must be Bearer, in any case, or none (which x/oauth2
// reads as Bearer): a client must not use a token whose type it does not
// understand (RFC 6749 §7.1), and capbridge sends only Bearer tokens.
// Its expiry is when it is renewed, renewBefore ahead; one that would
// have it renewed before every request is moved: an expiry not in the
// future (an expires_in of zero or less, or one so large x/oauth2
// wrapped it into the past) is taken as none, the token renewed when
// the server refuses it; a lifetime under twice renewBefore is renewed
// at its half.
func bearer(tok *oauth2.Token, now time.Time) (*oauth2.Token, error) {
	if t := tok.TokenType; t != "" && !strings.EqualFold(t, "bearer") {
		return nil, fmt.Errorf("it issued a token of type %q; capbridge sends only Bearer tokens", said(t, nil))
	}
	life := tok.Expiry.Sub(now)
	if tok.Expiry.IsZero() || life >= 2*renewBefore {
		return tok, nil
	}
	t := *tok
	if life <= 0 {
		t.Expiry = time.Time{}
	} else {
		t.Expiry = now.Add(life/2 + renewBefore)
	}
	return &t, nil
}

// identityAssertionLocked exchanges the person's ID token at the IdP for
// an identity assertion grant (an ID-JAG) for the server's authorization
// server and resource (RFC 8693).
func (a *Authorizer) identityAssertionLocked(ctx context.Context, ia *IdentityAssertion) (string, error) {
	if a.idpToken == "" {
		md, err := DiscoverServer(ctx, a.hc, ia.IDPIssuer)
		if err != nil {
			return "", err
		}
		a.idpToken = md.TokenEndpoint
	}
	idToken, err := ia.IDToken()
	if err != nil {
		return "", fail("the person's ID token", err)
	}
	cfg := clientcredentials.Config{
		ClientID:     ia.IDPClientID,
		ClientSecret: ia.IDPClientSecret,
		TokenURL:     a.idpToken,
		Scopes:       a.scopes,
		AuthStyle:    oauth2.AuthStyleInParams,
		EndpointParams: url.Values{
			"grant_type":           {grantTokenExchange},
			"requested_token_type": {tokenTypeIDJAG},
			"subject_token":        {idToken},
			"subject_token_type":   {tokenTypeIDToken},
			"audience":             {a.meta.Issuer},
			"resource":             {a.resource},
		},
	}
	if ia.IDPClientSecret != "" {
		cfg.AuthStyle = oauth2.AuthStyleInHeader
	}
	tok, err := cfg.Token(ctx)
	if err != nil {
		return "", fail("the token exchange at the IdP "+a.idpToken, tokenError(err, credential{"client_secret", ia.IDPClientSecret}, credential{"subject_token", idToken}))
	}
	if tt, _ := tok.Extra("issued_token_type").(string); tt != tokenTypeIDJAG {
		return "", fail("the token exchange at the IdP "+a.idpToken, fmt.Errorf("issued a %q, not an identity assertion grant", tt))
	}
	return tok.AccessToken, nil
}

// tokenError keeps what the token endpoint said (error and its
// description), without the credentials the request carried and those
// named (said), and drops the rest of its body.
func tokenError(err error, named ...credential) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		if _, ok := errors.AsType[*url.Error](err); ok {
			return err // the transport's: the endpoint and why it was not reached
		}
		// x/oauth2's own, about an answer it could not use (a 200 whose
		// JSON does not parse), quotes the answer: the server's words,
		// which may echo what was sent.
		return errors.New(said(err.Error(), nil, named...))
	}
	msg := fmt.Sprintf("HTTP %d", re.Response.StatusCode)
	text := re.ErrorCode
	if re.ErrorDescription != "" {
		text = strings.TrimSpace(text + " (" + re.ErrorDescription + ")")
	}
	if text != "" {
		msg += ": " + said(text, re.Response.Request, named...)
	}
	return errors.New(msg)
}

// assertion signs a private_key_jwt client assertion (RFC 7523 §3): the
// client is its issuer and subject, and its audience the authorization
// server's issuer identifier (as RFC 7523bis requires; servers that
// followed RFC 7523's looser rule accept the issuer too).
func (a *Authorizer) assertion() (string, error) {
	alg := ""
	switch k := a.creds.Key.Public().(type) {
	case *rsa.PublicKey:
		alg = "RS256"
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize != 256 {
			return "", errors.New("an EC key must be P-256 (ES256)")
		}
		alg = "ES256"
	default:
		return "", fmt.Errorf("a %T key is neither RSA nor P-256", k)
	}
	head := map[string]string{"alg": alg, "typ": "JWT"}
	if a.creds.KeyID != "" {
		head["kid"] = a.creds.KeyID
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	now := time.Now()
	claims := map[string]any{
		"iss": a.creds.ClientID, "sub": a.creds.ClientID, "aud": a.meta.Issuer,
		"jti": base64.RawURLEncoding.EncodeToString(jti[:]), "iat": now.Unix(), "exp": now.Add(assertionLife).Unix(),
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return "", err
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(hb) + "." + base64.RawURLEncoding.EncodeToString(cb)
	sum := sha256.Sum256([]byte(signing))
	sig, err := a.creds.Key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return "", err
	}
	if alg == "ES256" {
		// JWS wants r||s, 32 bytes each, where crypto.Signer gives ASN.1.
		var parsed struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(sig, &parsed); err != nil {
			return "", err
		}
		raw := make([]byte, 64)
		parsed.R.FillBytes(raw[:32])
		parsed.S.FillBytes(raw[32:])
		sig = raw
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// ParsePrivateKey reads a PEM private key (PKCS #8, PKCS #1 RSA or SEC 1
// EC) for private_key_jwt.
func ParsePrivateKey(pemBytes []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fail("the private key", errors.New("no PEM block"))
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fail("the private key", err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fail("the private key", fmt.Errorf("a %T cannot sign", key))
	}
	return s, nil
}
