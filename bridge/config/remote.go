package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/loopback"
)

// Remote is how a server reached over HTTP is configured: [mcp.<name>]
// with url instead of command.
//
//	[mcp.linear]
//	url              = "https://mcp.linear.app/mcp"  # instead of command: a remote server
//	transport        = "auto"                        # auto | streamable-http | sse
//	headers          = { "X-Team" = "core" }         # literal headers
//	header_env       = { "X-Api-Key" = "LINEAR_KEY" } # a header's value from an environment variable
//	header_file      = { "X-Api-Key" = "/run/secrets/key" } # ... or from a file (read at each boot)
//	bearer_token_env = "LINEAR_TOKEN"                # Authorization: Bearer $LINEAR_TOKEN
//	bearer_token_file = "/run/secrets/token"         # ... or from a file
//	ca_file          = "/etc/ssl/private-ca.pem"     # trusted beside the system's roots
//	client_cert      = "/etc/capbridge/client.pem"   # mutual TLS
//	client_key       = "/etc/capbridge/client.key"
//	allow_http       = false                         # plain http:// to a host that is not loopback
type Remote struct {
	URL string
	// Transport is TransportAuto, TransportStreamable or TransportSSE.
	Transport string
	// Headers are sent as written; HeaderEnv and HeaderFile name where
	// a header's value comes from (a variable, checked at load; a file,
	// read at each boot). They never appear in logs or status.
	Headers    map[string]string
	HeaderEnv  map[string]string
	HeaderFile map[string]string
	// BearerTokenEnv and BearerTokenFile give Authorization: Bearer.
	BearerTokenEnv  string
	BearerTokenFile string
	CAFile          string
	ClientCert      string
	ClientKey       string
	AllowHTTP       bool
	// OAuth, when set, authorizes with the MCP authorization flow's
	// client credentials grant: the server's 401 says where the
	// authorization server is.
	OAuth *OAuth
}

// OAuth is a remote server's [mcp.<name>.oauth] table: a client of the
// server's authorization server, for the client credentials grant (a
// sidecar with no person present) or for a person's login (capbridge
// login; the default when no secret or key is given).
//
//	[mcp.linear.oauth]
//	grant             = "client_credentials"     # or "authorization_code"
//	client_id         = "capbridge-sidecar"
//	client_secret_env = "LINEAR_CLIENT_SECRET"   # or client_secret_file
//	private_key_file  = "/etc/capbridge/key.pem" # instead of a secret: private_key_jwt
//	key_id            = "k1"                     # the key's kid, if the server wants one
//	scopes            = ["read"]                 # when the challenge names none
//	client_metadata_url = "https://example.com/capbridge.json" # a login's client ID metadata document
//	issuer            = "https://auth.linear.app"  # the one authorization server the secret may go to
//	idp_issuer        = "https://idp.example.com" # grant = "id_jag": the enterprise IdP
//	idp_client_id     = "capbridge"
//	id_token_file     = "/run/capbridge/id-token" # the person's ID token from the IdP
type OAuth struct {
	// Grant is GrantClientCredentials (a secret or key is given),
	// GrantAuthorizationCode (a person logs in with capbridge login;
	// client_id and a secret only if capbridge was registered
	// beforehand) or GrantIDJAG (enterprise-managed authorization).
	Grant            string
	ClientID         string
	ClientSecretEnv  string
	ClientSecretFile string
	PrivateKeyFile   string
	KeyID            string
	Scopes           []string
	// ClientMetadataURL is where the operator publishes capbridge's
	// client ID metadata document (capbridge login
	// --client-metadata URL prints it): a login uses it as its
	// client_id where the authorization server takes such documents.
	ClientMetadataURL string
	// Issuer, when set, is the one authorization server the client's
	// credentials may go to: a server whose discovery names another is
	// refused, whatever its metadata says.
	Issuer string
	// The enterprise IdP of GrantIDJAG: its issuer, capbridge's client
	// there (a secret only for a confidential one), and the person's ID
	// token it issued (from a variable or a file, read at each token
	// exchange).
	IDPIssuer           string
	IDPClientID         string
	IDPClientSecretEnv  string
	IDPClientSecretFile string
	IDTokenEnv          string
	IDTokenFile         string
}

