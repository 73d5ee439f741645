package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const claudeDesktop = `{
  "mcpServers": {
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"],
      "env": {"MEMORY_FILE_PATH": "/var/lib/memory.jsonl"},
      "disabled": false,
      "autoApprove": []
    },
    "filesystem": {
      "command": "/usr/local/bin/mcp-server-filesystem",
      "args": ["/srv"],
      "cwd": "/srv"
    }
  }
}`

func TestLoadMCPJSONClaude(t *testing.T) {
	servers, err := LoadMCPJSON("claude.json", []byte(claudeDesktop))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 {
		t.Fatalf("got %d servers", len(servers))
	}
	fs, mem := servers[0], servers[1]
	want := NewServer("filesystem", "/usr/local/bin/mcp-server-filesystem")
	want.Args, want.Cwd, want.File, want.Line = []string{"/srv"}, "/srv", "claude.json", 10
	if !reflect.DeepEqual(fs, want) {
		t.Errorf("filesystem:\n got %+v\nwant %+v", fs, want)
	}
	if mem.Name != "memory" || mem.Command != "npx" || mem.Env["MEMORY_FILE_PATH"] != "/var/lib/memory.jsonl" || mem.Line != 3 {
		t.Errorf("memory = %+v", mem)
	}
}

func TestLoadMCPJSONVSCode(t *testing.T) {
	doc := `{"inputs": [], "servers": {"time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}`
	servers, err := LoadMCPJSON("mcp.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 || servers[0].Name != "time" || servers[0].Command != "uvx" || !reflect.DeepEqual(servers[0].Args, []string{"mcp-server-time"}) {
		t.Errorf("got %+v", servers)
	}
}

func TestLoadMCPJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		msg, fix  string
	}{
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", 3, "JSON", "trailing comma"},
		{"not editor config", `{"foo": {}}`, 1, `no "mcpServers" or "servers"`, "Claude Desktop"},
		{"both keys", `{"mcpServers": {}, "servers": {}}`, 1, "both", ""},
		{"remote url", "{\"mcpServers\": {\n\"remote\": {\"url\": \"https://example.invalid/mcp\"}}}", 2, "remote server", "stdio servers only"},
		{"remote type", "{\"servers\": {\n\n\"r\": {\"type\": \"http\", \"url\": \"u\"}}}", 3, `type "http"`, "stdio servers only"},
		{"no command", "{\"mcpServers\": {\"a\": {\"args\": []}}}", 1, "no command", `"command"`},
		{"envFile", "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"envFile\": \"${workspaceFolder}/.env\"}}}", 1, "envFile is not supported", "env"},
		{"input placeholder", "{\"servers\": {\"a\": {\"command\": \"x\", \"env\": {\"K\": \"${input:api-key}\"}}}}", 1, "${input:", "placeholder"},
		{"args not strings", "{\"mcpServers\": {\n\"a\": {\"command\": \"x\",\n \"args\": [1]}}}", 3, "must be", ""},
		{"bad name", "{\"mcpServers\": {\"a b\": {\"command\": \"x\"}}}", 1, `bad server name "a b"`, ""},
		{"duplicate", "{\"mcpServers\": {\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\"}}}", 2, "appears twice", ""},
		{"trailing data", `{"mcpServers": {}} {}`, 1, "after the top-level object", ""},
		{"relative cwd", `{"mcpServers": {"a": {"command": "x", "cwd": "rel"}}}`, 1, "not an absolute path", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadMCPJSON("mcp.json", []byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Line != tc.line || !strings.Contains(e.Msg, tc.msg) || !strings.Contains(e.Fix, tc.fix) {
				t.Errorf("got %q (line %d), want line %d, message with %q, fix with %q", e, e.Line, tc.line, tc.msg, tc.fix)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	cfg, err := Load("capbridge.toml", []byte("[mcp.memory]\ncommand = \"/bin/mem\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	servers, err := LoadMCPJSON("claude.json", []byte(claudeDesktop))
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
