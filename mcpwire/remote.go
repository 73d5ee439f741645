package mcpwire

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/httpcred"
	"github.com/capbridge/capbridge/internal/regular"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/internal/weborigin"
)

// Transport names how a remote server is reached.
type Transport uint8

const (
	// TransportAuto (the zero value) speaks Streamable HTTP and falls
	// back to the legacy HTTP+SSE transport by the spec's backwards
	// compatibility procedure: when the POST of initialize is answered
	// 400, 404 or 405.
	TransportAuto Transport = iota
	// TransportStreamable is Streamable HTTP only (2025-03-26 onwards,
	// and the stateless 2026-07-28 revision).
	TransportStreamable
	// TransportSSE is the legacy HTTP+SSE transport of 2024-11-05 only.
	TransportSSE
)

func (t Transport) String() string {
	switch t {
	case TransportStreamable:
		return "streamable-http"
	case TransportSSE:
		return "sse"
	}
	return "auto"
}

// Remote describes a server reached over HTTP (Dial).
type Remote struct {
	// URL is the MCP endpoint (Streamable HTTP) or the SSE endpoint
	// (HTTP+SSE): http or https.
	URL       string
	Transport Transport
	// Header is sent with every request: the operator's literal headers
	// and any credential resolved from the environment or a file. It is
	// never logged.
	Header http.Header
	// Client is the HTTP client; nil means HTTPClient(HTTPOptions{}).
	// Its CheckRedirect is replaced: redirects are followed only within
	// the URL's origin.
	Client *http.Client
	// Auth, when set, authorizes every request (OAuth) and is told of
	// each 401 and 403.
	Auth Authorizer
	// ShutdownTimeout bounds the DELETE that ends a session (2 s).
	ShutdownTimeout time.Duration
}

// Authorizer puts credentials on requests and answers the server's
// challenges. Its methods may be called concurrently.
type Authorizer interface {
	// Authorize sets the request's credentials in h (Authorization).
	Authorize(ctx context.Context, h http.Header) error
	// Challenge is told of a 401 or 403 answer to a request Authorize
	// prepared; it reports whether the request should be tried once
	// more (it refreshed or stepped up its token). An error is final for
	// the request and is what its caller sees.
	Challenge(ctx context.Context, resp *http.Response) (retry bool, err error)
}

// Defaults of the HTTP transports (docs/remote.md lists them).
const (
	defaultShutdownTimeout = 2 * time.Second
	// maxResumes bounds how often in a row one call's SSE stream is
	// resumed with Last-Event-ID without a message before the call
	// fails (its deadline bounds the rest).
	maxResumes = 8
	// maxAsidePosts bounds the posts no caller waits for (cancellations,
	// answers to the server's requests) in flight at once to one
	// server; more are dropped.
	maxAsidePosts = 64
	// minStreamWait is the least wait before a stream that ended is
	// resumed or opened again, whatever retry the server asked for.
	minStreamWait = 100 * time.Millisecond
	// maxRetryWait caps the retry a server asks for between
	// reconnections, so a huge value cannot park a call.
	maxRetryWait = 30 * time.Second
	// defaultRetryWait is the wait before reconnecting a long-lived
	// stream when the server named none; it doubles up to maxRetryWait
	// while the reconnections fail.
	defaultRetryWait = time.Second
	// maxSessionID caps the Mcp-Session-Id a server may assign.
	maxSessionID = 1 << 10
	// streamOpenWait bounds how long the handshake waits for the server
	// to answer the GET or listen stream's request: a server (or a proxy
	// before it) that holds the answer's headers back must not hold up
	// the boot; what it sends before then may be missed.
	streamOpenWait = 10 * time.Second
	// errorPreview caps the bytes of an unusable HTTP body quoted in
	// an error.
	errorPreview = 200
)

// ErrHTTP is matched by every *HTTPError.
var ErrHTTP = errors.New("mcpwire: HTTP exchange failed")

// ErrAuthorization is matched by the *HTTPError of a request the server
// refused (401 or 403) and the Authorizer could not answer: no
// credentials yet (a person's login is needed), a token the
// authorization server would not issue or refresh, scopes it would not
// grant. Its Unwrap is the Authorizer's error. It says nothing of the
// server's era or transport, so a handshake never falls back on it.
var ErrAuthorization = errors.New("mcpwire: authorization failed")