// The transports a remote server may be reached by.
const (
	TransportAuto       = "auto"
	TransportStreamable = "streamable-http"
	TransportSSE        = "sse"
)

var transports = []string{TransportAuto, TransportStreamable, TransportSSE}

var remoteSpec = []keySpec{
	{name: "url", kind: kindString, doc: "instead of command: the server's http(s) URL (the MCP endpoint, or the SSE endpoint of the legacy transport); plain http only to loopback unless allow_http"},
	{name: "transport", kind: kindEnum, enum: transports, doc: `with url: auto (Streamable HTTP, falling back to the legacy HTTP+SSE transport when initialize is refused 400/404/405), streamable-http or sse; default "auto"`},
	{name: "headers", kind: kindHeaders, doc: "with url: headers sent with every request, as written"},
	{name: "header_env", kind: kindHeaders, doc: "with url: headers whose value is an environment variable of capbridge's, by name (a variable that is not set is a config error)"},
	{name: "header_file", kind: kindHeaders, doc: "with url: headers whose value is a file's content (trailing newline dropped), read at each boot"},
	{name: "bearer_token_env", kind: kindString, doc: "with url: the environment variable holding the token sent as Authorization: Bearer"},
	{name: "bearer_token_file", kind: kindPath, doc: "with url: the file holding the token sent as Authorization: Bearer, read at each boot"},
	{name: "ca_file", kind: kindPath, doc: "with url: PEM certificate authorities trusted beside the system's"},
	{name: "client_cert", kind: kindPath, doc: "with url: a PEM client certificate, for mutual TLS (with client_key)"},
	{name: "client_key", kind: kindPath, doc: "with url: the PEM key of client_cert"},
	{name: "oauth", kind: kindOAuth, doc: "with url: a client of the server's authorization server, found by the MCP authorization discovery from the server's 401: for a person's login (grant = \"authorization_code\"; client_id and a secret if registered beforehand, client_metadata_url, scopes), the client credentials grant (client_id; client_secret_env, client_secret_file or private_key_file with key_id; scopes) or enterprise-managed authorization (grant = \"id_jag\"; the client's, plus idp_issuer, idp_client_id and id_token_env or id_token_file); issuer, when set, is the one authorization server the client's credentials may go to"},
	{name: "allow_http", kind: kindBool, doc: "with url: allow plain http:// to a host that is not loopback (the traffic and any token cross the network in clear); default false"},
}

// commandOnly are the keys that mean nothing for a remote server.
var commandOnly = []string{"args", "env", "inherit_env", "cwd", "stderr_to_caller"}

// remoteKey reads one key of remoteSpec into s, reporting false for a
// key that is not one.
func (r *reader) remoteKey(key, k string, v any, s *Server) bool {
	if s.Remote == nil {
		s.Remote = &Remote{Transport: TransportAuto}
	}
	rm := s.Remote
	switch k {
	case "url":
		r.str(key, v, &rm.URL)
	case "transport":
		r.enum(key, v, transports, &rm.Transport)
	case "headers":
		r.headers(key, v, &rm.Headers)
		for _, h := range slices.Sorted(maps.Keys(rm.Headers)) {
			r.template(key+"."+h, "headers."+h, rm.Headers[h], &s.Refs)
		}
	case "header_env":
		r.headers(key, v, &rm.HeaderEnv)
	case "header_file":
		r.headers(key, v, &rm.HeaderFile)
	case "bearer_token_env":
		r.str(key, v, &rm.BearerTokenEnv)
	case "bearer_token_file":
		r.path(key, v, &rm.BearerTokenFile)
	case "ca_file":
		r.path(key, v, &rm.CAFile)
	case "client_cert":
		r.path(key, v, &rm.ClientCert)
	case "client_key":
		r.path(key, v, &rm.ClientKey)
	case "allow_http":
		r.boolean(key, v, &rm.AllowHTTP)
	case "oauth":
		r.oauth(key, v, rm)
	default:
		return false
	}
	return true
}

