package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/mcpauth"
	"github.com/capbridge/capbridge/mcpwire"
)

// remoteProbe is doctor's step-by-step look at a remote server, apart
// from its boot, so that a failure is named where it happens: the name,
// the connection, TLS, the HTTP answer, the MCP era, authorization. A
// step after one that failed is not tried.
type remoteProbe struct {
	// Proxy is the proxy the URL is reached through (HTTPS_PROXY or
	// HTTP_PROXY, unless NO_PROXY excludes the host), without
	// credentials; the name and connection steps are then the proxy's.
	Proxy string      `json:"proxy,omitempty"`
	Steps []probeStep `json:"steps"`
}

// probeStep is one step: what it found, or why it failed and the fix.
type probeStep struct {
	Step   string   `json:"step"` // dns, connect, tls, http, era, auth
	OK     bool     `json:"ok"`
	MS     *float64 `json:"ms,omitempty"`
	Detail string   `json:"detail"`
	Fix    string   `json:"fix,omitempty"`
}

// probeWait bounds each network step of the probe.
const probeWait = 10 * time.Second

// probeRemote looks at the remote server s step by step. era is what the
// boot found ("" when it did not get that far), or the boot's error.
func probeRemote(s config.Server) *remoteProbe {
	rm := s.Remote
	p := &remoteProbe{Steps: []probeStep{}}
	at := fmt.Sprintf("[mcp.%s] (%s)", s.Name, location(s.File, s.Line))
	u, err := url.Parse(rm.URL)
	if err != nil {
		return p
	}
	add := func(step string, began time.Time, ok bool, detail, fix string) bool {
		ms := millis(time.Since(began))
		if ok {
			fix = ""
		}
		p.Steps = append(p.Steps, probeStep{Step: step, OK: ok, MS: &ms, Detail: detail, Fix: fix})
		return ok
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	target := net.JoinHostPort(u.Hostname(), port)
	dialHost, dialPort := u.Hostname(), port
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	if err != nil {
		add("dns", time.Now(), false, "the proxy in the environment is not a URL: "+err.Error(), "correct HTTPS_PROXY or HTTP_PROXY in capbridge's environment")
		return p
	}
	if proxy != nil {
		p.Proxy = (&url.URL{Scheme: proxy.Scheme, Host: proxy.Host}).String()
		dialHost, dialPort = proxy.Hostname(), proxy.Port()
		if dialPort == "" {
			dialPort = map[string]string{"http": "80", "https": "443"}[proxy.Scheme]
		}
	}
	what := "the url's host"
	if proxy != nil {
		what = "the proxy " + p.Proxy
	}

	// The name.
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	addrs, err := net.DefaultResolver.LookupHost(ctx, dialHost)
	cancel()
	if !add("dns", began, err == nil, resolved(dialHost, addrs, err), fmt.Sprintf("%s does not resolve: check url in %s (or HTTPS_PROXY), and this machine's DNS", what, at)) {
		return p
	}

	// The connection.
	began = time.Now()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(addrs[0], dialPort), probeWait)
	if !add("connect", began, err == nil, connected(addrs[0], dialPort, err), fmt.Sprintf("nothing accepts connections at %s: check url in %s and that the server (or proxy) runs; NO_PROXY lists hosts reached directly", what, at)) {
		return p
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * probeWait))
	if proxy != nil && u.Scheme == "https" {
		began = time.Now()
		err := connectThrough(conn, target, proxy.User)
		if !add("connect", began, err == nil, "CONNECT "+target+" through the proxy: "+okOr(err, "200"), "the proxy refuses to reach "+target+": check its rules, or list the host in NO_PROXY if it is reached directly") {
			return p
		}
	}

	// TLS, over that connection.
	if u.Scheme == "https" {
		began = time.Now()
		detail, err := handshake(conn, u.Hostname(), rm)
		if !add("tls", began, err == nil, detail, tlsFix(err, at)) {
			return p
		}
	}

	// The HTTP answer to what a client sends first, with the configured
	// headers and credentials.
	began = time.Now()
	status, ch, detail, err := httpProbe(s)
	fix := ""
	switch {
	case err != nil:
		fix = "the server closed or broke the exchange: check url in " + at + " and the server's logs"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Answered by the auth step below.
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		fix = "the url answers, but not as an MCP endpoint: check its path in " + at + " (often /mcp, or /sse for the legacy transport, which auto finds)"
	case status/100 == 5:
		fix = "the server (or a gateway before it) fails: check its logs; capbridge retries with backoff meanwhile"
	case strings.Contains(detail, "text/html"):
		fix = "the url is a web page (a login portal or a proxy's error page), not the MCP endpoint: check url in " + at
	}
	if !add("http", began, fix == "", detail, fix) {
		return p
	}

	// Authorization.
	began = time.Now()
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		how := "none asked for"
		switch {
		case rm.BearerTokenEnv != "" || rm.BearerTokenFile != "":
			how = "the configured bearer token was accepted"
		case rm.OAuth != nil && rm.OAuth.Grant != config.GrantAuthorizationCode:
			how = "not asked for without a token: " + rm.OAuth.Grant + " gets one when the server asks"
		}
		add("auth", began, true, how, "")
		return p
	}
	p.Steps = append(p.Steps, authStep(s, status, ch, at, began))
	return p
}

