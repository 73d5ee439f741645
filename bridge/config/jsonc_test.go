package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/bound"
)

// An editor's config is often committed to a repository a user clones:
// a file nested deeper than any config (here 4 MB of '[' where a server
// entry belongs, and 4 MB of '{' in a comment-laden JSONC file) is an
// error at its line, not a crash of every command that reads it.
func TestEditorConfigTooDeep(t *testing.T) {
	n := 2<<20 - 64 // 4 MB of brackets, about the most a config file may hold
	for name, tc := range map[string]struct {
		doc  string
		line int
	}{
		"arrays":  {"{\"mcpServers\": {\n\"a\": " + strings.Repeat("[", n) + strings.Repeat("]", n) + "}}", 2},
		"objects": {"// a comment { [ \n{\"servers\": /* { */ {\n\"a\": " + strings.Repeat(`{"x":`, n/5) + "1" + strings.Repeat("}", n/5) + "}}", 3},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := LoadEditor(".mcp.json", []byte(tc.doc), EditorOptions{LookupEnv: testEnv})
			var e *Error
			if !errors.As(err, &e) || e.Line != tc.line || !strings.Contains(e.Msg, "nested more than") {
				t.Fatalf("got %v, want a located depth error", err)
			}
		})
	}
	// Within the bound, in strings and comments, brackets do not count.
	ok := "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": [\"" + strings.Repeat("[", 500) + "\"]}}} // " + strings.Repeat("{", 500) + "\n"
	if _, _, err := LoadEditor(".mcp.json", []byte(ok), EditorOptions{LookupEnv: testEnv}); err != nil {
		t.Fatal(err)
	}
}

// A member repeated in one object (a second "command" in an entry, a
// second key in its env) is an error naming both lines: JSON readers
// disagree on which one wins, and capbridge must not pick silently.
func TestEditorConfigDuplicateMembers(t *testing.T) {
	for name, doc := range map[string]string{
		"command": "{\"mcpServers\": {\"a\": {\"command\": \"/bin/safe\",\n\"command\": \"/bin/evil\"}}}",
		"env":     "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"env\": {\"K\": \"1\",\n\"K\": \"2\"}}}}",
		"top":     "{\"mcpServers\": {},\n\"mcpServers\": {\"a\": {\"command\": \"x\"}}}",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := LoadEditor("mcp.json", []byte(doc), EditorOptions{LookupEnv: testEnv})
			var e *Error
			if !errors.As(err, &e) || e.Line != 2 || !strings.Contains(e.Msg, "appears twice in one object (first on line 1)") {
				t.Fatalf("got %v, want the second member's line", err)
			}
		})
	}
}

// A UTF-8 byte order mark, as Windows editors save files, is read past,
// in JSON and TOML alike.
func TestConfigByteOrderMark(t *testing.T) {
	const bom = "\xEF\xBB\xBF"
	if s, _, err := LoadEditor("mcp.json", []byte(bom+`{"mcpServers": {"a": {"command": "x"}}}`), EditorOptions{LookupEnv: testEnv}); err != nil || len(s) != 1 {
		t.Errorf("JSON with a BOM: %v", err)
	}
	if s, _, err := LoadEditor("config.toml", []byte(bom+"[mcp_servers.a]\ncommand = \"x\"\n"), EditorOptions{LookupEnv: testEnv}); err != nil || len(s) != 1 {
		t.Errorf("Codex TOML with a BOM: %v", err)
	}
	if cfg, err := Load("capbridge.toml", []byte(bom+"[mcp.a]\ncommand = \"/x\"\n")); err != nil || len(cfg.Servers) != 1 {
		t.Errorf("capbridge.toml with a BOM: %v", err)
	}
}

// A default may hold a placeholder of its own, expanded only when the
// default is used.
func TestExpandNestedDefault(t *testing.T) {
	x := expander{lookup: testEnv, workspace: "/ws"}
	for _, tc := range []struct{ in, out, err string }{
		{"${UNSET:-${HOME}}/x", "/home/alice/x", ""},
		{"${UNSET:-${EMPTY:-${TZ}}}", "Europe/Paris", ""},
		{"${GITHUB_TOKEN:-${UNSET}}", "ghp_x", ""},
		{"${UNSET:-${workspaceFolder}/a}", "/ws/a", ""},
		{"${UNSET:-a}}", "a}", ""},
		{"${UNSET:-${ALSO_UNSET}}", "", "ALSO_UNSET is not set"},
		{"${UNSET:-${HOME}", "", "unterminated"},
		{strings.Repeat("${U:-", 9) + "x" + strings.Repeat("}", 9), "", "nests placeholders more than 8 deep"},
	} {
		got, u := x.expand(tc.in)
		switch {
		case tc.err == "" && (u != nil || got != tc.out):
			t.Errorf("expand(%q) = %q, %+v; want %q", tc.in, got, u, tc.out)
		case tc.err != "" && (u == nil || !strings.Contains(u.msg, tc.err)):
			t.Errorf("expand(%q) = %q, %+v; want an error with %q", tc.in, got, u, tc.err)
		}
	}
}

