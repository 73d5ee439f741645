package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"

	"github.com/capbridge/capbridge/bridge/config"
)

// runInProcess runs the CLI in this process and returns its output.
func runInProcess(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// Without --from, init writes every key commented out: the file loads as
// it is (no servers), and with every key uncommented it still loads and
// sets every key the sample config sets, so the two cannot drift apart.
func TestInitTemplate(t *testing.T) {
	out, errOut, code := runInProcess("init", "--out", "-")
	if code != exitOK {
		t.Fatalf("init --out -: exit %d, %s", code, errOut)
	}
	cfg, err := config.Load("init", []byte(out))
	if err != nil || len(cfg.Servers) != 0 {
		t.Fatalf("init's file: %v, %d servers; want it to load with none", err, len(cfg.Servers))
	}
	// "# key = value" and "# [table]" lines are settings; other comments
	// are prose.
	setting := regexp.MustCompile(`(?m)^# ((\[[a-z.]+\])|([a-z_.]+ *= .*))$`)
	uncommented := setting.ReplaceAllString(out, "$1")
	// A secret file must be readable when the config is loaded: the
	// example's stands in for one on this machine.
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := config.Load("init, uncommented", []byte(strings.ReplaceAll(uncommented, "/run/secrets/github-mcp-token", secret)))
	if err != nil {
		t.Fatalf("init's file with every key uncommented does not load:\n%v\n%s", err, uncommented)
	}
	if len(all.Servers) != 2 {
		t.Errorf("uncommented: %d servers, want the two examples (a process, a remote server)", len(all.Servers))
	}
	sample, err := os.ReadFile("../../docs/capbridge.sample.toml")
	if err != nil {
		t.Fatal(err)
	}
	want, got := tomlKeys(t, sample), tomlKeys(t, []byte(uncommented))
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("the sample sets %s and init's file does not show it", k)
		}
	}
	for _, k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("init's file shows %s, which the sample does not set", k)
		}
	}
}

// tomlKeys lists the keys a capbridge.toml sets, with server names
// replaced by "*": bridge.max_frame, mcp.*.tools.allow.
func tomlKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	if b, ok := doc["bridge"].(map[string]any); ok {
		for k := range b {
			keys["bridge."+k] = true
		}
	}
	servers, _ := doc["mcp"].(map[string]any)
	for _, s := range servers {
		for k, v := range s.(map[string]any) {
			if tools, ok := v.(map[string]any); ok && k == "tools" {
				for tk := range tools {
					keys["mcp.*.tools."+tk] = true
				}
				continue
			}
			keys["mcp.*."+k] = true
		}
	}
	return slices.Sorted(maps.Keys(keys))
}