// authStep says what the server's 401 or 403 asks for and what to do.
func authStep(s config.Server, status int, ch mcpauth.Challenge, at string, began time.Time) probeStep {
	rm := s.Remote
	ms := millis(time.Since(began))
	st := probeStep{Step: "auth", MS: &ms, Detail: fmt.Sprintf("HTTP %d: the server wants a token", status)}
	if ch.ResourceMetadata != "" || ch.Scope != "" {
		st.Detail += fmt.Sprintf(" (OAuth: resource metadata %q, scopes %q)", ch.ResourceMetadata, ch.Scope)
	}
	switch {
	case rm.BearerTokenEnv != "" || rm.BearerTokenFile != "":
		st.Fix = "the server refused the configured bearer token: renew it where bearer_token_env or bearer_token_file in " + at + " reads it"
	case rm.OAuth != nil && rm.OAuth.Grant != config.GrantAuthorizationCode:
		// The client gets its token once challenged: the boot says
		// whether that worked.
		st.OK = true
		st.Detail += "; " + rm.OAuth.Grant + " gets one"
	default:
		store, err := mcpauth.DefaultStore()
		if err == nil {
			if _, err := store.Load(s.Name); err == nil {
				st.OK = true
				st.Detail += "; a saved login is sent from " + store.Dir
				return st
			}
		}
		st.Fix = fmt.Sprintf("log in: `capbridge login -c CONFIG %s` (a person's OAuth login, saved for serve), or give it a token with bearer_token_env, or client credentials in [mcp.%s.oauth]; docs/remote.md", s.Name, s.Name)
	}
	return st
}

func resolved(host string, addrs []string, err error) string {
	if err != nil {
		return host + ": " + err.Error()
	}
	return host + " is " + strings.Join(addrs, ", ")
}

func connected(addr, port string, err error) string {
	if err != nil {
		return err.Error()
	}
	return "connected to " + net.JoinHostPort(addr, port)
}

func okOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

// connectThrough asks an HTTP proxy on conn for a tunnel to target,
// with the proxy URL's credentials (user) when it has them, as serve's
// transport sends them.
func connectThrough(conn net.Conn, target string, user *url.Userinfo) error {
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if user != nil {
		pw, _ := user.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user.Username()+":"+pw)))
	}
	if err := req.Write(conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the proxy answered %s", resp.Status)
	}
	return nil
}