// jsoncDepth finds the first bracket past bound.MaxDepth that a JSONC
// reader would see, and nothing in strings or comments, on any input.
func FuzzJSONCDepth(f *testing.F) {
	for _, s := range []string{`{"a": [1, {"b": "[[["}]} // [[[`, "/* {{ */ [[]]", `"\"[["`, strings.Repeat("[", bound.MaxDepth+1), "{\"a\":\"x\\", "//\n[", "/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := jsoncDepth([]byte(s))
		want := naiveJSONCDepth(s)
		if got != want {
			t.Fatalf("jsoncDepth(%q) = %d, want %d", s, got, want)
		}
	})
}

// naiveJSONCDepth is the reference: a character-at-a-time state machine.
func naiveJSONCDepth(s string) int64 {
	const (
		code = iota
		str
		esc
		line
		block
	)
	state, depth := code, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch state {
		case str:
			switch c {
			case '\\':
				state = esc
			case '"':
				state = code
			}
		case esc:
			state = str
		case line:
			if c == '\n' {
				state = code
			}
		case block:
			if c == '*' && i+1 < len(s) && s[i+1] == '/' {
				state, i = code, i+1
			}
		default:
			switch {
			case c == '"':
				state = str
			case c == '/' && i+1 < len(s) && s[i+1] == '/':
				state, i = line, i+1
			case c == '/' && i+1 < len(s) && s[i+1] == '*':
				state, i = block, i+1
			case c == '[' || c == '{':
				if depth++; depth > bound.MaxDepth {
					return int64(i)
				}
			case c == ']' || c == '}':
				depth--
			}
		}
	}
	return -1
}

// Expansion is total: a string or an error, never a panic; text without
// a placeholder is itself; and a default holding text t, when its braces
// balance, expands as t itself does.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A:-${B}}", "${A:-${B:-${C}}}x${", "$${A}}", "${env:A}", "${input:x}", "${:-}", "${A:-}}"} {
		f.Add(s)
	}
	unset := expander{lookup: func(string) (string, bool) { return "", false }, workspace: "/ws"}
	set := expander{lookup: func(string) (string, bool) { return "v", true }, workspace: "/ws"}
	f.Fuzz(func(t *testing.T, s string) {
		for _, x := range []expander{unset, set} {
			if out, u := x.expand(s); u == nil && !strings.Contains(s, "${") && out != s {
				t.Fatalf("expand(%q) = %q without a placeholder", s, out)
			}
		}
		if closingBrace(s+"}") != len(s) {
			return
		}
		inner, ui := unset.expand(s)
		outer, uo := unset.expand("${UNSET:-" + s + "}")
		if uo != nil && strings.Contains(uo.msg, "nests placeholders") {
			return
		}
		if (ui == nil) != (uo == nil) || inner != outer {
			t.Fatalf("expand(%q) = %q, %v; as a default: %q, %v", s, inner, ui, outer, uo)
		}
	})
}

// A syntax error in an editor's file says where, and what is wrong,
// without quoting the string it is in: that is usually a credential (a
// password with a backslash, a token pasted with its line break), and it
// was quoted whole.
func TestEditorSyntaxErrorDoesNotQuoteValue(t *testing.T) {
	for _, src := range []string{
		"{\"mcpServers\": {\"db\": {\"command\": \"mcp-postgres\",\n  \"env\": {\"PGPASSWORD\": \"Tr0ub4dor\\&3-prod-db\"}}}}",
		"{\"mcpServers\": {\"db\": {\"command\": \"mcp-postgres\",\n  \"env\": {\"PGPASSWORD\": \"Tr0ub4dor-prod-db\n\"}}}}",
	} {
		_, _, err := LoadEditor("mcp.json", []byte(src), EditorOptions{Workspace: "/w"})
		if err == nil {
			t.Fatal("loaded")
		}
		if msg := err.Error(); strings.Contains(msg, "Tr0ub4dor") || !strings.Contains(msg, "mcp.json:2: JSON: line 2, column") || !strings.Contains(msg, "bad escape") {
			t.Errorf("%q: %v", src, err)
		}
	}
}
