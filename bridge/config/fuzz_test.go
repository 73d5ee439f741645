package config

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// checkServers holds for every configuration either loader accepts.
func checkServers(t *testing.T, servers []Server) {
	t.Helper()
	if !slices.IsSortedFunc(servers, func(a, b Server) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatalf("servers not sorted: %+v", servers)
	}
	for _, s := range servers {
		if !validName.MatchString(s.Name) || (s.Command == "") == (s.Remote == nil) || s.CallTimeout > s.MaxCallTimeout || s.MaxInflight < 1 {
			t.Fatalf("accepted an invalid server: %+v", s)
		}
	}
}

// checkErr holds for every refusal: it is an ErrorList (or the size
// sentinel) and each entry names the file.
func checkErr(t *testing.T, err error, file string) {
	t.Helper()
	if errors.Is(err, ErrTooLarge) {
		return
	}
	var l ErrorList
	if !errors.As(err, &l) || len(l) == 0 {
		t.Fatalf("refusal is %T %v, want a non-empty ErrorList", err, err)
	}
	for _, e := range l {
		if e.File != file || e.Msg == "" {
			t.Fatalf("error without file or message: %#v", e)
		}
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(fullTOML))
	f.Add([]byte("[mcp.a]\ncommand = \"/a\"\ntools.allow = []\n"))
	f.Add([]byte("[bridge]\ncall_socket_mode = \"0666\"\nallowed_uids = [1000]\n"))
	f.Add([]byte("a.b.c = { d = [1, { e = 2 }] }\n[[x.y]]\nz = 1\n"))
	f.Add([]byte("[mcp.r]\nurl = \"https://h.example/mcp?k=v\"\ntransport = \"sse\"\nheaders = { \"X-Team\" = \"core\" }\nheader_env = { \"X-Key\" = \"HOME\" }\nbearer_token_env = \"HOME\"\noauth = { client_id = \"c\", client_secret_env = \"HOME\" }\n"))
	f.Add([]byte("[mcp.r]\nurl = \"\"\nheaders = { \"X\" = \"y\" }\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, err := Load("f.toml", doc)
		if err != nil {
			checkErr(t, err, "f.toml")
			return
		}
		checkServers(t, cfg.Servers)
	})
}

func FuzzLoadMCPJSON(f *testing.F) {
	for _, name := range []string{"claude_desktop_config.json", "cursor_mcp.json", "vscode_mcp.json", "claude_code_mcp.json", "windsurf_mcp_config.json"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"servers": {"time": {"type": "stdio", "command": "uvx"}}}`))
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x", "args": [1]}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		servers, _, err := LoadEditor("f.json", doc, EditorOptions{LookupEnv: func(string) (string, bool) { return "", false }, Workspace: "/ws"})
		if err != nil {
			checkErr(t, err, "f.json")
			return
		}
		checkServers(t, servers)
	})
}
