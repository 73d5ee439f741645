package interop

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// Every pinned server is installed, starts, and answers initialize: the
// contract later interop tests build on.
func TestPinnedServersAnswerInitialize(t *testing.T) {
	for _, name := range []string{Everything, Filesystem, Memory, SequentialThinking} {
		t.Run(name, func(t *testing.T) {
			argv := Command(t, name, t.TempDir())
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), "MEMORY_FILE_PATH="+t.TempDir()+"/memory.jsonl")
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"interop-test","version":"0"}}}` + "\n"))
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			// A backstop: node's cold start on a loaded machine is slow,
			// and the answer is an event the loop waits for.
			deadline := time.After(time.Minute)
			for {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatal("server closed stdout before answering initialize")
					}
					var msg struct {
						ID     int `json:"id"`
						Result struct {
							ProtocolVersion string `json:"protocolVersion"`
						} `json:"result"`
					}
					if json.Unmarshal([]byte(line), &msg) != nil || msg.ID != 1 {
						continue // e.g. an early notification
					}
					if !strings.HasPrefix(msg.Result.ProtocolVersion, "20") {
						t.Fatalf("initialize result without a protocol version: %s", line)
					}
					_ = stdin.Close()
					for range lines {
					}
					return
				case <-deadline:
					t.Fatal("no initialize response within a minute")
				}
			}
		})
	}
}

// The server scripts run on their pinned SDKs and answer the
// server/discover probe in their era: SDK v2 (either mode) with a
// DiscoverResult naming 2026-07-28, SDK 1.x with -32601.
func TestScriptsAnswerDiscover(t *testing.T) {
	for _, tt := range []struct {
		name string
		argv []string
		want string
	}{
		{"v2 serve", Script(t, ModernServer, "serve"), `"supportedVersions":["2026-07-28"]`},
		{"v2 reject", Script(t, ModernServer, "reject"), `"supportedVersions":["2026-07-28"]`},
		{"v1", Script(t, LegacyServer), `"code":-32601`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(tt.argv[0], tt.argv[1:]...)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"))
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			deadline := time.After(time.Minute) // a backstop for node's cold start
			for {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatal("server closed stdout before answering server/discover")
					}
					if !strings.Contains(line, `"id":0`) {
						continue
					}
					if !strings.Contains(line, tt.want) {
						t.Fatalf("answer %s lacks %s", line, tt.want)
					}
					_ = stdin.Close()
					for range lines {
					}
					return
				case <-deadline:
					t.Fatal("no answer to server/discover within a minute")
				}
			}
		})
	}
}
