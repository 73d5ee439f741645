package config

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// env is the environment the editor tests expand against.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

var testEnv = env(map[string]string{
	"HOME":         "/home/alice",
	"GITHUB_TOKEN": "ghp_x",
	"TZ":           "Europe/Paris",
	"EMPTY":        "",
	"API_KEY":      "k",
	// Codex's bearer_token_env_var names it; serve reads it at each
	// boot.
	"FIGMA_OAUTH_TOKEN": "f",
	"TWO_LINES":         "a\r\nX-Injected: 1",
})

// Each file in testdata is shaped as its editor writes it; every field
// capbridge takes from it is checked, with the line each server is on.
func TestLoadEditorFormats(t *testing.T) {
	type want struct {
		name, command string
		args          []string
		env           map[string]string
		cwd           string
		allow, deny   []string
		line          int
		// A remote entry's url, transport and bearer variable.
		url, transport, bearer string
	}
	for _, tc := range []struct {
		file     string
		servers  []want
		warnings []string // each a substring of one warning, in order
	}{
		{"claude_desktop_config.json", []want{
			{name: "filesystem", command: "npx", args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/alice/Desktop", "/Users/alice/Downloads"}, line: 10},
			{name: "memory", command: "npx", args: []string{"-y", "@modelcontextprotocol/server-memory"}, env: map[string]string{"MEMORY_FILE_PATH": "/home/alice/.local/share/memory.jsonl"}, line: 3},
		}, nil},
		{"cursor_mcp.json", []want{
			{name: "docs", command: "node", args: []string{"/work/proj/tools/docs-server.js"}, cwd: "/work/proj", line: 11},
			{name: "github", command: "docker", args: []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"}, env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}, line: 4},
			{name: "linear", line: 17, url: "https://mcp.linear.app/sse", transport: TransportAuto},
		}, nil},
		{"windsurf_mcp_config.json", []want{
			{name: "figma", line: 14, url: "https://mcp.figma.com/mcp", transport: TransportAuto},
			{name: "sequential-thinking", command: "npx", args: []string{"-y", "@modelcontextprotocol/server-sequential-thinking"}, line: 3},
		}, []string{"mcpServers.puppeteer: is disabled"}},
		{"claude_code_mcp.json", []want{
			// "Bearer ${API_KEY}" becomes bearer_token_env: the token is
			// read at each boot, never copied.
			{name: "api", line: 9, url: "https://api.example.com/mcp", transport: TransportStreamable, bearer: "API_KEY"},
			{name: "postgres", command: "npx", args: []string{"-y", "@modelcontextprotocol/server-postgres", "postgresql://localhost/dev"}, env: map[string]string{}, line: 3},
		}, nil},
		{"vscode_mcp.json", []want{
			{name: "fetch", command: "uvx", args: []string{"mcp-server-fetch"}, env: map[string]string{"PATH": "/home/alice/.local/bin:/usr/bin"}, line: 17},
			{name: "github", line: 22, url: "https://api.githubcopilot.com/mcp/", transport: TransportStreamable},
			{name: "time", command: "uvx", args: []string{"mcp-server-time", "--local-timezone=Europe/Paris"}, line: 12},
		}, nil},
		{"codex_config.toml", []want{
			{name: "context7", command: "npx", args: []string{"-y", "@upstash/context7-mcp"}, line: 4},
			{name: "figma", line: 16, url: "https://mcp.figma.com/mcp", transport: TransportAuto, bearer: "FIGMA_OAUTH_TOKEN"},
			{name: "github", command: "github-mcp-server", args: []string{"stdio"}, env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}, allow: []string{"get_issue", "list_issues"}, deny: []string{"delete_repository"}, line: 9},
		}, []string{"mcp_servers.old: is disabled"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			servers, warnings, err := LoadEditor(tc.file, data, EditorOptions{Workspace: "/work/proj", LookupEnv: testEnv})
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, s := range servers {
				w := want{name: s.Name, command: s.Command, args: s.Args, env: s.Env, cwd: s.Cwd, allow: s.ToolsAllow, deny: s.ToolsDeny, line: s.Line}
				if rm := s.Remote; rm != nil {
					w.url, w.transport, w.bearer = rm.URL, rm.Transport, rm.BearerTokenEnv
				}
				got = append(got, w)
				if s.File != tc.file || s.MaxInflight != DefaultMaxInflight {
					t.Errorf("%s: file %q, max_inflight %d: want the file and NewServer's defaults", s.Name, s.File, s.MaxInflight)
				}
			}
			if !reflect.DeepEqual(got, tc.servers) {
				t.Errorf("servers:\n got %+v\nwant %+v", got, tc.servers)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.warnings))
			}
			for i, w := range warnings {
				if !strings.Contains(w.Error(), tc.warnings[i]) || w.Fix == "" {
					t.Errorf("warning %q, want one with %q and a fix", w, tc.warnings[i])
				}
			}

			// Remote entries are served, so Strict refuses none of them.
			if _, _, err = LoadEditor(tc.file, data, EditorOptions{Workspace: "/work/proj", LookupEnv: testEnv, Strict: true}); err != nil {
				t.Errorf("strict: %v", err)
			}
		})
	}
}

