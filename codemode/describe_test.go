package codemode

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A model that has never seen capbridge learns to use it from the run
// tool's description alone: it names every language offered and how each
// imports a server, and carries one complete example, in the first
// language, which runs as written. Each language in turn is the first.
func TestDescriptionTeaches(t *testing.T) {
	defer leakcheck.Check(t)()
	argv, env := mcptest.Command(mcptest.Scenario{Tools: []json.RawMessage{
		json.RawMessage(`{"name":"content","description":"Answers one block of every kind.","inputSchema":{"type":"object","properties":{}}}`),
		json.RawMessage(`{"name":"echo","description":"Answers text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}`),
	}})
	srv := bridgetest.NewServer(t, bridgetest.WithServers(bridgetest.Stdio("t", argv, env)), bridgetest.WithConfig(func(c *config.Config) {
		if os.Getuid() == 0 {
			c.Bridge.CallSocketMode = 0o666
			c.Bridge.AllowedUIDs = []uint32{0, 65534}
		}
	}))
	defer srv.Close()
	if os.Getuid() == 0 {
		if err := os.Chmod(srv.Dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{TypeScript, Python}
	if _, err := exec.LookPath("go"); err == nil {
		all = append(all, Go)
	}
	imports := map[string]string{TypeScript: `import * as SERVER from "./SERVER.js";`, Python: "import SERVER", Go: `import "mcp/SERVER"`}
	for _, first := range all {
		t.Run(first, func(t *testing.T) {
			langs := append([]string{first}, slices.DeleteFunc(slices.Clone(all), func(l string) bool { return l == first })...)
			r, err := New(Config{Control: srv.Config.Bridge.ControlSocket, Languages: langs, GoCache: goTestCache(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
			defer cancel()
			tools, err := r.Tools(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			var desc string
			for _, tool := range tools {
				if tool.Name == "run" {
					desc = tool.Description
				}
			}
			if !strings.Contains(desc, "Languages: "+strings.Join(langs, ", ")+".") {
				t.Errorf("the description does not name the languages %v:\n%s", langs, desc)
			}
			for _, l := range langs {
				if !strings.Contains(desc, imports[l]) {
					t.Errorf("the description lacks %s's import line %s", l, imports[l])
				}
			}
			head := "\nExample (" + first + "):\n"
			i := strings.Index(desc, head)
			j := strings.Index(desc, "\n\nThe servers' tools")
			if i < 0 || j < i {
				t.Fatalf("no example in %s:\n%s", first, desc)
			}
			example := desc[i+len(head) : j]
			res, err := r.Run(ctx, Request{Language: first, Code: example, Timeout: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() || res.Calls != 1 || len(res.Value) == 0 || !strings.Contains(res.Stdout, "a text block") {
				t.Errorf("the example, as written:\n%s\nran: %+v", example, res)
			}
		})
	}
}
