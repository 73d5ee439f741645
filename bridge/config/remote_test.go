package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRemoteServer(t *testing.T) {
	t.Setenv("CAPBRIDGE_TEST_TOKEN", "tok")
	t.Setenv("CAPBRIDGE_TEST_KEY", "key")
	cfg, err := Load("c.toml", []byte(`
[mcp.linear]
url = "https://mcp.example.com/mcp"
transport = "streamable-http"
headers = { "X-Team" = "core" }
header_env = { "X-Api-Key" = "CAPBRIDGE_TEST_KEY" }
bearer_token_env = "CAPBRIDGE_TEST_TOKEN"
ca_file = "/etc/ca.pem"

[mcp.local]
url = "http://127.0.0.1:8080/mcp"
`))
	if err != nil {
		t.Fatal(err)
	}
	rm := cfg.Servers[0].Remote
	if rm == nil || rm.URL != "https://mcp.example.com/mcp" || rm.Transport != TransportStreamable || rm.CAFile != "/etc/ca.pem" {
		t.Fatalf("remote = %+v", rm)
	}
	if cfg.Servers[1].Remote.Transport != TransportAuto {
		t.Fatalf("default transport %q", cfg.Servers[1].Remote.Transport)
	}
	h, err := rm.Secrets("linear", os.LookupEnv, os.ReadFile)
	if err != nil || h["Authorization"] != "Bearer tok" || h["X-Api-Key"] != "key" || h["X-Team"] != "core" {
		t.Fatalf("Secrets = %v, %v", h, err)
	}
}

