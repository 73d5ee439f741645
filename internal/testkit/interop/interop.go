// Package interop locates the real, pinned MCP servers from npm that
// interop tests run as child processes.
//
// The servers are declared in servers/package.json and pinned by
// servers/package-lock.json; `make test` installs them with `npm ci`.
// A test that needs one and finds it missing fails (never skips) with the
// command that installs it.
package interop

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// The pinned servers, by the name of their executable in node_modules/.bin.
const (
	Everything         = "mcp-server-everything"
	Filesystem         = "mcp-server-filesystem"
	Memory             = "mcp-server-memory"
	SequentialThinking = "mcp-server-sequential-thinking"
)

// Dir is the folder holding package.json and, once installed, node_modules.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "servers")
}

// Bin returns the absolute path of the named server's executable, or fails
// t with the command that installs it.
func Bin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("interop: %s is not installed (%v); run `make deps` (npm ci in %s)", name, err, Dir())
	}
	return p
}

// Command returns the argv that starts the named server on stdio, with
// the arguments each one needs: server-everything takes its transport
// name, server-filesystem the directories it may touch (root), the others
// nothing. The memory server keeps its knowledge graph in the file named
// by MEMORY_FILE_PATH; callers should set that to a temporary file.
func Command(t testing.TB, name, root string) []string {
	t.Helper()
	argv := []string{Bin(t, name)}
	switch name {
	case Everything:
		argv = append(argv, "stdio")
	case Filesystem:
		argv = append(argv, root)
	}
	return argv
}

// The server scripts of this package (servers/*.mjs), written on the
// pinned TypeScript SDKs with the same tools (servers/tools.mjs): text,
// an image, structured content, a tool error, progress, cancellation
// and a change of the tool list.
const (
	// ModernServer is the SDK v2 (@modelcontextprotocol/server)
	// serveStdio entry: argument "serve" serves both eras (the first
	// request pins one), "reject" only 2026-07-28.
	ModernServer = "modern-server.mjs"
	// LegacyServer is SDK 1.x (@modelcontextprotocol/sdk): the
	// initialize handshake only.
	LegacyServer = "legacy-server.mjs"
	// ModernHTTPServer is ModernServer over Streamable HTTP: the SDK
	// v2's createMcpHandler on 127.0.0.1:$PORT/mcp; argument "reject"
	// serves 2026-07-28 only, "serve" the 2025 era statelessly too.
	ModernHTTPServer = "modern-http-server.mjs"
)

// Script returns the argv that runs the named server script with node,
// or fails t when node or the script's SDK is not installed.
func Script(t testing.TB, name string, args ...string) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("interop: node is not on PATH: %v", err)
	}
	pkg := "@modelcontextprotocol/server"
	if name == LegacyServer {
		pkg = "@modelcontextprotocol/sdk"
	}
	if _, err := os.Stat(filepath.Join(Dir(), "node_modules", pkg)); err != nil {
		t.Fatalf("interop: %s is not installed (%v); run `make deps` (npm ci in %s)", pkg, err, Dir())
	}
	return append([]string{node, filepath.Join(Dir(), name)}, args...)
}

// HTTP starts argv (a server that listens on 127.0.0.1 at $PORT) with a
// free port in its environment, waits until the port accepts
// connections, and returns the base URL ("http://127.0.0.1:PORT"). The
// server runs in a process group of its own, killed with it when the
// test ends; its stderr is kept and shown if it fails to listen.
func HTTP(t testing.TB, argv []string, env ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "PORT="+port), env...)
	var stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	// A cold node start takes a second or more: wait for the port, not
	// for a time, with a backstop.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			_ = c.Close()
			return "http://127.0.0.1:" + port
		}
		select {
		case <-exited:
			t.Fatalf("interop: %v exited before listening: %s", argv, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("interop: %v did not listen on %s within a minute: %s", argv, port, stderr.String())
		}
	}
}
