package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// hostileText is what a server would have an operator's terminal act on:
// a window title (OSC 0), a line erased and the cursor sent home, a C1
// CSI that clears the screen, and a right-to-left override.
const hostileText = "\x1b]0;PWNED\x07\x1b[2K\rSafe tool \u009b2J\u202egnp.exe"

// actedOn reports whether s holds a rune a terminal acts on rather than
// shows: a control other than the line feed, or a format character.
func actedOn(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
	})
}

// What servers say (a tool's name, description and parameters, a
// failure's reason and stderr, a call's error, what changed since the
// lock) reaches the operator's terminal with nothing a terminal acts on,
// while a result piped elsewhere keeps its exact bytes.
func TestServerTextShownSafely(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	quoted := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	echo := `{"name":"echo","description":` + quoted("Echo. "+hostileText) + `,"inputSchema":{"type":"object","properties":{` +
		`"text":{"type":"string","description":` + quoted(hostileText) + `},` +
		quoted("x"+hostileText) + `:{"type":"string","default":` + quoted(hostileText) + `}},"required":["text"]}}`
	rpcError := `{"name":"rpc_error","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}`
	named := `{"name":` + quoted("x"+hostileText) + `,"inputSchema":{"type":"object","properties":{` + quoted("p"+hostileText) + `:{"type":"string"}}}}`
	dir := shortTempDir(t)
	stderrScript := `printf '\033]0;PWNED\007\302\233 2J \342\200\256 gnp.exe\n' >&2; exit 3`
	cfg := filepath.Join(dir, "capbridge.toml")
	toml := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n\n" +
		"[mcp.evil]\n" + mcptest.TOML(mcptest.Scenario{Tools: []json.RawMessage{json.RawMessage(echo), json.RawMessage(rpcError), json.RawMessage(named)}}) + "\n" +
		"[mcp.broken]\ncommand = \"/bin/sh\"\nargs = [\"-c\", " + quoted(stderrScript) + "]\nrestart = \"never\"\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	// lock names the tools it locked; skew, against a lock of another
	// listing, what changed, in the server's words. (Their stderr is the
	// boot's log, JSON lines for a program to read when it is not a
	// terminal; on one it is the console format, which quotes.)
	lockFile := filepath.Join(dir, "capbridge.lock")
	other := filepath.Join(dir, "other.toml")
	otherTOML := "[mcp.evil]\n" + mcptest.TOML(mcptest.Scenario{Tools: []json.RawMessage{json.RawMessage(echo), json.RawMessage(rpcError),
		json.RawMessage(`{"name":` + quoted("x"+hostileText) + `,"inputSchema":{"type":"object"}}`)}}) + "\n"
	if err := os.WriteFile(other, []byte(otherTOML), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lock", "-c", other, "--out", lockFile},
		{"skew", "-c", cfg, "--lock", lockFile},
		{"doctor", "-c", cfg},
	} {
		out, _, _ := runCLI(t, bin, nil, args...)
		if !strings.Contains(out, "PWNED") || actedOn(out) {
			t.Errorf("capbridge %s, which should show the server's text inert: %q", args[0], out)
		}
	}
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg)

	for _, args := range [][]string{
		{"tools", "-c", cfg, "evil"},
		{"tools", "-c", cfg, "evil", "--schema"},
		{"status", "-c", cfg},
		{"call", "-c", cfg, "evil", "rpc_error", "message=" + hostileText},
	} {
		out, errOut, _ := runCLI(t, bin, nil, args...)
		if !strings.Contains(out+errOut, "PWNED") {
			t.Errorf("capbridge %s does not show the server's text:\nstdout %q\nstderr %q", strings.Join(args[:1], " "), out, errOut)
		}
		if actedOn(out) || actedOn(errOut) {
			t.Errorf("capbridge %s passes on what a terminal acts on:\nstdout %q\nstderr %q", strings.Join(args, " "), out, errOut)
		}
	}
	// Piped, a result is the tool's bytes.
	if out, errOut, code := runCLI(t, bin, nil, "call", "-c", cfg, "evil", "echo", "text="+hostileText); code != exitOK || out != hostileText+"\n" {
		t.Errorf("call echo, piped: exit %d, stdout %q, stderr %q; want the text as sent", code, out, errOut)
	}
	if _, err := srv.stop(); err != nil {
		t.Fatal(err)
	}
}

// On a terminal a result keeps its lines and loses what the terminal
// would act on; elsewhere it is left as it is.
func TestForTerminal(t *testing.T) {
	if got := inert.Lines("a\x1b[2Jb\nc\u202ed\te"); got != "a\ufffd[2Jb\nc\ufffdd\ufffde" {
		t.Errorf("inert.Lines: %q", got)
	}
	var buf bytes.Buffer
	if got := forTerminal(&buf, hostileText); got != hostileText {
		t.Errorf("forTerminal to a buffer changed the text: %q", got)
	}
}

// serve's progress lines, on the terminal it starts from, quote a
// failing server's reason with nothing a terminal acts on.
func TestProgressLinesShownSafely(t *testing.T) {
	var buf bytes.Buffer
	lines := progressLines(&buf)
	lines(bridge.Progress{Server: "s", State: bridge.StateFailed, Reason: hostileText})
	lines(bridge.Progress{Server: "s", State: bridge.StateBackoff, Reason: hostileText})
	if actedOn(buf.String()) || !strings.Contains(buf.String(), "PWNED") {
		t.Errorf("progress lines: %q", buf.String())
	}
}
