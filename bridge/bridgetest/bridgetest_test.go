package bridgetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// The test binary doubles as the MCP server the bridge runs.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	leakcheck.Main(m)
}

func mcptestServer(name string, sc mcptest.Scenario) config.Server {
	argv, env := mcptest.Command(sc)
	return bridgetest.Stdio(name, argv, env)
}

// A started server answers a call through a granted client, and its
// control socket reaches the same bridge; Close leaves nothing behind
// (leakcheck: no goroutine, descriptor or child) and removes the sockets.
func TestNewServer(t *testing.T) {
	defer leakcheck.Check(t)()
	var srv *bridgetest.Server
	t.Run("serve", func(t *testing.T) {
		srv = bridgetest.NewServer(t, bridgetest.WithServers(mcptestServer("t", mcptest.Scenario{})),
			bridgetest.WithConfig(func(c *config.Config) { c.Bridge.MaxConnInflight = 4 }))
		if len(srv.Outcomes) != 1 || srv.Outcomes[0].State != bridge.StateReady || srv.Config.Bridge.MaxConnInflight != 4 {
			t.Fatalf("outcomes %+v, config %+v", srv.Outcomes, srv.Config.Bridge)
		}
		c := srv.Dial(srv.Grant(map[string][]string{"t": {"echo"}}))
		ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Backstop)
		defer cancel()
		if r, err := c.Call(ctx, "t", "echo", map[string]any{"text": "hi"}); err != nil || r.Text() != "hi" {
			t.Fatalf("echo: %+v, %v", r, err)
		}
		var d *capwire.Denied
		if _, err := c.Call(ctx, "t", "add", map[string]any{"a": 1, "b": 2}); !errors.As(err, &d) || d.Code != capwire.CodeNotGranted {
			t.Fatalf("add outside the grant: %v, want not_granted", err)
		}
		st, err := srv.Control().Status(ctx)
		if err != nil || len(st.Servers) != 1 || st.Servers[0].Name != "t" {
			t.Fatalf("status: %+v, %v", st, err)
		}
	})
	for _, p := range []string{srv.CallSocket(), srv.ControlSocket()} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the test: %v, want it removed", p, err)
		}
	}
}

// A server that fails its first boot fails the test unless it is
// allowed to; allowed, its outcome says why.
func TestAllowFailedBoot(t *testing.T) {
	defer leakcheck.Check(t)()
	bad := mcptestServer("bad", mcptest.Scenario{ExitBeforeHandshake: true})
	bad.Restart = config.RestartNever
	srv := bridgetest.NewServer(t, bridgetest.WithServers(bad), bridgetest.AllowFailedBoot())
	if o := srv.Outcomes; len(o) != 1 || o[0].State != bridge.StateFailed || o[0].Reason == "" {
		t.Fatalf("outcomes %+v, want bad failed with a reason", o)
	}
	srv.Close()
}

// Stdio turns a command line and its environment into a server's
// configuration.
func ExampleStdio() {
	s := bridgetest.Stdio("files", []string{"/usr/bin/mcp-files", "--root", "/srv"}, []string{"LOG=debug"})
	fmt.Println(s.Name, s.Command, s.Args, s.Env)
	// Output: files /usr/bin/mcp-files [--root /srv] map[LOG:debug]
}

// A test runs a bridge with the servers it needs, grants a program its
// tools, and calls them as a façade would.
func ExampleNewServer() {
	_ = func(t *testing.T) {
		srv := bridgetest.NewServer(t, bridgetest.WithServers(
			bridgetest.Stdio("files", []string{"mcp-files", "--root", t.TempDir()}, nil)))
		c := srv.Dial(srv.Grant(map[string][]string{"files": {"read_file"}}))
		r, err := c.Call(context.Background(), "files", "read_file", map[string]any{"path": "a.txt"})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(r.Text())
	}
}
