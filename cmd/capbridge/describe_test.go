package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// TestDescribeSearch runs tools, describe, search and gen (live) with the
// real binary against a real `capbridge serve` and its demo server.
func TestDescribeSearch(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := []string{"XDG_RUNTIME_DIR=" + shortTempDir(t)}
	srv, _ := startServe(t, bin, env, "serve")
	preamble, _ := codegen.Preamble(codegen.Go)

	// tools --surface: the preamble once, then the demo server's surface.
	out, errOut, code := runCLI(t, bin, env, "tools", "--surface")
	if code != exitOK || !strings.HasPrefix(out, preamble+"\n// package demo, 6 tools\n") || strings.Count(out, preamble) != 1 ||
		!strings.Contains(out, "\nfunc Echo(ctx, EchoArgs{ // \"Returns its text unchanged.\"\n\tText string // \"the text to return\"\n})\n") {
		t.Errorf("tools --surface: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	// --lang: the same in TypeScript and Python, with their preambles.
	for _, tc := range []struct{ lang, head, echo string }{
		{"ts", "\n// module demo, 6 tools\n", "\nfunction echo({ // \"Returns its text unchanged.\"\n"},
		{"python", "\n# module demo, 6 tools\n", "\nasync def echo(*, # \"Returns its text unchanged.\"\n"},
	} {
		pre, _ := codegen.Preamble(codegen.Lang(tc.lang))
		out, errOut, code := runCLI(t, bin, env, "tools", "--surface", "--lang", tc.lang)
		if code != exitOK || !strings.HasPrefix(out, pre+tc.head) || !strings.Contains(out, tc.echo) {
			t.Errorf("tools --surface --lang %s: exit %d, stderr %q, stdout:\n%s", tc.lang, code, errOut, out)
		}
	}
	if _, errOut, code := runCLI(t, bin, env, "tools", "--surface", "--lang", "rust"); code != exitUsage || !strings.Contains(errOut, `--lang "rust"`) {
		t.Errorf("tools --lang rust: exit %d, stderr %q", code, errOut)
	}

	// describe: the named tools whole, in the order asked, by function
	// or wire name; every tool when none is named.
	out, errOut, code = runCLI(t, bin, env, "describe", "demo", "word_count", "Echo")
	wc, echo := strings.Index(out, "func WordCount(ctx, WordCountArgs{"), strings.Index(out, "func Echo(ctx, EchoArgs{")
	if code != exitOK || wc < 0 || echo < wc || !strings.Contains(out, `tool "echo"`) || !strings.Contains(out, `"the text to return"`) {
		t.Errorf("describe demo word_count Echo: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	out, _, code = runCLI(t, bin, env, "describe", "demo")
	if code != exitOK || strings.Count(out, "func ") != 6 {
		t.Errorf("describe demo: exit %d, stdout:\n%s", code, out)
	}

	// search: ranked, one a line; --server, --limit and --json.
	out, errOut, code = runCLI(t, bin, env, "search", "sha256", "digest")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || !strings.Contains(lines[0], ` demo demo.Sha256(ctx, demo.Sha256Args{Text string}) // tool "sha256"`) {
		t.Errorf("search sha256 digest: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	out, errOut, code = runCLI(t, bin, env, "search", "--json", "--limit", "2", "--server", "demo", "text")
	var matches []control.Match
	if err := json.Unmarshal([]byte(out), &matches); code != exitOK || err != nil || len(matches) != 2 || matches[0].Server != "demo" || matches[0].Score < matches[1].Score {
		t.Errorf("search --json --limit 2: exit %d, stderr %q, stdout %q, %v", code, errOut, out, err)
	}

	// --lang: the same tools in TypeScript's and Python's notation.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"describe", "--lang", "ts", "demo", "wordCount"}, []string{"function wordCount({ text: string })", "interface WordCountOutput {\n\tlines: number\n"}},
		{[]string{"describe", "--lang", "python", "demo", "word_count"}, []string{"async def word_count(*, text: str)", "class WordCountOutput(TypedDict):\n    lines: int\n"}},
		{[]string{"describe", "--lang", "go", "demo", "word_count"}, []string{"func WordCount(ctx, WordCountArgs{"}},
		{[]string{"search", "--lang", "ts", "--limit", "1", "sha256"}, []string{` demo demo.sha256({ text: string }) // tool "sha256"`}},
		{[]string{"search", "--lang", "python", "--limit", "1", "sha256"}, []string{` demo demo.sha256(*, text: str) # tool "sha256"`}},
	} {
		out, errOut, code := runCLI(t, bin, env, tc.args...)
		ok := code == exitOK
		for _, w := range tc.want {
			ok = ok && strings.Contains(out, w)
		}
		if !ok {
			t.Errorf("%s: exit %d, stderr %q, stdout:\n%s\nwant it to hold %q", strings.Join(tc.args, " "), code, errOut, out, tc.want)
		}
	}

	// Refusals say what was wrong.
	for _, tc := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"describe", "demo", "echo", "nope"}, exitError, []string{"unknown_tool", `"nope"`}},
		{[]string{"describe", "nope"}, exitError, []string{"unknown_server", `"nope"`}},
		{[]string{"describe"}, exitUsage, []string{"usage: capbridge describe"}},
		{[]string{"search", "--server", "nope", "echo"}, exitError, []string{"unknown_server", `"nope"`}},
		{[]string{"search", "zzqqxx"}, exitError, []string{`no tool matches "zzqqxx"`}},
		{[]string{"search"}, exitUsage, []string{"usage: capbridge search"}},
		{[]string{"search", "--limit", "101", "echo"}, exitUsage, []string{"usage: capbridge search"}},
		{[]string{"describe", "--lang", "rust", "demo"}, exitUsage, []string{`no façade language "rust"`, "usage: capbridge describe"}},
		{[]string{"search", "--lang", "rust", "echo"}, exitUsage, []string{`no façade language "rust"`, "usage: capbridge search"}},
	} {
		out, errOut, code := runCLI(t, bin, env, tc.args...)
		ok := code == tc.code && out == ""
		for _, s := range tc.says {
			ok = ok && strings.Contains(errOut, s)
		}
		if !ok {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d saying %q", strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.says)
		}
	}

	// gen, live: the surface file is the preamble, a blank line, the surface.
	dir := t.TempDir()
	if _, errOut, code := runCLI(t, bin, env, "gen", "--server", "demo", "--out", dir); code != exitOK {
		t.Fatalf("gen: exit %d, stderr %q", code, errOut)
	}
	surface, err := os.ReadFile(filepath.Join(dir, "demo.surface.go.txt"))
	if err != nil || !strings.HasPrefix(string(surface), preamble+"\n// package demo, 6 tools\n") {
		t.Errorf("demo.surface.go.txt: %v\n%s", err, surface)
	}

	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, more stdout %q", err, rest)
	}
}