// headerName is an HTTP field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reserved are the headers capbridge sets itself.
var reserved = []string{"accept", "content-type", "content-length", "host", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name", "last-event-id"}

func (r *reader) headers(key string, v any, dst *map[string]string) {
	t, ok := v.(map[string]any)
	if !ok {
		r.fail(key, `write it as a table: { "X-Name" = "value" }`, "must be a table of strings, not %s", describe(v))
		return
	}
	out := make(map[string]string, len(t))
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if msg, fix := headerNameProblem(k); msg != "" {
			r.fail(key+"."+k, fix, "%s", msg)
			continue
		}
		var s string
		if r.str(key+"."+k, t[k], &s) {
			if msg, fix := headerValueProblem(s); msg != "" {
				r.fail(key+"."+k, fix, "%s", msg)
				continue
			}
			out[k] = s
		}
	}
	*dst = out
}

// headerNameProblem says what is wrong with the name of a header a
// config sets, if anything: one that is not an HTTP field name, or one
// capbridge sets itself (a forged session or protocol version would
// break the exchange, or be taken by the server as capbridge's). Every
// reader of headers, capbridge.toml's and the editors', applies it.
func headerNameProblem(name string) (msg, fix string) {
	switch l := strings.ToLower(name); {
	case !headerName.MatchString(name):
		return fmt.Sprintf("bad header name %q", name), "a header name has letters, digits and -"
	case slices.Contains(reserved, l) || strings.HasPrefix(l, "mcp-param-"):
		return fmt.Sprintf("header %q is the protocol's", name), "remove it: capbridge sets this header itself"
	}
	return "", ""
}

// headerValueProblem says what is wrong with a header's value as
// written, if anything: a line break would end the header and start
// another, and no header may carry a NUL.
func headerValueProblem(v string) (msg, fix string) {
	switch {
	case strings.ContainsAny(v, "\r\n"):
		return "a header value holds a line break", "write the value on one line"
	case strings.IndexByte(v, 0) >= 0:
		return "contains a NUL character", "remove the NUL character"
	}
	return "", ""
}

