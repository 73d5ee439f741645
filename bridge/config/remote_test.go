package config

import (
	"errors"
	"os"
	"strings"
	"testing"
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
		{"clear text", `url = "http://example.com/mcp"`, "mcp.s.url", "not a loopback address"},
		{"user in url", `url = "https://u:p@h/mcp"`, "mcp.s.url", "carries a user or password"},
		{"unset variable", "url = \"https://h/mcp\"\nbearer_token_env = \"CAPBRIDGE_SURELY_UNSET\"", "mcp.s.bearer_token_env", "the variable CAPBRIDGE_SURELY_UNSET is not set"},
		{"unset header variable", "url = \"https://h/mcp\"\nheader_env = { \"X-K\" = \"CAPBRIDGE_SURELY_UNSET\" }", "mcp.s.header_env.X-K", "not set"},
		{"reserved header", "url = \"https://h/mcp\"\nheaders = { \"Mcp-Session-Id\" = \"x\" }", "mcp.s.headers.Mcp-Session-Id", "is the protocol's"},
		{"bad header", "url = \"https://h/mcp\"\nheaders = { \"X K\" = \"x\" }", "mcp.s.headers.X K", "bad header name"},
		{"command key", "url = \"https://h/mcp\"\nargs = [\"-y\"]", "mcp.s.args", "applies only to a server started by command"},
		{"cert without key", "url = \"https://h/mcp\"\nclient_cert = \"/c.pem\"", "mcp.s.client_cert", "needs its key"},
		{"transport", "url = \"https://h/mcp\"\ntransport = \"websocket\"", "mcp.s.transport", "bad value"},
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
	cfg, err := Load("c.toml", []byte(`
[mcp.s]
url = "https://h/mcp"
oauth = { client_id = "c", client_secret_env = "CAPBRIDGE_TEST_SECRET", scopes = ["read"] }

[mcp.k]
url = "https://h/mcp"
[mcp.k.oauth]
client_id = "c"
private_key_file = "/etc/k.pem"
key_id = "k1"
`))
	if err != nil {
		t.Fatal(err)
	}
	k, s := cfg.Servers[0].Remote.OAuth, cfg.Servers[1].Remote.OAuth
	if s.ClientID != "c" || s.Scopes[0] != "read" || k.PrivateKeyFile != "/etc/k.pem" || k.KeyID != "k1" {
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