func TestRemoteServerMistakes(t *testing.T) {
	for _, tc := range []struct{ name, toml, key, msg string }{
		{"both", "command = \"x\"\nurl = \"https://h/mcp\"", "mcp.s", "has both command and url"},
		{"neither", "restart = \"never\"", "mcp.s", "no command and no url"},
		{"not http", `url = "ftp://h/x"`, "mcp.s.url", "is not an http or https URL"},
		// A url with no usable string must be an error at its line, never
		// a Remote without URL reaching the URL check.
		{"empty url", `url = ""`, "mcp.s.url", "is empty"},
		{"url a number", `url = 5`, "mcp.s.url", "must be a string"},
		{"url a list", `url = ["https://h/mcp"]`, "mcp.s.url", "must be a string"},
		{"url a table", `url = { a = "https://h/mcp" }`, "mcp.s.url", "must be a string"},
		{"empty url with remote keys", "url = \"\"\nbearer_token_env = \"HOME\"", "mcp.s.url", "is empty"},
		{"empty url beside command", "url = \"\"\ncommand = \"x\"", "mcp.s", "has both command and url"},
		{"clear text", `url = "http://example.com/mcp"`, "mcp.s.url", "not a loopback address"},
		{"user in url", `url = "https://u:p@h/mcp"`, "mcp.s.url", "carries a user or password"},
		{"unset variable", "url = \"https://h/mcp\"\nbearer_token_env = \"CAPBRIDGE_SURELY_UNSET\"", "mcp.s.bearer_token_env", "the variable CAPBRIDGE_SURELY_UNSET is not set"},
		{"unset header variable", "url = \"https://h/mcp\"\nheader_env = { \"X-K\" = \"CAPBRIDGE_SURELY_UNSET\" }", "mcp.s.header_env.X-K", "not set"},
		{"reserved header", "url = \"https://h/mcp\"\nheaders = { \"Mcp-Session-Id\" = \"x\" }", "mcp.s.headers.Mcp-Session-Id", "is the protocol's"},
		{"bad header", "url = \"https://h/mcp\"\nheaders = { \"X K\" = \"x\" }", "mcp.s.headers.X K", "bad header name"},
		{"command key", "url = \"https://h/mcp\"\nargs = [\"-y\"]", "mcp.s.args", "applies only to a server started by command"},
		{"cert without key", "url = \"https://h/mcp\"\nclient_cert = \"/c.pem\"", "mcp.s.client_cert", "needs its key"},
		{"transport", "url = \"https://h/mcp\"\ntransport = \"websocket\"", "mcp.s.transport", "bad value"},
		// A secret that cannot be read is the config's mistake, found at
		// load with the server's key and the file, not a boot that fails.
		{"missing bearer file", "url = \"https://h/mcp\"\nbearer_token_file = \"/nonexistent/token\"", "mcp.s.bearer_token_file", "cannot read /nonexistent/token: no such file or directory"},
		{"missing header file", "url = \"https://h/mcp\"\nheader_file = { \"X-K\" = \"/nonexistent/key\" }", "mcp.s.header_file.X-K", "cannot read /nonexistent/key"},
		{"unreadable header file", "url = \"https://h/mcp\"\nheader_file = { \"X-K\" = \"/\" }", "mcp.s.header_file.X-K", "cannot read /: not a regular file but a directory"},
		{"missing client secret file", "url = \"https://h/mcp\"\noauth = { client_id = \"c\", client_secret_file = \"/nonexistent/s\" }", "mcp.s.oauth.client_secret_file", "cannot read /nonexistent/s"},
		{"missing login secret file", "url = \"https://h/mcp\"\noauth = { grant = \"authorization_code\", client_id = \"c\", client_secret_file = \"/nonexistent/s\" }", "mcp.s.oauth.client_secret_file", "cannot read /nonexistent/s"},
		{"missing key file", "url = \"https://h/mcp\"\noauth = { client_id = \"c\", private_key_file = \"/nonexistent/k.pem\" }", "mcp.s.oauth.private_key_file", "cannot read /nonexistent/k.pem"},
		{"unset client secret variable", "url = \"https://h/mcp\"\noauth = { client_id = \"c\", client_secret_env = \"CAPBRIDGE_SURELY_UNSET\" }", "mcp.s.oauth.client_secret_env", "the variable CAPBRIDGE_SURELY_UNSET is not set"},
		{"metadata document over http", "url = \"https://h/mcp\"\noauth = { client_metadata_url = \"http://example.com/c.json\" }", "mcp.s.oauth.client_metadata_url", "is not an https URL"},
		{"metadata document without a path", "url = \"https://h/mcp\"\noauth = { client_metadata_url = \"https://example.com\" }", "mcp.s.oauth.client_metadata_url", "has no path"},
		{"metadata document for a sidecar", "url = \"https://h/mcp\"\noauth = { client_id = \"c\", client_secret_env = \"HOME\", client_metadata_url = \"https://example.com/c.json\" }", "mcp.s.oauth.client_metadata_url", "identifies a login's client"},
		{"issuer over http", "url = \"https://h/mcp\"\noauth = { client_id = \"c\", client_secret_env = \"HOME\", issuer = \"http://as.example\" }", "mcp.s.oauth.issuer", "is not an https URL"},
		{"id_jag without an IdP", "url = \"https://h/mcp\"\noauth = { grant = \"id_jag\", client_id = \"c\", client_secret_env = \"HOME\" }", "mcp.s.oauth.idp_issuer", "needs the IdP"},
		{"id_jag without an ID token", "url = \"https://h/mcp\"\noauth = { grant = \"id_jag\", client_id = \"c\", client_secret_env = \"HOME\", idp_issuer = \"https://idp\", idp_client_id = \"i\" }", "mcp.s.oauth.id_token_file", "the person's ID token"},
		{"id_jag, missing ID token file", "url = \"https://h/mcp\"\noauth = { grant = \"id_jag\", client_id = \"c\", client_secret_env = \"HOME\", idp_issuer = \"https://idp\", idp_client_id = \"i\", id_token_file = \"/nonexistent/t\" }", "mcp.s.oauth.id_token_file", "cannot read /nonexistent/t"},
		{"id_jag, IdP over http", "url = \"https://h/mcp\"\noauth = { grant = \"id_jag\", client_id = \"c\", client_secret_env = \"HOME\", idp_issuer = \"http://idp.example\", idp_client_id = \"i\", id_token_env = \"HOME\" }", "mcp.s.oauth.idp_issuer", "is not an https URL"},
		{"IdP keys without id_jag", "url = \"https://h/mcp\"\noauth = { client_id = \"c\", client_secret_env = \"HOME\", idp_issuer = \"https://idp\" }", "mcp.s.oauth", "apply only to grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("c.toml", []byte("[mcp.s]\n"+tc.toml+"\n"))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v", err)
			}
			for _, e := range list {
				if e.Key == tc.key && strings.Contains(e.Msg, tc.msg) && e.Line > 0 && e.Fix != "" {
					return
				}
			}
			t.Fatalf("no error at %s saying %q: %v", tc.key, tc.msg, err)
		})
	}
	// plain http to a host elsewhere, said explicitly
	if _, err := Load("c.toml", []byte("[mcp.s]\nurl = \"http://example.com/mcp\"\nallow_http = true\n")); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteSecretsErrors(t *testing.T) {
	rm := &Remote{HeaderFile: map[string]string{"X-K": "/nonexistent/key"}}
	_, err := rm.Secrets("s", os.LookupEnv, os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "[mcp.s] header_file.X-K") || !strings.Contains(err.Error(), "/nonexistent/key") {
		t.Fatalf("err = %v", err)
	}
	rm = &Remote{BearerTokenEnv: "CAPBRIDGE_SURELY_UNSET"}
	if _, err := rm.Secrets("s", os.LookupEnv, os.ReadFile); err == nil || !strings.Contains(err.Error(), "[mcp.s] bearer_token_env: the variable CAPBRIDGE_SURELY_UNSET is not set") {
		t.Fatalf("err = %v", err)
	}
}