// checkRemote holds a remote server's rules: url xor command, a usable
// URL, plain http only where it cannot be overheard, and every variable
// a header or token names set.
func (r *reader) checkRemote(key string, st map[string]any, s *Server) {
	rm := s.Remote
	if _, cmd := st["command"]; cmd {
		r.fail(key, "keep command (a server capbridge starts) or url (a remote server), not both", "has both command and url")
		return
	}
	for _, k := range commandOnly {
		if _, given := st[k]; given {
			r.fail(key+"."+k, "remove it: a remote server is not a process capbridge starts", "%s applies only to a server started by command", k)
		}
	}
	if rm == nil {
		// The loader drops a Remote with no URL: url was not a string
		// (str has said so) or an empty one, said here.
		if st["url"] == "" {
			r.fail(key+".url", urlFix, "is empty")
		}
		return
	}
	if msg, fix := checkURL(rm, rm.URL); msg != "" {
		r.fail(key+".url", fix, "%s", msg)
		return
	}
	if rm.BearerTokenEnv != "" && rm.BearerTokenFile != "" {
		r.fail(key+".bearer_token_env", "keep one of bearer_token_env and bearer_token_file", "both give the bearer token")
	}
	if (rm.ClientCert == "") != (rm.ClientKey == "") {
		r.fail(key+".client_cert", "give both client_cert and client_key", "a client certificate needs its key, and a key its certificate")
	}
	if rm.BearerTokenEnv != "" {
		r.envSet(key+".bearer_token_env", rm.BearerTokenEnv)
	}
	if o := rm.OAuth; o != nil && o.Grant == GrantAuthorizationCode {
		k := key + ".oauth"
		switch {
		case o.PrivateKeyFile != "" || o.KeyID != "":
			r.fail(k, "remove private_key_file and key_id, or use grant = \"client_credentials\"", "a login's client authenticates with a secret, if any")
		case o.ClientSecretEnv != "" && o.ClientSecretFile != "":
			r.fail(k, "keep one of client_secret_env and client_secret_file", "both give the client secret")
		case (o.ClientSecretEnv != "" || o.ClientSecretFile != "") && o.ClientID == "":
			r.fail(k, "add the client_id the secret belongs to", "a client secret without client_id")
		case o.ClientSecretEnv != "":
			r.envSet(k+".client_secret_env", o.ClientSecretEnv)
		case o.ClientSecretFile != "":
			r.readable(k+".client_secret_file", o.ClientSecretFile)
		}
		if o.ClientMetadataURL != "" {
			if msg := checkClientMetadataURL(o.ClientMetadataURL); msg != "" {
				r.fail(k+".client_metadata_url", `give the https URL where capbridge's client metadata document is published, such as "https://example.com/capbridge/client.json"`, "%s", msg)
			}
		}
		r.idpKeys(k, o, false)
	} else if o != nil {
		k := key + ".oauth"
		switch n := countSet(o.ClientSecretEnv, o.ClientSecretFile, o.PrivateKeyFile); {
		case o.ClientID == "":
			r.fail(k, `add client_id = "…" (the client registered at the server's authorization server)`, "no client_id")
		case n != 1:
			r.fail(k, "give one of client_secret_env, client_secret_file and private_key_file", "the client authenticates with exactly one secret or key; %d are given", n)
		case o.ClientSecretEnv != "":
			r.envSet(k+".client_secret_env", o.ClientSecretEnv)
		case o.ClientSecretFile != "":
			r.readable(k+".client_secret_file", o.ClientSecretFile)
		case o.PrivateKeyFile != "":
			r.readable(k+".private_key_file", o.PrivateKeyFile)
		}
		if o.ClientMetadataURL != "" {
			r.fail(k+".client_metadata_url", `remove it, or use grant = "authorization_code"`, "a client metadata document identifies a login's client, not a %s one", o.Grant)
		}
		r.idpKeys(k, o, o.Grant == GrantIDJAG)
		if o.KeyID != "" && o.PrivateKeyFile == "" {
			r.fail(k+".key_id", "remove it, or give private_key_file", "key_id names the key of private_key_file, which is not given")
		}
		if rm.BearerTokenEnv != "" || rm.BearerTokenFile != "" {
			r.fail(k, "keep oauth (tokens fetched and renewed) or a bearer token (fixed), not both", "both give the Authorization header")
		}
	}
	for _, h := range slices.Sorted(maps.Keys(rm.HeaderEnv)) {
		r.envSet(key+".header_env."+h, rm.HeaderEnv[h])
	}
	for _, h := range slices.Sorted(maps.Keys(rm.HeaderFile)) {
		r.readable(key+".header_file."+h, rm.HeaderFile[h])
	}
	if rm.BearerTokenFile != "" {
		r.readable(key+".bearer_token_file", rm.BearerTokenFile)
	}
}

