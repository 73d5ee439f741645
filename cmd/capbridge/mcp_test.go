package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// TestMCPEndToEnd drives `capbridge mcp` as an MCP host would, with the
// official TypeScript SDK's client, against the real filesystem and memory
// servers from npm: the tool list and its descriptions, search, describe,
// then a TypeScript program and a Python program that each combine the two
// servers, and a program whose network access the jail refuses.
func TestMCPEndToEnd(t *testing.T) {
	defer leakcheck.Check(t)()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	files := filepath.Join(dir, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(files, "notes.txt")
	if err := os.WriteFile(notes, []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsArgv := interop.Command(t, interop.Filesystem, files)
	memArgv := interop.Command(t, interop.Memory, "")
	cfg := filepath.Join(dir, "capbridge.toml")
	toml := fmt.Sprintf("[mcp.filesystem]\ncommand = %q\nargs = %s\n\n[mcp.memory]\ncommand = %q\nenv = { MEMORY_FILE_PATH = %q }\n",
		fsArgv[0], tomlList(fsArgv[1:]), memArgv[0], filepath.Join(dir, "memory.jsonl"))
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	sdk := filepath.Join(interop.Dir(), "node_modules", "@modelcontextprotocol", "sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script, _ := filepath.Abs("testdata/mcpclient.mjs")
	// From a directory with no checkout, without CAPBRIDGE_*_CLIENT: the
	// binary carries its clients, as a `go install`ed one must.
	cmd := exec.CommandContext(ctx, node, script, sdk, bin, notes, "mcp", "-c", cfg, "--allow-destructive")
	cmd.Dir = dir
	cmd.Env = withoutEnv("CAPBRIDGE_TS_CLIENT", "CAPBRIDGE_PY_CLIENT")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the client: %v\nstderr:\n%s", err, stderr.String())
	}
	var got struct {
		Server   struct{ Name string }
		Tools    map[string]string
		Search   string
		Describe string
		TS, Py   struct {
			IsError    bool
			Text       string
			Structured struct {
				Result   json.RawMessage
				Calls    int
				Servers  []string
				ExitCode int `json:"exit_code"`
			}
		}
		Denied struct {
			IsError bool
			Text    string
		}
		Progress int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client printed %q: %v\nstderr:\n%s", out, err, stderr.String())
	}
	if got.Server.Name != "capbridge" {
		t.Errorf("server name %q", got.Server.Name)
	}
	run := got.Tools["run"]
	// A model that has never seen capbridge learns from the description
	// alone: the languages, the import lines, one complete example, and
	// the servers' declarations.
	for _, want := range []string{"typescript", "python", `import * as filesystem from "./filesystem.js";`, "import SERVER",
		"Example (typescript):", "export default", "function readTextFile(", "function searchNodes("} {
		if !strings.Contains(run, want) {
			t.Errorf("the run tool's description lacks %q", want)
		}
	}
	if _, ok := got.Tools["search"]; !ok || got.Tools["describe"] == "" {
		t.Errorf("tools %v, want search, describe and run", got.Tools)
	}
	if !strings.Contains(got.Search, "filesystem") || !strings.Contains(got.Search, "readTextFile") {
		t.Errorf("search found:\n%s", got.Search)
	}
	if !strings.Contains(got.Describe, "async def search_nodes(") || !strings.Contains(got.Describe, "import memory") {
		t.Errorf("describe gave:\n%s", got.Describe)
	}
	if got.TS.IsError || string(got.TS.Structured.Result) != `["alpha","beta","gamma"]` || got.TS.Structured.Calls != 3 {
		t.Errorf("the TypeScript run: %+v", got.TS)
	}
	if got.Py.IsError || string(got.Py.Structured.Result) != `["ALPHA","BETA","GAMMA"]` || got.Py.Structured.Calls != 3 {
		t.Errorf("the Python run: %+v", got.Py)
	}
	if b, err := os.ReadFile(notes + ".upper"); err != nil || string(b) != "ALPHA\nBETA\nGAMMA" {
		t.Errorf("the file the Python run wrote: %q, %v", b, err)
	}
	if !got.Denied.IsError || !strings.Contains(got.Denied.Text, "Network is unreachable") {
		t.Errorf("a program's connection to 127.0.0.1: %+v", got.Denied)
	}
	t.Logf("progress notifications: %d", got.Progress)
}

// withoutEnv is this process's environment less the named variables.
func withoutEnv(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

func tomlList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// capbridge mcp on stdio stops on SIGTERM while its host still holds its
// stdin open (a supervisor, a terminal's ^C, systemd stopping it): it
// takes the signal over to shut down in order, so it must act on it
// rather than wait for its next line.
func TestMCPStopsOnSignal(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "mcp", "--warm", "0")
	cmd.Env = withoutEnv("CAPBRIDGE_TS_CLIENT", "CAPBRIDGE_PY_CLIENT")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"protocolVersion"`) {
		t.Fatalf("initialize: %q, %v\nstderr:\n%s", line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute): // a backstop: it stops at once
		stdin.Close()
		<-exited
		t.Fatalf("capbridge mcp went on after SIGTERM, its stdin open\nstderr:\n%s", stderr.String())
	}
}