// ErrSessionExpired is the death reason when a Streamable HTTP server
// answers 404 to a request carrying its session: the session is gone,
// calls in flight fail, and the owner starts a new client (the spec: the
// client MUST start a new session). Requests are never replayed.
var ErrSessionExpired = errors.New("mcpwire: session expired")

// HTTPError is one HTTP exchange that could not carry its message: an
// error status, a body of the wrong type, a response that ended before
// the reply, a transport failure mid-response. It fails that call; the
// client lives on.
type HTTPError struct {
	// Method is the MCP method whose exchange failed.
	Method string
	// Status is the HTTP status (0: no response was read).
	Status int
	// ContentType is the response's media type, "" when none.
	ContentType string
	// Reason says what was wrong, in a few words.
	Reason string
	// Body is the start of an unusable body, as valid UTF-8 with
	// control characters replaced (bounded; may be empty).
	Body string
	// Err is the underlying error, if any.
	Err error
	// Unauthorized: the server refused the request and the Authorizer
	// could not answer (Err is its error); matches ErrAuthorization.
	Unauthorized bool
}

func (e *HTTPError) Error() string {
	s := "mcpwire: " + e.Method + ": "
	if e.Status != 0 {
		s += "HTTP " + strconv.Itoa(e.Status)
		if t := http.StatusText(e.Status); t != "" {
			s += " " + t
		}
		if e.ContentType != "" {
			s += " (" + e.ContentType + ")"
		}
		s += ": "
	}
	s += e.Reason
	if e.Body != "" {
		s += "; body: " + strconv.Quote(e.Body)
	}
	return s
}

// Is makes every HTTPError match ErrHTTP, and one the Authorizer could
// not answer ErrAuthorization.
func (e *HTTPError) Is(target error) bool {
	return target == ErrHTTP || (target == ErrAuthorization && e.Unauthorized)
}

// authorizedDo sends the request build makes, with auth's credentials;
// when the server refuses it (401, or 403) and auth answers the
// challenge with new credentials, it is built and sent once more. When
// auth cannot answer, the error is an *HTTPError matching
// ErrAuthorization, naming method. build is called for each attempt
// (a body is read once).
func authorizedDo(ctx context.Context, hc *http.Client, auth Authorizer, method string, build func() (*http.Request, error)) (*http.Response, error) {
	for try := 0; ; try++ {
		req, err := build()
		if err != nil {
			return nil, err
		}
		if auth != nil {
			if err := auth.Authorize(ctx, req.Header); err != nil {
				if ctx.Err() != nil {
					// The request's own end, not a refusal: it gave up
					// waiting behind another request's token fetch.
					return nil, context.Cause(ctx)
				}
				return nil, &HTTPError{Method: method, Reason: err.Error(), Err: err, Unauthorized: true}
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			// net/http's *url.Error quotes the whole URL, whose query may
			// carry an API key; the callers name the URL as shownURL.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, err
		}
		if auth == nil || try > 0 || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
			return resp, nil
		}
		retry, aerr := auth.Challenge(ctx, resp)
		if aerr != nil {
			drainBody(resp)
			if ctx.Err() != nil {
				return nil, context.Cause(ctx) // as for Authorize, above
			}
			return nil, &HTTPError{Method: method, Status: resp.StatusCode, ContentType: shownType(resp), Reason: aerr.Error(), Err: aerr, Unauthorized: true}
		}
		if !retry {
			return resp, nil
		}
		drainBody(resp)
	}
}

// Unwrap exposes the underlying error.
func (e *HTTPError) Unwrap() error { return e.Err }

// answerPreview is bodyPreview for the start b of resp's body, with the
// credentials of the request that drew it taken out (scrubSent): a
// server or proxy that echoes the request in an error page (a 502 that
// quotes its Authorization, a 404 that quotes the URL with its
// ?api_key=) must not put them into the errors, status, logs and audit
// lines that repeat the preview. It is how any text of a server's
// answer, a header's included, is quoted.
func answerPreview(resp *http.Response, b []byte) string {
	return bodyPreview(scrubSent(b, resp.Request))
}

// shownType is resp's media type as an error quotes it: a header of the
// answer, so as answerPreview quotes one.
func shownType(resp *http.Response) string {
	mt := mediaType(resp)
	if mt == "" {
		return ""
	}
	return answerPreview(resp, []byte(mt))
}

// maxScrubbedRequests bounds the chain of requests scrubSent follows
// back through redirects (sameOrigin allows 5).
const maxScrubbedRequests = 8

