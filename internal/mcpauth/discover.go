// Package mcpauth implements the client side of MCP authorization (the
// MCP authorization spec, 2025-11-25, which 2025-06-18 and the OAuth
// metadata of 2025-03-26 agree with) for capbridge's remote servers:
// the server's challenge, the discovery of its protected-resource
// metadata (RFC 9728) and its authorization server's metadata (RFC 8414
// and OpenID Connect discovery, path-aware), and the client credentials
// grant with a client secret or a private_key_jwt assertion (RFC 7523),
// as an mcpwire.Authorizer that fetches, caches, renews and steps up its
// token. golang.org/x/oauth2 makes the token requests; what it lacks
// (discovery, resource indicators, the assertion, the challenges) is
// here.
//
// Every fetch is bounded in size and time; no token, secret or
// assertion is ever part of an error or a log line.
package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/capbridge/capbridge/internal/loopback"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/internal/weborigin"
)

// ErrAuth is matched by every error this package returns.
var ErrAuth = errors.New("mcpauth: authorization failed")

// authError is an authorization failure with the step that failed.
type authError struct {
	step string
	err  error
}

func (e *authError) Error() string {
	if e.err == nil {
		return "mcpauth: " + e.step
	}
	return "mcpauth: " + e.step + ": " + e.err.Error()
}

func (e *authError) Is(target error) bool { return target == ErrAuth }
func (e *authError) Unwrap() error        { return e.err }

func fail(step string, err error) error { return &authError{step: step, err: err} }

// maxMetadata bounds a metadata document.
const maxMetadata = 256 << 10

// Challenge is a Bearer WWW-Authenticate challenge (RFC 6750 §3, RFC
// 9728 §5.1).
type Challenge struct {
	ResourceMetadata string
	Scope            string
	Error            string // "invalid_token", "insufficient_scope", …
}

// ParseChallenge finds the Bearer challenge among a response's
// WWW-Authenticate values. It is total: anything it cannot read is left
// out.
func ParseChallenge(values []string) (Challenge, bool) {
	for _, v := range values {
		for _, c := range splitChallenges(v) {
			scheme, params, _ := strings.Cut(strings.TrimSpace(c), " ")
			if !strings.EqualFold(scheme, "Bearer") {
				continue
			}
			var ch Challenge
			for k, val := range authParams(params) {
				switch k {
				case "resource_metadata":
					ch.ResourceMetadata = val
				case "scope":
					ch.Scope = val
				case "error":
					ch.Error = val
				}
			}
			return ch, true
		}
	}
	return Challenge{}, false
}

// splitChallenges splits a header value holding several challenges at
// each scheme (a token followed by a space that is not inside quotes and
// not a parameter). Quotes are read as authParams reads them (RFC 9110
// §5.6.4: a backslash inside quotes escapes the next byte), and each
// comma looks ahead only as far as the token after it, so a header of a
// megabyte of commas costs one pass, not one pass per comma.
func splitChallenges(v string) []string {
	var out []string
	start, inQ := 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inQ && c == '\\':
			i++
		case c == '"':
			inQ = !inQ
		case c == ',' && !inQ && schemeAt(v[i+1:]):
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}

// schemeAt reports whether s, what follows a comma, starts (after
// spaces) with a token and a space: a new challenge's scheme, not a
// parameter ("key=…") or the next list element.
func schemeAt(s string) bool {
	s = strings.TrimLeft(s, " ")
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			return i > 0
		case '=', ',', '"':
			return false
		}
	}
	return false
}

// authParams reads auth-param pairs: key=token or key="quoted".
func authParams(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 && len(out) < 32 {
		s = strings.TrimLeft(s, " ,")
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		k = strings.ToLower(strings.TrimSpace(k))
		rest = strings.TrimLeft(rest, " ")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			val, s = b.String(), rest[min(i+1, len(rest)):]
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			val, s = strings.TrimSpace(rest[:end]), rest[end:]
		}
		out[k] = val
	}
	return out
}