// idpKeys checks the enterprise IdP's keys of an oauth table: required
// for grant = "id_jag", refused for the others.
func (r *reader) idpKeys(k string, o *OAuth, want bool) {
	given := countSet(o.IDPIssuer, o.IDPClientID, o.IDPClientSecretEnv, o.IDPClientSecretFile, o.IDTokenEnv, o.IDTokenFile) > 0
	switch {
	case !want && given:
		r.fail(k, `remove the idp_* and id_token_* keys, or use grant = "id_jag"`, "the enterprise IdP's keys apply only to grant = \"id_jag\"")
	case !want:
	case o.IDPIssuer == "":
		r.fail(k+".idp_issuer", `add idp_issuer = "https://…", the enterprise IdP's issuer`, "grant = \"id_jag\" needs the IdP")
	case o.IDPClientID == "":
		r.fail(k+".idp_client_id", `add idp_client_id = "…", capbridge's client at the IdP`, "grant = \"id_jag\" needs capbridge's client at the IdP")
	case countSet(o.IDTokenEnv, o.IDTokenFile) != 1:
		r.fail(k+".id_token_file", "give one of id_token_env and id_token_file", "grant = \"id_jag\" needs the person's ID token from the IdP, from one place")
	case countSet(o.IDPClientSecretEnv, o.IDPClientSecretFile) > 1:
		r.fail(k+".idp_client_secret_env", "keep one of idp_client_secret_env and idp_client_secret_file", "both give the IdP client's secret")
	default:
		if !issuerURL(o.IDPIssuer) {
			r.fail(k+".idp_issuer", "use the IdP's https issuer URL", "%s is not an https URL", quoteURL(o.IDPIssuer))
		}
		for _, e := range []struct{ key, v string }{{"id_token_env", o.IDTokenEnv}, {"idp_client_secret_env", o.IDPClientSecretEnv}} {
			if e.v != "" {
				r.envSet(k+"."+e.key, e.v)
			}
		}
		for _, f := range []struct{ key, v string }{{"id_token_file", o.IDTokenFile}, {"idp_client_secret_file", o.IDPClientSecretFile}} {
			if f.v != "" {
				r.readable(k+"."+f.key, f.v)
			}
		}
	}
}

// readable checks that the secret file path names can be read by
// capbridge now (it is read again at each boot, so a rotated file is
// picked up): a file that is missing or unreadable is a config error
// naming the server's key and the file, not a boot that fails later.
func (r *reader) readable(key, path string) {
	// As the boot reads it (ReadSecretFile): a FIFO no one writes, which
	// a plain open would wait on for ever, is refused here too. Empty is
	// the content's problem, said at boot.
	if _, err := ReadSecretFile(path); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said already
		}
		r.fail(key, fmt.Sprintf("make %s a readable file of capbridge's user, or name another file", path), "cannot read %s: %v", path, err)
	}
}

// checkClientMetadataURL says what is wrong with a client ID metadata
// document's URL, which is the client_id itself: https, a path of its
// own, no fragment, credentials or dot segments.
func checkClientMetadataURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "":
		return fmt.Sprintf("%s is not an https URL", quoteURL(s))
	case u.Path == "" || u.Path == "/":
		return fmt.Sprintf("%s has no path: the document must be at a path of its own", quoteURL(s))
	case u.Fragment != "" || u.User != nil || strings.Contains(u.Path, "/./") || strings.Contains(u.Path, "/../"):
		return fmt.Sprintf("%s carries a fragment, credentials or dot segments", quoteURL(s))
	}
	return ""
}

// envSet checks that variable name is set in capbridge's environment.
func (r *reader) envSet(key, name string) {
	if !envName.MatchString(name) {
		r.fail(key, "name an environment variable: letters, digits and '_'", "bad variable name %q", name)
		return
	}
	if _, ok := os.LookupEnv(name); !ok {
		r.fail(key, fmt.Sprintf("export %s in capbridge's environment (or use a *_file key)", name), "the variable %s is not set", name)
	}
}