// minQueryValue is the shortest query value scrubSent takes out: a URL
// carries short values that are no secret ("json", "true", a date) and
// which an answer repeats for other reasons, while a key in a URL is
// longer.
const minQueryValue = 8

// scrubSent takes out of b what req, and each request redirected to it,
// carried:
//   - the value of any header but those of HTTP and MCP themselves, so a
//     configured header of any name counts, in each of httpcred.Parts'
//     forms ("Bearer TOKEN": the token alone; a Basic one's password);
//   - the URL's userinfo password (its user when it has none), and its
//     query's values, as sent and decoded (a value under minQueryValue
//     bytes is left).
//
// Each is replaced by "[redacted:WHERE]"; a value under 4 bytes is left,
// as replacing it would garble the text and hide nothing worth hiding.
func scrubSent(b []byte, req *http.Request) []byte {
	for n := 0; req != nil && n < maxScrubbedRequests; n++ {
		for name, vs := range req.Header {
			if protocolHeader(name) {
				continue
			}
			marker := "[redacted:" + name + "]"
			for _, v := range vs {
				for _, p := range httpcred.Parts(v) {
					b = scrub(b, p.Value, marker)
				}
			}
		}
		if u := req.URL; u != nil {
			if u.User != nil {
				pass, _ := u.User.Password()
				b = scrub(b, cmp.Or(pass, u.User.Username()), "[redacted:url userinfo]")
			}
			for part := range strings.SplitSeq(u.RawQuery, "&") {
				name, v, ok := strings.Cut(part, "=")
				if !ok {
					name, v = "", part // a bare value: ?KEY
				}
				if len(v) < minQueryValue {
					continue
				}
				if dec, err := url.QueryUnescape(name); err == nil {
					name = dec
				}
				marker := "[redacted:query " + name + "]"
				if name == "" {
					marker = "[redacted:query]"
				}
				b = scrub(b, v, marker)
				if dec, err := url.QueryUnescape(v); err == nil && dec != v {
					b = scrub(b, dec, marker)
				}
			}
		}
		if req.Response == nil {
			break
		}
		req = req.Response.Request
	}
	return b
}

// scrub replaces v in b by marker, and a start of v that b ends with
// (the preview's window may cut the echo short), copying b only when it
// holds either.
func scrub(b []byte, v, marker string) []byte {
	if len(v) < 4 {
		return b
	}
	if bytes.Contains(b, []byte(v)) {
		b = bytes.ReplaceAll(b, []byte(v), []byte(marker))
	}
	for k := min(len(v)-1, len(b)); k >= 4; k-- {
		if bytes.HasSuffix(b, []byte(v[:k])) {
			return append(slices.Clip(b[:len(b)-k]), marker...)
		}
	}
	return b
}

// protocolHeader reports whether the request header name (canonical) is
// one HTTP or MCP defines, which carries no credential.
func protocolHeader(name string) bool {
	switch name {
	case "Accept", "Accept-Encoding", "Content-Type", "Content-Length", "User-Agent", "Traceparent",
		"Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version", "Last-Event-Id":
		return true
	}
	return strings.HasPrefix(name, "Mcp-Param-")
}

// bodyPreview renders the start of an unusable body for an error.
func bodyPreview(b []byte) string {
	b = b[:min(len(b), errorPreview+utf8.UTFMax)]
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "�"))
	return truncate.Ellipsis(s, errorPreview)
}

// HTTPOptions configure HTTPClient.
type HTTPOptions struct {
	// CAFile is a PEM file of certificate authorities trusted beside the
	// system's.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM),
	// for servers that require mutual TLS.
	CertFile, KeyFile string
	// MaxConnsPerHost bounds the connections to the server (and the
	// idle ones kept); 0 means 64.
	MaxConnsPerHost int
}

// maxPEMFile bounds a certificate file HTTPClient reads: a whole system
// bundle of authorities is a few hundred KiB.
const maxPEMFile = 4 << 20