// ResourceMetadata is a protected resource's metadata (RFC 9728 §2).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// ServerMetadata is an authorization server's metadata (RFC 8414 §2).
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	// ClientIDMetadataDocumentSupported: the server accepts an https
	// URL as a client_id, fetching the client's metadata from it (the
	// MCP authorization spec's client ID metadata documents).
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported"`
	// IssParameterSupported: the authorization response carries iss
	// (RFC 9207), which the client must then check.
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

// DiscoverResource fetches the metadata of the protected resource at
// server (the MCP endpoint): from the challenge's resource_metadata when
// it names one, else from the well-known URIs, path-aware first, as the
// MCP authorization spec orders them. The metadata's resource must be
// the server's own (RFC 9728 §3.3): a document naming another resource
// is refused.
func DiscoverResource(ctx context.Context, hc *http.Client, server string, ch Challenge) (*ResourceMetadata, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fail("the server URL", err)
	}
	var tries []string
	if ch.ResourceMetadata != "" {
		// The server names where its metadata is, and the metadata names
		// where capbridge's client secret goes: it must not come in the
		// clear, nor from anywhere but the server itself over http.
		mu, err := url.Parse(ch.ResourceMetadata)
		if err != nil || mu.Host == "" || (mu.Scheme != "https" && (mu.Scheme != "http" || weborigin.Of(mu) != weborigin.Of(u))) {
			return nil, fail("the server's WWW-Authenticate", fmt.Errorf("names resource metadata at %q: not https, nor http on the server's own origin", truncate.Ellipsis(shownURL(ch.ResourceMetadata), 200)))
		}
		tries = []string{ch.ResourceMetadata}
	} else {
		if p := strings.TrimRight(u.Path, "/"); p != "" {
			tries = append(tries, root(u)+"/.well-known/oauth-protected-resource"+p)
		}
		tries = append(tries, root(u)+"/.well-known/oauth-protected-resource")
	}
	var last error
	for _, t := range tries {
		var md ResourceMetadata
		if last = getJSON(ctx, hc, t, &md); last != nil {
			if ch.ResourceMetadata != "" && errors.Is(last, errNoDocument) {
				// The challenge named it: its absence is the server's
				// fault, not a 2025-03-26 server's lack of one.
				last = fmt.Errorf("%w (named by the server's WWW-Authenticate)", last)
				return nil, fail("discovering the server's protected resource metadata", last)
			}
			continue
		}
		if len(md.AuthorizationServers) == 0 {
			return nil, fail("protected resource metadata at "+t, errors.New("names no authorization server"))
		}
		if md.Resource == "" {
			// REQUIRED, and what binds the document to this server (RFC
			// 9728 §2, §3.3).
			return nil, fail("protected resource metadata at "+t, errors.New("names no resource"))
		}
		if !sameResource(md.Resource, u) {
			return nil, fail("protected resource metadata at "+t, fmt.Errorf("is for the resource %q, not %s", md.Resource, shown(u)))
		}
		return &md, nil
	}
	if errors.Is(last, errNoDocument) {
		return nil, fail("discovering the server's protected resource metadata", errors.Join(ErrNoResourceMetadata, last))
	}
	return nil, fail("discovering the server's protected resource metadata", last)
}

// sameResource reports whether the metadata's resource identifies the
// server: the same origin, and a path the server's is within.
func sameResource(resource string, server *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || weborigin.Of(r) != weborigin.Of(server) {
		return false
	}
	rp, sp := strings.TrimRight(r.Path, "/"), strings.TrimRight(server.Path, "/")
	return rp == "" || sp == rp || strings.HasPrefix(sp, rp+"/")
}

// DiscoverServer fetches the metadata of the authorization server
// issuer, trying in order (the MCP authorization spec): for an issuer
// with a path, OAuth metadata with the path inserted, OpenID discovery
// with the path inserted, OpenID discovery with the path appended; for
// one without, OAuth metadata, then OpenID discovery. The document's
// issuer must be issuer (RFC 8414 §3.3). The issuer and every endpoint
// must be https, or http on a loopback host (the MCP authorization
// spec: all authorization server endpoints over HTTPS): client secrets,
// codes and tokens go there.
func DiscoverServer(ctx context.Context, hc *http.Client, issuer string) (*ServerMetadata, error) {
	// The operator named it: a loopback host may be reached in the clear.
	return discoverServer(ctx, hc, issuer, plainHTTP{loopback: true})
}