func TestRemoteOAuth(t *testing.T) {
	t.Setenv("CAPBRIDGE_TEST_SECRET", "s")
	key := filepath.Join(t.TempDir(), "k.pem")
	if err := os.WriteFile(key, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("c.toml", []byte(`
[mcp.s]
url = "https://h/mcp"
oauth = { client_id = "c", client_secret_env = "CAPBRIDGE_TEST_SECRET", scopes = ["read"], issuer = "https://as.example" }

[mcp.k]
url = "https://h/mcp"
[mcp.k.oauth]
client_id = "c"
private_key_file = "`+key+`"
key_id = "k1"
`))
	if err != nil {
		t.Fatal(err)
	}
	k, s := cfg.Servers[0].Remote.OAuth, cfg.Servers[1].Remote.OAuth
	if s.ClientID != "c" || s.Scopes[0] != "read" || s.Issuer != "https://as.example" || k.PrivateKeyFile != key || k.KeyID != "k1" || k.Issuer != "" {
		t.Fatalf("oauth = %+v, %+v", s, k)
	}
	if v, err := s.ClientSecret("s", os.LookupEnv, os.ReadFile); err != nil || v != "s" {
		t.Fatalf("ClientSecret = %q, %v", v, err)
	}
	if s.Grant != GrantClientCredentials || k.Grant != GrantClientCredentials {
		t.Fatalf("grants %q %q, want client_credentials for a secret and a key", s.Grant, k.Grant)
	}
	login, err := Load("c.toml", []byte("[mcp.l]\nurl = \"https://h/mcp\"\noauth = { scopes = [\"read\"] }\n"))
	if err != nil || login.Servers[0].Remote.OAuth.Grant != GrantAuthorizationCode {
		t.Fatalf("a login's table: %v", err)
	}
	for _, tc := range []struct{ name, toml, key, msg string }{
		{"no client", `oauth = { client_secret_env = "CAPBRIDGE_TEST_SECRET" }`, "mcp.s.oauth", "no client_id"},
		{"two secrets", `oauth = { client_id = "c", client_secret_env = "CAPBRIDGE_TEST_SECRET", private_key_file = "/k" }`, "mcp.s.oauth", "exactly one secret or key; 2 are given"},
		{"no secret", `oauth = { grant = "client_credentials", client_id = "c" }`, "mcp.s.oauth", "0 are given"},
		{"login with a key", `oauth = { grant = "authorization_code", private_key_file = "/k" }`, "mcp.s.oauth", "authenticates with a secret, if any"},
		{"login secret without client", `oauth = { grant = "authorization_code", client_secret_env = "CAPBRIDGE_TEST_SECRET" }`, "mcp.s.oauth", "without client_id"},
		{"unset secret", `oauth = { client_id = "c", client_secret_env = "CAPBRIDGE_SURELY_UNSET" }`, "mcp.s.oauth.client_secret_env", "not set"},
		{"key id alone", `oauth = { client_id = "c", client_secret_env = "CAPBRIDGE_TEST_SECRET", key_id = "k" }`, "mcp.s.oauth.key_id", "not given"},
		{"unknown", `oauth = { client_id = "c", client_secret_env = "CAPBRIDGE_TEST_SECRET", grnat = "x" }`, "mcp.s.oauth.grnat", "unknown key"},
		{"bad grant", `oauth = { client_id = "c", grant = "password" }`, "mcp.s.oauth.grant", "bad value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("c.toml", []byte("[mcp.s]\nurl = \"https://h/mcp\"\n"+tc.toml+"\n"))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v", err)
			}
			for _, e := range list {
				if e.Key == tc.key && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Fatalf("no error at %s saying %q: %v", tc.key, tc.msg, err)
		})
	}
}