// TLSConfig is the TLS configuration HTTPClient uses: TLS 1.2 at least,
// the system's roots plus o.CAFile, and the client certificate when o
// names one. The files are read as regular.ReadFile reads them.
func TLSConfig(o HTTPOptions) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := regular.ReadFile(o.CAFile, maxPEMFile)
		if err != nil {
			return nil, fmt.Errorf("mcpwire: ca_file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mcpwire: ca_file %s holds no PEM certificate", o.CAFile)
		}
		tc.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		certPEM, err := regular.ReadFile(o.CertFile, maxPEMFile)
		if err != nil {
			return nil, fmt.Errorf("mcpwire: client certificate: %w", err)
		}
		keyPEM, err := regular.ReadFile(o.KeyFile, maxPEMFile)
		if err != nil {
			return nil, fmt.Errorf("mcpwire: client certificate's key: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("mcpwire: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// HTTPClient returns the HTTP client a remote server is reached with: a
// pooled keep-alive transport (HTTP/2 where TLS offers it; plain http
// with no proxy is exchanged by the caller itself, h1Transport), the system's
// roots plus CAFile, the client certificate when given, HTTPS_PROXY and
// NO_PROXY from the environment, and redirects followed only within the
// request's origin.
func HTTPClient(o HTTPOptions) (*http.Client, error) {
	tc, err := TLSConfig(o)
	if err != nil {
		return nil, err
	}
	conns := o.MaxConnsPerHost
	if conns <= 0 {
		conns = 64
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tc,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		// Below the 5 s keep-alive of Node's HTTP server, so an idle
		// connection is retired here before the server closes it under
		// a request.
		IdleConnTimeout:       4 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// The plain-http path's bound on a response head, over https
		// (HTTP/2's header list too) and proxies as well.
		MaxResponseHeaderBytes: maxResponseHead,
	}
	return &http.Client{Transport: &fastTransport{h1: newH1Transport(dialer.DialContext, conns), base: tr}, CheckRedirect: sameOrigin}, nil
}

// sameOrigin follows a redirect only within the first request's origin
// (scheme, host and port), at most 5 times: a credential sent to the
// server must never be carried to another origin, and a redirect
// elsewhere is a configuration to fix, not to follow.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("mcpwire: more than 5 redirects")
	}
	if weborigin.Of(req.URL) != weborigin.Of(via[0].URL) {
		return fmt.Errorf("mcpwire: redirect to another origin (%s) refused; set the server's url to where it lives", weborigin.Of(req.URL))
	}
	return nil
}

// shownURL is u without credentials, query or fragment: what a log line
// or an error may say of the endpoint (a query may carry an API key).
func shownURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return v.String()
}

// modernRefusal reports whether err is one of the JSON-RPC errors the
// 2026-07-28 revision defines for a request it cannot serve (those
// requirement knows): the server that sent it speaks Streamable HTTP, so
// the 400 it came with is no sign of the legacy HTTP+SSE transport (that
// binding's backwards compatibility falls back only on a 400, 404 or
// 405 without one).
func modernRefusal(err error) bool {
	var re *RequirementError
	return errors.As(requirement("initialize", err), &re)
}

// Dial connects to the remote server r and performs the MCP handshake
// as Connect does: over Streamable HTTP, the server/discover probe of
// the 2026-07-28 revision first (unless Config.Era says otherwise), then
// initialize; with TransportAuto, a server whose initialize POST is
// answered 400, 404 or 405 is met over the legacy HTTP+SSE transport. ctx
// bounds only the handshake. On failure nothing is left open and the
// error is a *DeadError.
func Dial(ctx context.Context, r Remote, cfg Config) (*Client, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not r.URL itself: its userinfo or query may be a credential.
		return nil, &DeadError{Reason: errors.New("mcpwire: the server's URL is not an http or https URL with a host")}
	}
	if r.Client == nil {
		if r.Client, err = HTTPClient(HTTPOptions{}); err != nil {
			return nil, &DeadError{Reason: err}
		}
	} else {
		hc := *r.Client
		hc.CheckRedirect = sameOrigin
		r.Client = &hc
	}
	if r.ShutdownTimeout <= 0 {
		r.ShutdownTimeout = defaultShutdownTimeout
	}
	if r.Transport == TransportSSE {
		return dialSSE(ctx, u, r, cfg)
	}
	c := newClient(cfg)
	h := newHTTPCarrier(c, u, r)
	c.car = h
	client, err := c.connect(ctx)
	if err == nil || r.Transport != TransportAuto || !h.fallback.Load() || ctx.Err() != nil || modernRefusal(err) {
		return client, err
	}
	c.log.Info().Str("url", shownURL(u)).Err(err).Msg("mcpwire: Streamable HTTP refused initialize; trying the legacy HTTP+SSE transport")
	return dialSSE(ctx, u, r, cfg)
}
