package interop

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/leakcheck"
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