// init --from turns every editor config in bridge/config/testdata into a
// capbridge.toml that serve's reader loads with the same servers, field
// for field, as serve --mcp-config reads from the editor's file; each
// table names the variables it expanded.
func TestInitFromEditors(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GITHUB_TOKEN", "ghp_test")
	t.Setenv("TZ", "Europe/Paris")
	t.Setenv("DATABASE_URL", "")
	os.Unsetenv("DATABASE_URL") // t.Setenv restores it after the test
	// The remote entries' credentials, which the file names and never
	// holds.
	t.Setenv("API_KEY", "k-secret")
	t.Setenv("FIGMA_OAUTH_TOKEN", "f-secret")
	files, err := filepath.Glob("../../bridge/config/testdata/*")
	if err != nil || len(files) < 6 {
		t.Fatalf("testdata: %v, %v", files, err)
	}
	mentions := map[string][]string{
		"codex_config.toml":          {"${GITHUB_TOKEN}"},
		"cursor_mcp.json":            {"${GITHUB_TOKEN}", "${workspaceFolder} = "},
		"claude_code_mcp.json":       {"${DATABASE_URL} (not set: its default)"},
		"claude_desktop_config.json": {"${HOME}"},
		"vscode_mcp.json":            {"${TZ}", "${HOME}"},
	}
	for _, editor := range files {
		t.Run(filepath.Base(editor), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "capbridge.toml")
			stdout, errOut, code := runInProcess("init", "--from", editor, "--out", out)
			if code != exitOK || !strings.Contains(stdout, "capbridge doctor -c "+out) {
				t.Fatalf("init --from %s: exit %d, stdout %q, stderr %q", editor, code, stdout, errOut)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(out, data)
			if err != nil {
				t.Fatalf("the written file does not load:\n%v\n%s", err, data)
			}
			// An env value kept as the editor wrote it resolves as serve
			// resolves it, to what the editor's reading gives.
			if err := config.ResolveSecrets(cfg, config.SecretSources{LookupEnv: os.LookupEnv}); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(editor)
			if err != nil {
				t.Fatal(err)
			}
			abs, _ := filepath.Abs(filepath.Dir(editor))
			want, _, err := config.LoadEditor(editor, raw, config.EditorOptions{Workspace: abs})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || len(cfg.Servers) != len(want) {
				t.Fatalf("servers: got %d, want %d (and at least one)", len(cfg.Servers), len(want))
			}
			secret := false
			for i, w := range want {
				g := cfg.Servers[i]
				// An empty env is no env; an empty tools.allow is not
				// an absent one (it allows nothing), so that compares
				// exactly.
				if g.Name != w.Name || g.Command != w.Command || !slices.Equal(g.Args, w.Args) || !maps.Equal(g.Env, w.Env) ||
					g.Cwd != w.Cwd || !reflect.DeepEqual(g.ToolsAllow, w.ToolsAllow) || !reflect.DeepEqual(g.ToolsDeny, w.ToolsDeny) ||
					!reflect.DeepEqual(g.Remote, w.Remote) {
					t.Errorf("server %d:\n got %+v\nwant %+v", i, g, w)
				}
				secret = secret || len(w.Env) > 0
			}
			for _, m := range mentions[filepath.Base(editor)] {
				if !strings.Contains(string(data), m) {
					t.Errorf("the file does not mention %q:\n%s", m, data)
				}
			}
			if strings.Contains(string(data), "k-secret") || strings.Contains(string(data), "f-secret") {
				t.Errorf("a credential's value was written into the file:\n%s", data)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if secret && fi.Mode().Perm() != 0o600 {
				t.Errorf("a file with env values has mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

// Strings TOML must escape survive the trip; one serve's reader refuses
// (a NUL) stops init before it writes anything.
func TestInitQuoting(t *testing.T) {
	dir := t.TempDir()
	editor := filepath.Join(dir, "mcp.json")
	args := []string{`quote " and \ backslash`, "tab\tnew\nline", "ctl \u0001\u007f", "é ü 日本 🚀", ""}
	js := `{"mcpServers": {"odd": {"command": "/bin/odd", "args": ["quote \" and \\ backslash", "tab\tnew\nline", "ctl \u0001\u007f", "é ü 日本 🚀", ""]}}}`
	if err := os.WriteFile(editor, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runInProcess("init", "--from", editor, "--out", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	cfg, err := config.Load("out", []byte(out))
	if err != nil || len(cfg.Servers) != 1 || !reflect.DeepEqual(cfg.Servers[0].Args, args) {
		t.Fatalf("loaded %+v, %v; want args %q\n%s", cfg, err, args, out)
	}

	if err := os.WriteFile(editor, []byte(`{"mcpServers": {"nul": {"command": "/bin/x", "args": ["a\u0000b"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "capbridge.toml")
	_, errOut, code = runInProcess("init", "--from", editor, "--out", target)
	if code != exitConfig || !strings.Contains(errOut, "NUL") {
		t.Errorf("a NUL in args: exit %d, stderr %q; want exit %d naming the NUL", code, errOut, exitConfig)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("init wrote a file it refused: %v", err)
	}
}

func TestInitRefusesOverwrite(t *testing.T) {
	target := filepath.Join(t.TempDir(), "capbridge.toml")
	if err := os.WriteFile(target, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runInProcess("init", "--out", target)
	if got, _ := os.ReadFile(target); code != exitError || string(got) != "# mine\n" || !strings.Contains(errOut, "--force") {
		t.Errorf("init over an existing file: exit %d, stderr %q, file now %q; want exit 1, the file kept, --force named", code, errOut, got)
	}
	if _, errOut, code := runInProcess("init", "--out", target, "--force"); code != exitOK {
		t.Fatalf("init --force: exit %d, %s", code, errOut)
	}
	got, _ := os.ReadFile(target)
	if _, err := config.Load(target, got); err != nil || !strings.Contains(string(got), "[bridge]") {
		t.Errorf("after --force: %v\n%s", err, got)
	}
	if _, errOut, code := runInProcess("init", "extra"); code != exitUsage {
		t.Errorf("init extra: exit %d, %s", code, errOut)
	}
}

// A server init leaves out (here a disabled one) is named on screen, not
// only in a comment at the end of a file nobody may read to the end.
func TestInitSaysWhatItLeavesOut(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, ".mcp.json")
	doc := `{"mcpServers": {"local": {"command": "/bin/true"}, "linear": {"type": "http", "url": "https://mcp.linear.app/mcp", "disabled": true}}}`
	if err := os.WriteFile(from, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "capbridge.toml")
	_, errOut, code := runInProcess("init", "--from", from, "--out", out)
	if code != exitOK || !strings.Contains(errOut, "left out") || !strings.Contains(errOut, "mcpServers.linear") {
		t.Fatalf("exit %d, stderr %q; want the disabled server named on stderr", code, errOut)
	}
}

// A remote server's credentials reach capbridge.toml only as variable
// names: a header that uses a variable inside a longer value is left out,
// and so is a server whose URL takes a variable where a credential goes,
// each named on stderr and in the file with the editor's file:line. What
// is copied from the editor's file as written (a literal header, a URL's
// query) makes the file 0600.
func TestInitRemoteCredentials(t *testing.T) {
	t.Setenv("INIT_GH", "ghp_VALUE_GH")
	t.Setenv("INIT_SESSION", "VALUE_SESSION")
	t.Setenv("INIT_KEY", "VALUE_KEY")
	t.Setenv("INIT_BASE", "")
	os.Unsetenv("INIT_BASE") // t.Setenv restores it after the test
	for _, tc := range []struct {
		name, entry string
		written     []string // in the file
		leftOut     []string // on stderr, and in the file's comments
		mode        os.FileMode
	}{
		{"variable inside a header", `{"type": "http", "url": "https://h.example/mcp", "headers": {"Authorization": "token ${INIT_GH}", "X-Team": "core"}}`,
			[]string{`url = "https://h.example/mcp"`, `headers = { "Authorization" = "token ${INIT_GH}", "X-Team" = "core" }`}, nil, 0o600},
		{"cookie", `{"type": "sse", "url": "https://h.example/sse", "headers": {"Cookie": "session=${INIT_SESSION}"}}`,
			[]string{`url = "https://h.example/sse"`, `headers = { "Cookie" = "session=${INIT_SESSION}" }`}, nil, 0o600},
		{"variable in the query", `{"type": "http", "url": "https://h.example/mcp?api_key=${INIT_KEY}"}`,
			nil, []string{"mcp.json:2: server s: its url takes ${INIT_KEY}", "add [mcp.s] to capbridge.toml yourself"}, 0o644},
		{"variable in the path", `{"type": "http", "url": "https://h.example/mcp/${INIT_KEY}/sse"}`,
			nil, []string{"mcp.json:2: server s: its url takes ${INIT_KEY}"}, 0o644},
		{"base URL variable", `{"type": "http", "url": "${INIT_BASE:-https://api.example.com}/mcp", "headers": {"Authorization": "Bearer ${INIT_KEY}"}}`,
			[]string{`url = "https://api.example.com/mcp"`, `bearer_token_env = "INIT_KEY"`}, nil, 0o600},
		{"whole value a variable", `{"type": "http", "url": "https://h.example/mcp", "headers": {"X-Key": "${INIT_KEY}"}}`,
			[]string{`header_env = { "X-Key" = "INIT_KEY" }`}, nil, 0o644},
		{"literal header", `{"type": "http", "url": "https://h.example/mcp", "headers": {"Authorization": "Bearer lin_api_LITERAL"}}`,
			[]string{`"Authorization" = "Bearer lin_api_LITERAL"`}, nil, 0o600},
		{"literal query", `{"type": "http", "url": "https://h.example/mcp?team=core"}`,
			[]string{`url = "https://h.example/mcp?team=core"`}, nil, 0o600},
		{"file reference", `{"type": "http", "url": "https://h.example/mcp", "headers": {"X-Key": "k=${file:/run/k} ${INIT_KEY}"}}`,
			[]string{`"X-Key" = "k=${file:/run/k} ${INIT_KEY}"`}, nil, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			from := filepath.Join(dir, "mcp.json")
			if err := os.WriteFile(from, []byte("{\"mcpServers\": {\n  \"s\": "+tc.entry+"}}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "capbridge.toml")
			_, errOut, code := runInProcess("init", "--from", from, "--out", out)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"ghp_VALUE_GH", "VALUE_SESSION", "VALUE_KEY"} {
				if strings.Contains(string(data), v) || strings.Contains(errOut, v) {
					t.Errorf("a variable's value (%s) was written:\n%s\nstderr: %s", v, data, errOut)
				}
			}
			for _, w := range tc.written {
				if !strings.Contains(string(data), w) {
					t.Errorf("the file lacks %s:\n%s", w, data)
				}
			}
			for _, w := range tc.leftOut {
				if !strings.Contains(errOut, w) || !strings.Contains(string(data), w) {
					t.Errorf("stderr and the file do not both say %q:\nstderr: %s\nfile:\n%s", w, errOut, data)
				}
			}
			if len(tc.leftOut) == 0 && errOut != "" {
				t.Errorf("stderr: %s", errOut)
			}
			if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != tc.mode {
				t.Errorf("mode %v (%v), want %v", fi.Mode().Perm(), err, tc.mode)
			}
		})
	}
}

// The paths init writes into comments (the editor's file, the workspace a
// variable expanded to) stay comments whatever they hold: a line break in
// one would otherwise write a table of its own.
func TestInitCommentsHoldPaths(t *testing.T) {
	inject := "x\n[mcp.injected]\ncommand = \"/bin/sh\"\n#"
	for _, tc := range []struct {
		name, entry string
		inDir       bool // the editor's file is under a directory named inject
		workspace   string
	}{
		{"editor file", `{"a": {"command": "/bin/true"}}`, true, ""},
		{"editor file without servers", `{}`, true, ""},
		{"workspace", `{"a": {"command": "/bin/true", "args": ["${workspaceFolder}"]}}`, false, "/ws\n" + inject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.inDir {
				dir = filepath.Join(dir, inject)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			from := filepath.Join(dir, "mcp.json")
			if err := os.WriteFile(from, []byte(`{"mcpServers": `+tc.entry+`}`), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"init", "--from", from, "--out", "-"}
			if tc.workspace != "" {
				args = append(args, "--workspace", tc.workspace)
			}
			out, errOut, code := runInProcess(args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			cfg, err := config.Load("out", []byte(out))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, s := range cfg.Servers {
				if s.Name == "injected" {
					t.Fatalf("a path's line break wrote [mcp.injected]:\n%s", out)
				}
			}
		})
	}
}

// A mistake only capbridge.toml's reader finds in a converted server is
// reported at the editor's entry, which is the file to fix, not at a
// line of the file init did not write.
func TestInitErrorsNameTheEditorFile(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "config.toml")
	doc := "model = \"m\"\n\n[mcp_servers.ok]\ncommand = \"/bin/true\"\n\n[mcp_servers.both]\ncommand = \"/bin/true\"\nenabled_tools = [\"t\"]\ndisabled_tools = [\"t\"]\n"
	if err := os.WriteFile(from, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "capbridge.toml")
	_, errOut, code := runInProcess("init", "--from", from, "--out", out)
	if code != exitConfig || !strings.Contains(errOut, from+":6: mcp.both.tools: tool \"t\" is both allowed and denied") || strings.Contains(errOut, out) {
		t.Errorf("exit %d, stderr %q; want exit %d and the error at %s:6", code, errOut, exitConfig, from)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("init wrote a file it refused: %v", err)
	}
}

// A relative ${file:PATH} is beside the editor's file, where the editor
// reads it; init writes it absolute, so the file it writes elsewhere
// reads the same one.
func TestInitFileRefsAbsolute(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(conf, "mcp.json")
	entry := `{"mcpServers": {"r": {"type": "http", "url": "https://h.example/mcp", "headers": {"X-Key": "${file:key.txt}"}}, "p": {"command": "/bin/true", "env": {"K": "k=${file:sub/key.txt}"}}}}`
	if err := os.WriteFile(from, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "capbridge.toml")
	if _, errOut, code := runInProcess("init", "--from", from, "--out", out); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"X-Key" = "${file:` + filepath.Join(conf, "key.txt") + `}"`, `K = "k=${file:` + filepath.Join(conf, "sub", "key.txt") + `}"`} {
		if !strings.Contains(string(data), w) {
			t.Errorf("the file lacks %s:\n%s", w, data)
		}
	}
}

// A value that is not UTF-8 (a variable's) cannot be written in TOML
// without changing its bytes: the server is left out, saying why, rather
// than written with different arguments than the editor's.
func TestInitLeavesOutNonUTF8(t *testing.T) {
	t.Setenv("INIT_BYTES", "a\xffb")
	dir := t.TempDir()
	from := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(from, []byte(`{"mcpServers": {"a": {"command": "/bin/true", "args": ["${INIT_BYTES}"]}, "b": {"command": "/bin/true"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runInProcess("init", "--from", from, "--out", "-")
	if code != exitOK || !strings.Contains(errOut, "server a: a value holds bytes that are not UTF-8") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "[mcp.a]") || !strings.Contains(out, "[mcp.b]") || !utf8.ValidString(out) {
		t.Fatalf("the file:\n%s", out)
	}
}

// A stdio server's env value that takes a variable is written as the
// editor wrote it, so a token exported for the server is not copied into
// capbridge.toml; the workspace and the home directory are expanded in
// it, a variable that was not set is written as its default, and one
// given to an argument, which capbridge.toml cannot expand, is written
// expanded with a warning naming it.
func TestInitKeepsEnvVariables(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("INIT_TOKEN", "ghp_INIT_TOKEN_VALUE")
	t.Setenv("INIT_ARG", "arg-secret-value")
	t.Setenv("INIT_UNSET", "")
	os.Unsetenv("INIT_UNSET") // t.Setenv restores it after the test
	dir := t.TempDir()
	from := filepath.Join(dir, "mcp.json")
	entry := `{"mcpServers": {
  "s": {"command": "/bin/srv", "args": ["--key", "${INIT_ARG}"], "env": {"TOKEN": "${INIT_TOKEN}", "MIX": "x-${env:INIT_TOKEN}-${workspaceFolder}", "HOMED": "${userHome}/y", "DEF": "${INIT_UNSET:-dflt}"}}}}
`
	if err := os.WriteFile(from, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "capbridge.toml")
	_, errOut, code := runInProcess("init", "--from", from, "--out", out, "--workspace", "/ws")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`TOKEN = "${INIT_TOKEN}"`, `MIX = "x-${INIT_TOKEN}-/ws"`, `HOMED = "` + home + `/y"`, `DEF = "dflt"`} {
		if !strings.Contains(string(data), w) {
			t.Errorf("the file lacks %s:\n%s", w, data)
		}
	}
	if strings.Contains(string(data), "ghp_INIT_TOKEN_VALUE") {
		t.Errorf("the token was written into the file:\n%s", data)
	}
	if !strings.Contains(errOut, "takes ${INIT_ARG}") {
		t.Errorf("no warning names the argument's variable: %s", errOut)
	}
	cfg, err := config.Load(out, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := config.ResolveSecrets(cfg, config.SecretSources{LookupEnv: os.LookupEnv}); err != nil {
		t.Fatal(err)
	}
	if env := cfg.Servers[0].Env; env["TOKEN"] != "ghp_INIT_TOKEN_VALUE" || env["MIX"] != "x-ghp_INIT_TOKEN_VALUE-/ws" {
		t.Errorf("serve would run the server with %v", env)
	}
}