// Secrets returns the headers every request to the remote server carries:
// the literal ones, then those read from the environment and from files,
// then the bearer token. Errors name the server, the key and the variable
// or file. lookup and readFile are os.LookupEnv and os.ReadFile outside
// tests.
func (rm *Remote) Secrets(server string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (map[string]string, error) {
	out := maps.Clone(rm.Headers)
	if out == nil {
		out = map[string]string{}
	}
	env := func(key, name string) (string, error) {
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("[mcp.%s] %s: the variable %s is not set", server, key, name)
		}
		return v, nil
	}
	file := func(key, path string) (string, error) {
		b, err := readFile(path)
		if err != nil {
			return "", fmt.Errorf("[mcp.%s] %s: %w", server, key, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if strings.ContainsAny(v, "\r\n") {
			return "", fmt.Errorf("[mcp.%s] %s: %s holds more than one line", server, key, path)
		}
		return v, nil
	}
	for _, h := range slices.Sorted(maps.Keys(rm.HeaderEnv)) {
		v, err := env("header_env."+h, rm.HeaderEnv[h])
		if err != nil {
			return nil, err
		}
		out[h] = v
	}
	for _, h := range slices.Sorted(maps.Keys(rm.HeaderFile)) {
		v, err := file("header_file."+h, rm.HeaderFile[h])
		if err != nil {
			return nil, err
		}
		out[h] = v
	}
	switch {
	case rm.BearerTokenEnv != "":
		v, err := env("bearer_token_env", rm.BearerTokenEnv)
		if err != nil {
			return nil, err
		}
		out["Authorization"] = "Bearer " + v
	case rm.BearerTokenFile != "":
		v, err := file("bearer_token_file", rm.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		out["Authorization"] = "Bearer " + v
	}
	return out, nil
}

// remoteEntry converts an editor's remote entry. A header whose whole
// value is one variable ("${KEY}", or "Bearer ${TOKEN}" for
// Authorization) becomes header_env (bearer_token_env), so the secret is
// read from the environment at each boot and never written into a file
// capbridge init produces; any other value is expanded as written.
func (l *editorLoader) remoteEntry(e *editorEntry, url string) (Server, bool) {
	n := len(l.errs)
	if !validName.MatchString(e.name) {
		l.fail(e.line, e.path, nameFix, "bad server name %q", e.name)
	}
	if e.Command != nil {
		l.fail(e.line, e.path, "keep command (a server capbridge starts) or url (a remote server), not both", "has both command and url")
	}
	var refs []Ref
	var secrets map[string]string
	// A per-user URL may carry its key in the path: the variable's value
	// is recorded, not the whole URL, which status and doctor show.
	rm := &Remote{URL: l.expandSecret(e, "url", url, &secrets, false), Transport: TransportAuto, BearerTokenEnv: e.bearerEnv, HeaderEnv: e.headerVars}
	switch e.Type {
	case "sse":
		rm.Transport = TransportSSE
	case "http", "streamable-http", "streamableHttp":
		rm.Transport = TransportStreamable
	}
	for _, h := range slices.Sorted(maps.Keys(e.Headers)) {
		v := e.Headers[h]
		// The checks capbridge.toml's headers get: the editor's file
		// reaches the same requests.
		if msg, fix := headerNameProblem(h); msg != "" {
			l.fail(e.line, e.path+".headers."+h, fix, "%s", msg)
			continue
		}
		if msg, fix := headerValueProblem(v); msg != "" {
			l.fail(e.line, e.path+".headers."+h, fix, "%s", msg)
			continue
		}
		if name, ok := soleVar(strings.TrimPrefix(v, "Bearer ")); ok && strings.EqualFold(h, "Authorization") && strings.HasPrefix(v, "Bearer ") && rm.BearerTokenEnv == "" {
			rm.BearerTokenEnv = name
			continue
		}
		if name, ok := soleVar(v); ok {
			if rm.HeaderEnv == nil {
				rm.HeaderEnv = map[string]string{}
			}
			rm.HeaderEnv[h] = name
			continue
		}
		if rm.Headers == nil {
			rm.Headers = map[string]string{}
		}
		if l.deferred(e, "headers."+h, v, &refs) {
			rm.Headers[h] = v
			continue
		}
		x := l.expandSecret(e, "headers."+h, v, &secrets, true)
		if strings.ContainsAny(x, "\r\n") {
			// A variable brought it; its value stays out of the message.
			l.fail(e.line, e.path+".headers."+h, "give the variable a one-line value", "a variable it uses expands to a value with a line break, which a header cannot carry")
			continue
		}
		rm.Headers[h] = x
	}
	// The error quotes the URL as written: expanded, a variable in it
	// would print its value.
	if msg, fix := checkURL(rm, url); msg != "" && !l.opts.Placeholders {
		l.fail(e.line, e.path+".url", fix, "%s", msg)
	}
	for _, name := range append(slices.Sorted(maps.Values(rm.HeaderEnv)), rm.BearerTokenEnv) {
		if _, ok := l.opts.LookupEnv(name); name != "" && !ok {
			l.fail(e.line, e.path, fmt.Sprintf("export %s before starting capbridge", name), "the variable %s is not set", name)
		}
	}
	s := NewServer(e.name, "")
	s.Remote, s.Refs, s.Secrets = rm, refs, secrets
	s.ToolsAllow, s.ToolsDeny = e.allow, e.deny
	s.File, s.Line = l.file, e.line
	return s, len(l.errs) == n
}

// soleVar reports whether v is exactly one ${VAR} or ${env:VAR}: an
// environment variable, not one of the editors' own (${workspaceFolder},
// ${userHome}), which are expanded as elsewhere.
func soleVar(v string) (string, bool) {
	if !strings.HasPrefix(v, "${") || !strings.HasSuffix(v, "}") {
		return "", false
	}
	inner := v[2 : len(v)-1]
	if inner == "workspaceFolder" || inner == "userHome" {
		return "", false
	}
	name := strings.TrimPrefix(inner, "env:")
	return name, envName.MatchString(name)
}

// urlFix is what to write where a remote server's URL is wrong.
const urlFix = `write the server's URL, such as "https://mcp.example.com/mcp"`

// checkURL says what is wrong with a remote server's URL, if anything;
// written is the URL as the file has it, which a message may quote.
func checkURL(rm *Remote, written string) (msg, fix string) {
	fix = urlFix
	u, err := url.Parse(rm.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return fmt.Sprintf("%s is not an http or https URL", quoteURL(written)), fix
	case u.User != nil:
		return "the URL carries a user or password", "put the credential in header_env or bearer_token_env, where it is kept out of logs"
	case u.Scheme == "http" && !rm.AllowHTTP && !loopback.Host(u.Hostname()):
		return fmt.Sprintf("plain http to %s, which is not a loopback address: the traffic and any token would cross the network in clear", u.Hostname()), "use https, or set allow_http = true if the network path is trusted"
	}
	return "", ""
}

// quoteURL is s as an error may quote it. A URL's userinfo, query and
// fragment are where a password, an API key or a token is carried, so
// they are left out ("…" marks a query or fragment dropped); a value
// that does not parse as a URL cannot be told apart into parts, so none
// of it is quoted.
func quoteURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "the value"
	}
	if u.Opaque != "" || u.Host == "" {
		// "scheme:rest", or a mistyped "//" ("https:/…", "https//…"):
		// with no host to part it from, the rest may be
		// "user:password@host".
		if u.Scheme == "" {
			return "the value"
		}
		return strconv.Quote(u.Scheme + ":…")
	}
	query, fragment := u.RawQuery != "" || u.ForceQuery, u.Fragment != ""
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	shown := u.String()
	if query {
		shown += "?…"
	}
	if fragment {
		shown += "#…"
	}
	return strconv.Quote(shown)
}

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// The OAuth grants a remote server's oauth table may name.
const (
	GrantClientCredentials = "client_credentials"
	GrantAuthorizationCode = "authorization_code"
	// GrantIDJAG is enterprise-managed authorization: the person's ID
	// token from the enterprise IdP is exchanged there for an identity
	// assertion grant (ID-JAG), which the server's authorization server
	// takes for a token (the JWT bearer grant).
	GrantIDJAG = "id_jag"
)

var oauthKeys = []string{"grant", "client_id", "client_secret_env", "client_secret_file", "private_key_file", "key_id", "scopes",
	"client_metadata_url", "issuer", "idp_issuer", "idp_client_id", "idp_client_secret_env", "idp_client_secret_file", "id_token_env", "id_token_file"}

func (r *reader) oauth(key string, v any, rm *Remote) {
	t, ok := r.table(key, v)
	if !ok {
		return
	}
	o := &OAuth{}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		k2 := key + "." + k
		switch k {
		case "grant":
			r.enum(k2, t[k], []string{GrantClientCredentials, GrantAuthorizationCode, GrantIDJAG}, &o.Grant)
		case "client_id":
			r.str(k2, t[k], &o.ClientID)
		case "client_secret_env":
			r.str(k2, t[k], &o.ClientSecretEnv)
		case "client_secret_file":
			r.path(k2, t[k], &o.ClientSecretFile)
		case "private_key_file":
			r.path(k2, t[k], &o.PrivateKeyFile)
		case "key_id":
			r.str(k2, t[k], &o.KeyID)
		case "scopes":
			r.strs(k2, t[k], &o.Scopes)
		case "client_metadata_url":
			r.str(k2, t[k], &o.ClientMetadataURL)
		case "issuer":
			r.str(k2, t[k], &o.Issuer)
			if !issuerURL(o.Issuer) {
				r.fail(k2, "use the authorization server's https issuer URL", "%s is not an https URL", quoteURL(o.Issuer))
			}
		case "idp_issuer":
			r.str(k2, t[k], &o.IDPIssuer)
		case "idp_client_id":
			r.str(k2, t[k], &o.IDPClientID)
		case "idp_client_secret_env":
			r.str(k2, t[k], &o.IDPClientSecretEnv)
		case "idp_client_secret_file":
			r.path(k2, t[k], &o.IDPClientSecretFile)
		case "id_token_env":
			r.str(k2, t[k], &o.IDTokenEnv)
		case "id_token_file":
			r.path(k2, t[k], &o.IDTokenFile)
		default:
			r.unknown(k2, k, oauthKeys)
		}
	}
	if o.Grant == "" {
		o.Grant = GrantAuthorizationCode
		if countSet(o.ClientSecretEnv, o.ClientSecretFile, o.PrivateKeyFile) > 0 {
			o.Grant = GrantClientCredentials
		}
	}
	rm.OAuth = o
}