// discoverServer is DiscoverServer, where plain http may go where plain
// says.
func discoverServer(ctx context.Context, hc *http.Client, issuer string, plain plainHTTP) (*ServerMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || !reachable(u, plain) {
		return nil, fail("the authorization server", fmt.Errorf("%q is not an https URL (nor http where it may be: %s)", issuer, plain))
	}
	o, p := root(u), strings.TrimRight(u.Path, "/")
	tries := []string{o + "/.well-known/oauth-authorization-server", o + "/.well-known/openid-configuration"}
	if p != "" {
		tries = []string{o + "/.well-known/oauth-authorization-server" + p, o + "/.well-known/openid-configuration" + p, o + p + "/.well-known/openid-configuration"}
	}
	var last error
	for _, t := range tries {
		var md ServerMetadata
		if last = getJSON(ctx, hc, t, &md); last != nil {
			continue
		}
		if !sameIssuer(md.Issuer, issuer) {
			return nil, fail("authorization server metadata at "+t, fmt.Errorf("names the issuer %q, not %q", md.Issuer, issuer))
		}
		if md.TokenEndpoint == "" {
			return nil, fail("authorization server metadata at "+t, errors.New("has no token_endpoint"))
		}
		if err := md.endpointsOn(plain); err != nil {
			return nil, fail("authorization server metadata at "+t, err)
		}
		return &md, nil
	}
	return nil, fail("discovering the authorization server's metadata", last)
}

// sameIssuer reports whether a metadata document's issuer is the one
// asked for. RFC 8414 §3.3 has them identical; one trailing slash more
// or less is let through, as servers publish both forms of a bare
// origin.
func sameIssuer(got, want string) bool {
	return got == want || got == want+"/" || got+"/" == want
}

// plainHTTP says where secrets, codes and tokens may go over plain http:
// to origin ("" for none), a server the config allows plain http whose
// own authorization server it is; and to loopback hosts when whoever
// named the destination is local too (the operator, or a server on the
// loopback), never because a remote server named one: any local user
// may be listening on a loopback port.
type plainHTTP struct {
	origin   string
	loopback bool
}

func (p plainHTTP) String() string {
	switch {
	case p.origin != "" && p.loopback:
		return "on a loopback host or on " + p.origin
	case p.origin != "":
		return "on " + p.origin
	case p.loopback:
		return "on a loopback host"
	}
	return "nowhere, for a remote server"
}

// endpointsOn checks md's endpoints: each is https, or http where plain
// allows it.
func (md *ServerMetadata) endpointsOn(plain plainHTTP) error {
	for _, e := range []struct{ name, url string }{
		{"authorization_endpoint", md.AuthorizationEndpoint}, {"token_endpoint", md.TokenEndpoint},
		{"registration_endpoint", md.RegistrationEndpoint}, {"revocation_endpoint", md.RevocationEndpoint},
	} {
		if e.url == "" {
			continue
		}
		u, err := url.Parse(e.url)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("its %s %q is not an http(s) URL", e.name, e.url)
		}
		if !reachable(u, plain) {
			return fmt.Errorf("its %s %q is plain http where it may not be (only %s): secrets would cross in the clear", e.name, e.url, plain)
		}
	}
	return nil
}

// reachable reports whether secrets may go to u: https, or http where
// plain allows it.
func reachable(u *url.URL, plain plainHTTP) bool {
	switch u.Scheme {
	case "https":
		return true
	case "http":
		return (plain.loopback && loopback.Host(u.Hostname())) || (plain.origin != "" && weborigin.Of(u) == plain.origin)
	}
	return false
}

// errNoDocument: a metadata URI answered with an HTTP error status (404
// mostly): there is no document there, as opposed to a server that could
// not be reached.
var errNoDocument = errors.New("no document")

// ErrNoResourceMetadata: the server publishes no protected resource
// metadata at any well-known URI. A server of the 2025-03-26
// authorization spec does not; its authorization server is found at its
// own origin (Discover).
var ErrNoResourceMetadata = errors.New("mcpauth: the server publishes no protected resource metadata")