// handshake runs a TLS handshake on conn as the server's client would
// (the system roots and ca_file, the client certificate), and describes
// the server's certificate.
func handshake(conn net.Conn, host string, rm *config.Remote) (string, error) {
	// The TLS configuration serve uses, so that what doctor checks is
	// what serve will meet.
	cfg, err := mcpwire.TLSConfig(mcpwire.HTTPOptions{CAFile: rm.CAFile, CertFile: rm.ClientCert, KeyFile: rm.ClientKey})
	if err != nil {
		return "", err
	}
	cfg.ServerName, cfg.NextProtos = host, []string{"h2", "http/1.1"}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return err.Error(), err
	}
	cs := tc.ConnectionState()
	leaf := cs.PeerCertificates[0]
	return fmt.Sprintf("%s, %s, certificate for %s issued by %q, valid until %s", tls.VersionName(cs.Version), cmpOr(cs.NegotiatedProtocol, "http/1.1"),
		strings.Join(leaf.DNSNames, ", "), leaf.Issuer.CommonName, leaf.NotAfter.Format(time.DateOnly)), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func tlsFix(err error, at string) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &unknown):
		return "the server's certificate is issued by an authority this machine does not trust: give the private CA as ca_file in " + at
	case errors.As(err, &host):
		return "the server's certificate is for another name: check url's host in " + at
	case strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate"):
		return "the server asks for a client certificate: give client_cert and client_key in " + at
	}
	return "TLS failed (above): check url in " + at + ", ca_file, and the server's TLS configuration"
}

// httpProbe sends what a client sends first (server/discover, in the
// 2026-07-28 envelope) with the server's headers, through the client
// serve uses (its TLS, the proxy), and reports the answer's status.
func httpProbe(s config.Server) (int, mcpauth.Challenge, string, error) {
	rm := s.Remote
	hc, err := mcpwire.HTTPClient(mcpwire.HTTPOptions{CAFile: rm.CAFile, CertFile: rm.ClientCert, KeyFile: rm.ClientKey, MaxConnsPerHost: 1})
	if err != nil {
		return 0, mcpauth.Challenge{}, err.Error(), err
	}
	defer hc.CloseIdleConnections()
	headers, err := rm.Secrets(s.Name, os.LookupEnv, config.ReadSecretFile)
	if err != nil {
		return 0, mcpauth.Challenge{}, err.Error(), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"capbridge-doctor","version":"0"}}}}`
	method := http.MethodPost
	var rd io.Reader = strings.NewReader(body)
	if rm.Transport == config.TransportSSE {
		method, rd = http.MethodGet, nil
	}
	req, err := http.NewRequestWithContext(ctx, method, rm.URL, rd)
	if err != nil {
		return 0, mcpauth.Challenge{}, err.Error(), err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "server/discover")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, mcpauth.Challenge{}, err.Error(), err
	}
	defer resp.Body.Close()
	ch, _ := mcpauth.ParseChallenge(resp.Header.Values("Www-Authenticate"))
	ct := resp.Header.Get("Content-Type")
	detail := fmt.Sprintf("%s %s: %s (%s), over %s", method, shownURL(rm.URL), resp.Status, cmpOr(ct, "no content type"), resp.Proto)
	return resp.StatusCode, ch, detail, nil
}

// eraStep is the era the boot met the server in (a step of its own: a
// server can answer HTTP and still not speak MCP).
func eraStep(sr serverReport, bootErr string) probeStep {
	st := probeStep{Step: "era"}
	if sr.Protocol != "" {
		era := "the legacy era, initialize"
		if sr.Protocol == "2026-07-28" {
			era = "the 2026-07-28 era, server/discover"
		}
		st.OK, st.Detail = true, fmt.Sprintf("%s over %s: protocol %s, server %s", era, sr.Transport, sr.Protocol, strings.TrimSpace(sr.ServerName+" "+sr.ServerVersion))
		return st
	}
	st.Detail = "no MCP handshake completed: " + bootErr
	st.Fix = "check that url is the MCP endpoint and transport suits it (auto finds Streamable HTTP of every revision and the legacy HTTP+SSE transport)"
	return st
}