func TestLoadEditorExpansion(t *testing.T) {
	for _, tc := range []struct {
		in, out string
	}{
		{"plain", "plain"},
		{"${HOME}/x", "/home/alice/x"},
		{"a${GITHUB_TOKEN}b${TZ}", "aghp_xbEurope/Paris"},
		{"${UNSET:-fallback}", "fallback"},
		{"${EMPTY:-fallback}", "fallback"},
		{"${EMPTY}", ""},
		{"${GITHUB_TOKEN:-no}", "ghp_x"},
		{"${env:TZ}", "Europe/Paris"},
		{"${userHome}", "/home/alice"},
		{"${workspaceFolder}/a", "/ws/a"},
		{"$HOME stays", "$HOME stays"},
	} {
		x := expander{lookup: testEnv, workspace: "/ws"}
		got, u := x.expand(tc.in)
		if u != nil || got != tc.out {
			t.Errorf("expand(%q) = %q, %+v; want %q", tc.in, got, u, tc.out)
		}
	}
}

func TestLoadEditorErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		key       string
		msg, fix  string
	}{
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\" \"args\": []}\n  }\n}", 3, "", "JSON", "syntax"},
		{"not editor config", `{"foo": {}}`, 1, "", `no "mcpServers" or "servers"`, "Claude Desktop"},
		{"both keys", `{"mcpServers": {}, "servers": {}}`, 1, "", "both", ""},
		{"unknown type", "{\"servers\": {\n\n\"r\": {\"type\": \"websocket\", \"command\": \"x\"}}}", 3, "servers.r.type", `unknown transport type "websocket"`, "stdio"},
		{"no command", "{\"mcpServers\": {\"a\": {\"args\": []}}}", 1, "mcpServers.a", "no command", `"command"`},
		{"envFile", "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"envFile\": \"${workspaceFolder}/.env\"}}}", 1, "mcpServers.a.envFile", "envFile is not supported", "env"},
		{"input placeholder", "{\"servers\": {\n\"a\": {\"command\": \"x\", \"env\": {\"K\": \"${input:api-key}\"}}}}", 2, "servers.a.env.K", "${input:api-key}", "${env:NAME}"},
		{"unset variable", "{\"mcpServers\": {\n\"gh\": {\"command\": \"x\",\n \"args\": [\"--token\", \"${NOPE}\"]}}}", 2, "mcpServers.gh.args[1]", "${NOPE} and NOPE is not set", "export NOPE"},
		{"unset in command", "{\"mcpServers\": {\"gh\": {\"command\": \"${BIN}\"}}}", 1, "mcpServers.gh.command", "BIN is not set", "export BIN"},
		{"no workspace", "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"cwd\": \"${workspaceFolder}\"}}}", 1, "mcpServers.a.cwd", "no workspace", "--workspace"},
		{"unknown placeholder", "{\"mcpServers\": {\"a\": {\"command\": \"${config:editor.tabSize}\"}}}", 1, "mcpServers.a.command", "does not expand", "${VAR:-default}"},
		{"unterminated", "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": [\"${HOME\"]}}}", 1, "mcpServers.a.args[0]", "unterminated", "}"},
		{"args not strings", "{\"mcpServers\": {\n\"a\": {\"command\": \"x\",\n \"args\": [1]}}}", 3, "mcpServers.a.args", "must be", ""},
		{"bad name", "{\"mcpServers\": {\"a b\": {\"command\": \"x\"}}}", 1, "", `bad server name "a b"`, ""},
		{"duplicate", "{\"mcpServers\": {\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\"}}}", 2, "", "appears twice", ""},
		{"trailing data", `{"mcpServers": {}} {}`, 1, "", "after", ""},
		{"relative cwd", `{"mcpServers": {"a": {"command": "x", "cwd": "rel"}}}`, 1, "mcpServers.a.cwd", "not an absolute path", ""},
		{"codex no table", "model = \"x\"\n", 0, "", "no [mcp_servers] table", "[mcp_servers.NAME]"},
		{"codex wrong type", "[mcp_servers.a]\ncommand = \"x\"\nargs = \"-y pkg\"\n", 3, "mcp_servers.a.args", "must be an array", ""},
		{"codex unset", "[mcp_servers.a]\ncommand = \"x\"\nenv = { T = \"${T}\" }\n", 1, "mcp_servers.a.env.T", "T is not set", "export T"},
		{"codex syntax", "[mcp_servers.a]\ncommand = \n", 2, "", "TOML syntax", "toml.io"},
		// An editor's headers get the checks capbridge.toml's get.
		{"reserved header", "{\"mcpServers\": {\n\"s\": {\"type\": \"http\", \"url\": \"https://h/mcp\", \"headers\": {\"Mcp-Session-Id\": \"forged\"}}}}", 2, "mcpServers.s.headers.Mcp-Session-Id", "is the protocol's", "capbridge sets this header itself"},
		{"reserved header, any case", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"content-TYPE": "text/plain"}}}}`, 1, "mcpServers.s.headers.content-TYPE", "is the protocol's", "capbridge sets this header itself"},
		{"reserved header from a variable", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"Host": "${API_KEY}"}}}}`, 1, "mcpServers.s.headers.Host", "is the protocol's", ""},
		{"reserved bearer-like header", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"Mcp-Protocol-Version": "Bearer ${API_KEY}"}}}}`, 1, "mcpServers.s.headers.Mcp-Protocol-Version", "is the protocol's", ""},
		{"bad header name", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"Bad Name": "x"}}}}`, 1, "mcpServers.s.headers.Bad Name", "bad header name", "letters, digits"},
		{"header line break", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"X-Split": "a\r\nX-Injected: 1"}}}}`, 1, "mcpServers.s.headers.X-Split", "line break", "one line"},
		{"header NUL", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"X-K": "a\u0000b"}}}}`, 1, "mcpServers.s.headers.X-K", "NUL", "remove"},
		{"header variable line break", `{"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"X-K": "k=${TWO_LINES}"}}}}`, 1, "mcpServers.s.headers.X-K", "expands to a value with a line break", "one-line"},
		// The editors read member names exactly; encoding/json would
		// take any case, and "URL" could win over "url".
		{"url in another case beside url", "{\"mcpServers\": {\"s\": {\"type\": \"http\", \"url\": \"https://good.example/mcp\",\n \"URL\": \"https://other.example/mcp\", \"headers\": {\"Authorization\": \"Bearer ${API_KEY}\"}}}}", 2, "mcpServers.s.URL", `"URL" is "url" in another case`, `write "url"`},
		{"command in another case", "{\"mcpServers\": {\n\"s\": {\"Command\": \"/bin/x\"}}}", 2, "mcpServers.s.Command", `"Command" is "command" in another case`, `write "command"`},
		{"serverUrl in another case", `{"mcpServers": {"s": {"serverURL": "https://h/mcp"}}}`, 1, "mcpServers.s.serverURL", `"serverURL" is "serverUrl" in another case`, ""},
		{"disabled in another case", `{"servers": {"s": {"command": "x", "Disabled": true}}}`, 1, "servers.s.Disabled", `"Disabled" is "disabled"`, ""},
		{"codex reserved header", "[mcp_servers.s]\nurl = \"https://h/mcp\"\nhttp_headers = { \"Accept\" = \"*/*\" }\n", 3, "mcp_servers.s.http_headers.Accept", "is the protocol's", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "mcp.json"
			if strings.HasPrefix(tc.name, "codex") {
				file = "config.toml"
			}
			_, _, err := LoadEditor(file, []byte(tc.doc), EditorOptions{LookupEnv: testEnv})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Line != tc.line || (tc.key != "" && e.Key != tc.key) || !strings.Contains(e.Msg, tc.msg) || !strings.Contains(e.Fix, tc.fix) {
				t.Errorf("got %q (line %d, key %q), want line %d, key %q, message with %q, fix with %q", e, e.Line, e.Key, tc.line, tc.key, tc.msg, tc.fix)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	cfg, err := Load("capbridge.toml", []byte("[mcp.memory]\ncommand = \"/bin/mem\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	servers, _, err := LoadEditor("claude.json", data, EditorOptions{LookupEnv: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	err = Merge(cfg, servers)
	var e *Error
	if !errors.As(err, &e) || e.File != "claude.json" || e.Line != 3 || !strings.Contains(e.Msg, "also defined at capbridge.toml:1") {
		t.Fatalf("Merge = %v, want a duplicate error naming both places", err)
	}

	cfg = Defaults()
	if err := Merge(cfg, servers); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 2 || cfg.Servers[0].Name != "filesystem" {
		t.Errorf("merged servers = %+v", cfg.Servers)
	}
}

// What an editor's env and header values, arguments and remote URL take
// from variables is recorded for redaction, as capbridge.toml's
// references are: a token exported for the server, whole or inside a
// longer value (an argument or header whole; not a URL, whose key is
// the variable's part); paths (the workspace, the home directory) and
// values written out are not. Arguments and URLs were not recorded, and
// doctor printed a key passed as "--api-key", "${KEY}" or in a URL's
// path.
func TestEditorVariablesRecordedAsSecrets(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"TOK": "tok-secret-0001", "TOK2": "tok-secret-0002", "HOME": "/home/me", "HDR": "hdr-secret-0003",
			"ARG": "arg-secret-0004", "PATHKEY": "url-secret-0005"}[k]
		return v, ok
	}
	doc := `{"mcpServers": {
  "s": {"command": "/bin/srv", "args": ["--key=${ARG}", "${workspaceFolder}/data", "plain"], "env": {"A": "${env:TOK}", "B": "pre-${TOK2}", "C": "${workspaceFolder}/x", "D": "${HOME}/y", "E": "written"}},
  "r": {"url": "https://h.example/s/${PATHKEY}/mcp", "headers": {"X-Key": "k=${HDR}"}}}}`
	servers, _, err := LoadEditor("mcp.json", []byte(doc), EditorOptions{Workspace: "/work/proj", LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	if err := ResolveSecrets(&Config{Servers: servers}, SecretSources{LookupEnv: env}); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, s := range servers {
		for _, v := range s.SecretValues() {
			all = append(all, v)
		}
	}
	for _, want := range []string{"tok-secret-0001", "tok-secret-0002", "pre-tok-secret-0002", "k=hdr-secret-0003", "hdr-secret-0003",
		"arg-secret-0004", "--key=arg-secret-0004", "url-secret-0005"} {
		if !slices.Contains(all, want) {
			t.Errorf("%q is not recorded as a secret: %q", want, all)
		}
	}
	for _, not := range []string{"/work/proj/x", "/work/proj", "/home/me", "/home/me/y", "written", "/work/proj/data", "plain",
		"https://h.example/s/url-secret-0005/mcp"} {
		if slices.Contains(all, not) {
			t.Errorf("%q is recorded as a secret: %q", not, all)
		}
	}
}