// Discovery is where a server's tokens come from: the resource they are
// for, the scopes it lists, and its authorization server's metadata.
type Discovery struct {
	// Resource is the resource indicator (RFC 8707) tokens are asked
	// for: the metadata's resource, else the server's URL.
	Resource        string
	ScopesSupported []string
	Server          *ServerMetadata
	// Legacy2025 is set when the server publishes no protected resource
	// metadata and its authorization server was found the 2025-03-26
	// way: at the server's origin, by metadata or the default endpoints.
	Legacy2025 bool
}

// Pinned checks the authorization server d found against the one the
// operator named (issuer; "" takes any): discovery follows the MCP
// server's metadata, and a client's secret, registered at one
// authorization server, must not reach another because an MCP server
// named it.
func (d *Discovery) Pinned(issuer string) error {
	if issuer == "" || sameIssuer(d.Server.Issuer, issuer) {
		return nil
	}
	return fail("the authorization server", fmt.Errorf("the server's metadata names %q, not the issuer configured (oauth.issuer = %q): refused", said(d.Server.Issuer, nil), issuer))
}

// Discover finds the authorization server of the MCP endpoint server:
// from its protected resource metadata (DiscoverResource, then
// DiscoverServer), or, for a server that publishes none (every
// well-known URI answering an error status), the 2025-03-26 way: the
// authorization server is the server's origin, its metadata at the
// origin's well-known URI (whose issuer must be of that origin), and
// without metadata the default endpoints /authorize, /token and
// /register there.
func Discover(ctx context.Context, hc *http.Client, server string, ch Challenge) (*Discovery, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fail("the server URL", err)
	}
	rm, err := DiscoverResource(ctx, hc, server, ch)
	if err == nil {
		plain := plainHTTP{loopback: loopback.Host(u.Hostname())}
		if u.Scheme == "http" {
			plain.origin = weborigin.Of(u) // the config allowed this server plain http
		}
		meta, err := discoverServer(ctx, hc, rm.AuthorizationServers[0], plain)
		if err != nil {
			return nil, err
		}
		d := &Discovery{Resource: rm.Resource, ScopesSupported: rm.ScopesSupported, Server: meta}
		if d.Resource == "" {
			d.Resource = shown(u)
		}
		return d, nil
	}
	if !errors.Is(err, ErrNoResourceMetadata) {
		return nil, err
	}
	o := root(u)
	d := &Discovery{Resource: shown(u), Legacy2025: true}
	var md ServerMetadata
	switch err := getJSON(ctx, hc, o+"/.well-known/oauth-authorization-server", &md); {
	case err == nil:
		iu, perr := url.Parse(md.Issuer)
		if perr != nil || weborigin.Of(iu) != weborigin.Of(u) || md.TokenEndpoint == "" {
			return nil, fail("authorization server metadata at "+o, fmt.Errorf("names the issuer %q and token endpoint %q: not of the server's origin %s", md.Issuer, md.TokenEndpoint, o))
		}
		if err := md.endpointsOn(plainHTTP{origin: weborigin.Of(u), loopback: loopback.Host(u.Hostname())}); err != nil {
			return nil, fail("authorization server metadata at "+o, err)
		}
		d.Server = &md
	case errors.Is(err, errNoDocument):
		d.Server = &ServerMetadata{Issuer: o, AuthorizationEndpoint: o + "/authorize", TokenEndpoint: o + "/token", RegistrationEndpoint: o + "/register"}
	default:
		return nil, fail("discovering the authorization server's metadata", err)
	}
	return d, nil
}

// getJSON fetches a JSON document, bounded.
func getJSON(ctx context.Context, hc *http.Client, target string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %w", target, resp.StatusCode, errNoDocument)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", target, err)
	}
	if len(b) > maxMetadata {
		return fmt.Errorf("GET %s: a document larger than %d bytes", target, maxMetadata)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: not a JSON object: %w", target, err)
	}
	return nil
}

// root is u's scheme and host as given: where its well-known documents
// are. Origins are compared with weborigin.Of.
func root(u *url.URL) string { return u.Scheme + "://" + u.Host }

func shown(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