// grant = "id_jag" with its IdP: the ID token and the IdP client's secret
// are read from where the config names, at each use.
func TestRemoteOAuthIDJAG(t *testing.T) {
	dir := t.TempDir()
	tokenFile, secretFile := filepath.Join(dir, "id-token"), filepath.Join(dir, "secret")
	for p, v := range map[string]string{tokenFile: "eyJ.id.token\n", secretFile: "client-secret\n"} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CAPBRIDGE_TEST_IDP_SECRET", "idp-secret")
	cfg, err := Load("c.toml", []byte(`
[mcp.s]
url = "https://h/mcp"
[mcp.s.oauth]
grant = "id_jag"
client_id = "c"
client_secret_file = "`+secretFile+`"
idp_issuer = "https://idp.example"
idp_client_id = "capbridge"
idp_client_secret_env = "CAPBRIDGE_TEST_IDP_SECRET"
id_token_file = "`+tokenFile+`"
`))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Servers[0].Remote.OAuth
	if o.Grant != GrantIDJAG || o.IDPIssuer != "https://idp.example" || o.IDPClientID != "capbridge" {
		t.Fatalf("oauth = %+v", o)
	}
	if v, err := o.IDToken("s", os.LookupEnv, os.ReadFile); err != nil || v != "eyJ.id.token" {
		t.Fatalf("IDToken = %q, %v", v, err)
	}
	if v, err := o.IDPClientSecret("s", os.LookupEnv, os.ReadFile); err != nil || v != "idp-secret" {
		t.Fatalf("IDPClientSecret = %q, %v", v, err)
	}
	if v, err := o.ClientSecret("s", os.LookupEnv, os.ReadFile); err != nil || v != "client-secret" {
		t.Fatalf("ClientSecret = %q, %v", v, err)
	}
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	if _, err := o.IDToken("s", os.LookupEnv, os.ReadFile); err == nil || !strings.Contains(err.Error(), "[mcp.s] oauth.id_token_file") {
		t.Fatalf("a token file gone since: %v", err)
	}
}

