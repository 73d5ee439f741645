package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tailscale/hujson"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// hostAnswers starts argv as an MCP host would and checks that it
// answers tools/list with capbridge mcp's three tools, then ends it.
func hostAnswers(t *testing.T, what string, argv []string) {
	t.Helper()
	h := startMCP(t, argv[0], append(argv[1:], "--warm", "0")...)
	var names []string
	for _, tool := range h.call(1, "tools/list", map[string]any{}, nil)["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"search", "describe", "run"}) {
		t.Errorf("%s: tools %v", what, names)
	}
	if err := h.close(); err != nil {
		t.Errorf("%s: %v\n%s", what, err, h.stderr.String())
	}
}

// capbridge init --mcp-host writes each host's entry, which starts
// capbridge mcp and answers tools/list; with --mcp-host-config it adds the
// entry to the host's file, keeping its other servers and comments, and
// replaces it only with --force.
func TestInitMCPHost(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := demoConfig(t, shortTempDir(t), bin, "")
	for _, host := range []string{"claude-code", "claude-desktop", "cursor", "vscode"} {
		out, errOut, code := runCLI(t, bin, nil, "init", "--mcp-host", host, "-c", cfg)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", host, code, errOut)
		}
		var argv []string
		if host == "claude-code" {
			line, ok := strings.CutPrefix(strings.TrimSpace(out), "claude mcp add capbridge -- ")
			if !ok {
				t.Fatalf("claude-code: %q", out)
			}
			argv = strings.Fields(line)
		} else {
			var doc map[string]map[string]hostEntry
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%s: %v\n%s", host, err, out)
			}
			e := doc[mcpHosts[host]]["capbridge"]
			if (host == "vscode") != (e.Type == "stdio") {
				t.Errorf("%s: type %q", host, e.Type)
			}
			argv = append([]string{e.Command}, e.Args...)
		}
		if argv[0] != bin || !slices.Contains(argv, cfg) {
			t.Errorf("%s: the entry runs %v; want %s with -c %s, both absolute", host, argv, bin, cfg)
		}
		hostAnswers(t, host, argv)
	}

	file := filepath.Join(t.TempDir(), ".vscode", "mcp.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	const before = "{\n  // the user's own servers\n  \"servers\": {\n    \"git\": { \"command\": \"uvx\", \"args\": [\"mcp-server-git\"] },\n  },\n}\n"
	if err := os.WriteFile(file, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, bin, nil, "init", "--mcp-host", "vscode", "-c", cfg, "--mcp-host-config", file); code != 0 {
		t.Fatalf("adding to %s: %s", file, errOut)
	}
	data, _ := os.ReadFile(file)
	std, err := hujson.Standardize(slices.Clone(data))
	var doc struct{ Servers map[string]hostEntry }
	if err == nil {
		err = json.Unmarshal(std, &doc)
	}
	if err != nil || doc.Servers["git"].Command != "uvx" || doc.Servers["capbridge"].Command != bin || !strings.Contains(string(data), "// the user's own servers") {
		t.Fatalf("%s after init: %v\n%s", file, err, data)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("the host config's mode became %v", fi.Mode().Perm())
	}
	hostAnswers(t, "the added entry", append([]string{doc.Servers["capbridge"].Command}, doc.Servers["capbridge"].Args...))
	if _, errOut, code := runCLI(t, bin, nil, "init", "--mcp-host", "vscode", "-c", cfg, "--mcp-host-config", file); code == 0 || !strings.Contains(errOut, "--force") {
		t.Errorf("adding it again: exit %d, %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, bin, nil, "init", "--mcp-host", "vscode", "-c", cfg, "--mcp-host-config", file, "--force"); code != 0 {
		t.Errorf("replacing it: %s", errOut)
	}
}

// The README's entries, as a user copies them (with capbridge on PATH and
// their own config), start capbridge mcp, which answers tools/list: the
// Claude Code line and the JSON entry for Claude Desktop, VS Code and
// Cursor.
func TestREADMEHostEntries(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := demoConfig(t, shortTempDir(t), bin, "")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Their config path, and capbridge as PATH finds it, become the
	// test's.
	user := func(argv []string) []string {
		for i := range argv {
			if i > 0 && argv[i-1] == "-c" {
				argv[i] = cfg
			}
		}
		if argv[0] == "capbridge" {
			argv[0] = bin
		}
		return argv
	}
	line := regexp.MustCompile("(?m)^claude mcp add capbridge -- (.+)$").FindSubmatch(readme)
	if line == nil {
		t.Fatal("the README has no `claude mcp add capbridge -- …` line")
	}
	hostAnswers(t, "the README's Claude Code line", user(strings.Fields(string(line[1]))))

	block := regexp.MustCompile("(?s)```json\n(\\{ \"mcpServers\".*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("the README has no JSON entry with mcpServers")
	}
	var doc struct{ MCPServers map[string]hostEntry }
	if err := json.Unmarshal(block[1], &doc); err != nil {
		t.Fatalf("the README's JSON entry: %v\n%s", err, block[1])
	}
	e, ok := doc.MCPServers["capbridge"]
	if !ok {
		t.Fatalf("the README's JSON entry has no capbridge: %s", block[1])
	}
	hostAnswers(t, "the README's JSON entry", user(append([]string{e.Command}, e.Args...)))
}

// A host config kept in a dotfiles repository and linked into place
// (stow, chezmoi, home-manager) is updated through the link: the link
// stays, its target gets the entry, and the target's mode is kept.
func TestHostConfigThroughSymlink(t *testing.T) {
	dotfiles := t.TempDir()
	real := filepath.Join(dotfiles, "claude_desktop_config.json")
	if err := os.WriteFile(real, []byte("{\n  \"mcpServers\": {\n    \"git\": {\"command\": \"uvx\"}\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := addHostEntry(link, "mcpServers", hostEntry{Command: "/opt/capbridge", Args: []string{"mcp", "-c", "/etc/capbridge.toml"}}, false, &out); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v, %v", fi, err)
	}
	got, _ := os.ReadFile(real)
	if !strings.Contains(string(got), `"capbridge"`) || !strings.Contains(string(got), `"git"`) {
		t.Fatalf("the link's target:\n%s", got)
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Fatalf("the target's mode became %04o", fi.Mode().Perm())
	}
	dangling := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.Symlink(filepath.Join(dotfiles, "absent.json"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := addHostEntry(dangling, "mcpServers", hostEntry{Command: "/opt/capbridge"}, false, &out); err == nil {
		t.Fatal("a link to no file was written over")
	}
}

// init --out FILE --force writes through FILE's symbolic link, and never
// leaves a file more readable than it was.
func TestInitForceKeepsLinkAndMode(t *testing.T) {
	dotfiles := t.TempDir()
	real := filepath.Join(dotfiles, "capbridge.toml")
	if err := os.WriteFile(real, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "capbridge.toml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runInProcess("init", "--out", link, "--force"); code != exitOK {
		t.Fatalf("init --force: %d %s", code, errOut)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("init --force replaced the link with a file")
	}
	if got, _ := os.ReadFile(real); string(got) == "# mine\n" {
		t.Error("the link's target was not written")
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Errorf("a 0600 file came back %04o", fi.Mode().Perm())
	}
}

// A host config that repeats a key is refused, naming both lines: hosts
// read the last of the two, and the entry would go into the first.
func TestHostConfigDuplicateKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	const before = "{\n  // comments are kept out of the count\n  \"mcpServers\": {},\n  \"mcpServers\": {\"git\": {\"command\": \"uvx\"}}\n}\n"
	if err := os.WriteFile(p, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := addHostEntry(p, "mcpServers", hostEntry{Command: "/opt/capbridge", Args: []string{"mcp"}}, false, &out)
	if err == nil || !strings.Contains(err.Error(), p+":4:") || !strings.Contains(err.Error(), "first on line 3") {
		t.Fatalf("a repeated key: %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != before {
		t.Fatal("the file was changed")
	}
}

// A config path whose bytes are not UTF-8 (legal on Linux) is refused:
// the host's JSON would hold another path, one that does not exist.
func TestHostEntryNonUTF8Path(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "caf\xe9")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err) // Linux's file systems take any bytes but '/' and NUL
	}
	cfg := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(cfg, []byte("[bridge]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(t.TempDir(), "mcp.json")
	var out bytes.Buffer
	if err := mcpHostEntry("cursor", cfg, into, false, &out); err == nil || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("a non-UTF-8 path: %v", err)
	}
	if _, err := os.Stat(into); err == nil {
		t.Fatal("the host config was written")
	}
}

// A host config nested deeper than any host writes is refused with its
// line before it is parsed: the JSONC parser recurses once per level, and
// a 1 MiB file of '[' was a stack overflow, a crash of init.
func TestInitMCPHostConfigTooDeep(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "mcp.json")
	deep := "{\"mcpServers\": {},\n\"x\": " + strings.Repeat("[", 1<<20) + "\n}"
	if err := os.WriteFile(host, []byte(deep), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capbridge.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runInit([]string{"--mcp-host", "cursor", "-c", filepath.Join(dir, "capbridge.toml"), "--mcp-host-config", host}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), host+":2: arrays and objects nested more than") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}