// issuerURL reports whether s can name an OAuth issuer the operator
// configures: https, or http on a loopback host.
func issuerURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "https" || (u.Scheme == "http" && loopback.Host(u.Hostname())))
}

// ClientSecret resolves the OAuth client's secret (from its variable or
// file); "" when the client signs with a key instead.
func (o *OAuth) ClientSecret(server string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	return secretOf(server, "client_secret", o.ClientSecretEnv, o.ClientSecretFile, lookup, readFile)
}

// IDPClientSecret resolves the secret of capbridge's client at the
// enterprise IdP; "" for a public client.
func (o *OAuth) IDPClientSecret(server string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	return secretOf(server, "idp_client_secret", o.IDPClientSecretEnv, o.IDPClientSecretFile, lookup, readFile)
}

// IDToken resolves the person's ID token from the enterprise IdP.
func (o *OAuth) IDToken(server string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	return secretOf(server, "id_token", o.IDTokenEnv, o.IDTokenFile, lookup, readFile)
}

// secretOf reads a secret from the variable env or the file file (one
// of them set, or neither: ""), naming the server's key in its error.
func secretOf(server, key, env, file string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	switch {
	case env != "":
		v, ok := lookup(env)
		if !ok {
			return "", fmt.Errorf("[mcp.%s] oauth.%s_env: the variable %s is not set", server, key, env)
		}
		return v, nil
	case file != "":
		b, err := readFile(file)
		if err != nil {
			return "", fmt.Errorf("[mcp.%s] oauth.%s_file: %w", server, key, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}