// A URL's error is printed to terminals and logs: it quotes the URL
// without the userinfo, query and fragment where credentials are
// carried, not even a variable's expanded value, and nothing of a value
// that does not parse.
func TestRemoteURLErrorHidesCredentials(t *testing.T) {
	const secret = "SECRET-KEY-123"
	for _, tc := range []struct {
		name, file, doc, key, shown string
	}{
		{"bad scheme, query", "c.toml", `url = "htps://mcp.example.com/mcp?api_key=` + secret + `"`, "mcp.s.url", `"htps://mcp.example.com/mcp?…" is not an http or https URL`},
		{"no host, query", "c.toml", `url = "https:/mcp.example.com/mcp?api_key=` + secret + `"`, "mcp.s.url", `"https:…" is not`},
		{"no host, password", "c.toml", `url = "https://user:` + secret + `@/mcp"`, "mcp.s.url", `"https:…" is not`},
		{"one slash, password", "c.toml", `url = "https:/alice:` + secret + `@mcp.example.com/mcp"`, "mcp.s.url", `"https:…" is not`},
		{"no colon, password", "c.toml", `url = "https//alice:` + secret + `@mcp.example.com/mcp"`, "mcp.s.url", "the value is not"},
		{"fragment", "c.toml", `url = "ftp://h/mcp#` + secret + `"`, "mcp.s.url", `"ftp://h/mcp#…" is not`},
		{"opaque", "c.toml", `url = "https:user:` + secret + `@h"`, "mcp.s.url", `"https:…" is not`},
		{"unparsable", "c.toml", `url = "https://h:` + secret + `/%zz"`, "mcp.s.url", "the value is not"},
		{"metadata document", "c.toml", "url = \"https://h/mcp\"\noauth = { client_metadata_url = \"http://example.com/c.json?k=" + secret + "\" }", "mcp.s.oauth.client_metadata_url", `"http://example.com/c.json?…" is not an https URL`},
		{"editor, expanded query", "mcp.json", `{"mcpServers": {"s": {"type": "http", "url": "htps://mcp.example.com/mcp?key=${API_KEY}"}}}`, "mcpServers.s.url", `"htps://mcp.example.com/mcp?…" is not`},
		{"editor, expanded path", "mcp.json", `{"mcpServers": {"s": {"type": "http", "url": "htps://mcp.example.com/${API_KEY}/mcp"}}}`, "mcpServers.s.url", `"htps://mcp.example.com/$%7BAPI_KEY%7D/mcp" is not`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.file == "c.toml" {
				_, err = Load(tc.file, []byte("[mcp.s]\n"+tc.doc+"\n"))
			} else {
				_, _, err = LoadEditor(tc.file, []byte(tc.doc), EditorOptions{LookupEnv: env(map[string]string{"API_KEY": secret})})
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error prints the credential: %v", err)
			}
			for _, e := range list {
				if e.Key == tc.key && strings.Contains(e.Msg, tc.shown) && e.Line > 0 && e.Fix != "" {
					return
				}
			}
			t.Fatalf("no error at %s saying %q: %v", tc.key, tc.shown, err)
		})
	}
}

// An editor's own placeholders (${workspaceFolder}, ${userHome}) as a
// whole header value are expanded as elsewhere, not taken as the names of
// environment variables; ${env:NAME} still names one.
func TestEditorHeaderBuiltins(t *testing.T) {
	data := []byte(`{"mcpServers": {"s": {"type": "http", "url": "https://h.example/mcp", "headers": {"X-Project": "${workspaceFolder}", "X-Key": "${env:workspaceFolder}"}}}}`)
	servers, _, err := LoadEditor("mcp.json", data, EditorOptions{Workspace: "/work/proj", LookupEnv: func(k string) (string, bool) { return "set", k == "workspaceFolder" }})
	if err != nil {
		t.Fatal(err)
	}
	rm := servers[0].Remote
	if rm.Headers["X-Project"] != "/work/proj" || rm.HeaderEnv["X-Key"] != "workspaceFolder" || rm.HeaderEnv["X-Project"] != "" {
		t.Fatalf("headers %v, header_env %v", rm.Headers, rm.HeaderEnv)
	}
}

// A secret file that is a FIFO no one writes (a secret agent not yet
// running) is a config error naming its key, at once: the check that the
// file is readable does not wait on it, and so cannot hang a serve's
// start or a reload behind it.
func TestRemoteSecretFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load("c.toml", []byte("[mcp.s]\nurl = \"https://h/mcp\"\nbearer_token_file = \""+fifo+"\"\n"))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "bearer_token_file") || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load: %v", err)
		}
	case <-time.After(time.Minute): // a backstop: it answers at once
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close() // lets the open waiting on it return
		}
		<-done
		t.Fatal("Load waited on the FIFO")
	}
}
