package bridge

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// policyProgram calls through the generated façade of server "t": a
// call within its guard, two that break it, and a destructive tool.
const policyProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/capbridge/capbridge/capwire"

	mt "policy.test/t"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	show := func(what string, r *capwire.Result, err error) {
		var d *capwire.Denied
		switch {
		case errors.As(err, &d):
			fmt.Printf("%s: %s at %s\n", what, d.Code, d.Path)
		case err != nil:
			fmt.Fprintln(os.Stderr, what, "failed:", err)
			os.Exit(1)
		default:
			fmt.Printf("%s: %s\n", what, r.Text())
		}
	}
	r, err := mt.Echo(ctx, mt.EchoArgs{Text: "/srv/data/a.txt"})
	show("within", r, err)
	r, err = mt.Echo(ctx, mt.EchoArgs{Text: "/etc/passwd"})
	show("outside", r, err)
	r, err = mt.Echo(ctx, mt.EchoArgs{Text: "/srv/data/../../etc/passwd"})
	show("escape", r, err)
	r, err = mt.Add(ctx, mt.AddArgs{A: 40, B: 2})
	show("destructive", r, err)
}
`

// TestPolicyThroughFacade runs destructive and restrict end to end: a
// program built against the façade the bridge generated calls through
// the call socket with only what a jail hands in, under a grant that
// reaches every tool and then under one that opts in to destructive
// tools.
func TestPolicyThroughFacade(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg, err := config.Load("capbridge.toml", []byte(`[mcp.t]
command = "/x"
destructive = ["add"]
restrict.echo."/text" = { prefix = "/srv/data/" }
`))
	if err != nil {
		t.Fatal(err)
	}
	s := mcptestServer("t", mcptest.Scenario{})
	s.Destructive, s.Restrict = cfg.Servers[0].Destructive, cfg.Servers[0].Restrict
	tb := startBridge(t, nil, s)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := tb.control()
	f, err := ctl.Facade(ctx, &control.FacadeRequest{Server: "t", Lang: "go"})
	if err != nil {
		t.Fatal(err)
	}
	every, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	optIn, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, AllowDestructive: true})
	if err != nil {
		t.Fatal(err)
	}
	ctl.Close()

	dir := goProgramDir(t, "policy.test")
	writeFile(t, filepath.Join(dir, f.Module, f.Module+".go"), f.Source)
	writeFile(t, filepath.Join(dir, "main.go"), policyProgram)
	bin := buildGoProgram(t, dir)

	for _, c := range []struct {
		token, want string
	}{
		{every.Token, "within: /srv/data/a.txt\noutside: not_granted at /text\nescape: not_granted at /text\ndestructive: not_granted at \n"},
		{optIn.Token, "within: /srv/data/a.txt\noutside: not_granted at /text\nescape: not_granted at /text\ndestructive: 42\n"},
	} {
		if out := runGoProgram(t, bin, tb.CallSocket(), c.token); out != c.want {
			t.Errorf("program output:\n%s\nwant:\n%s", out, c.want)
		}
	}
	tb.shutdown()
}
