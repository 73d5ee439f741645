package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// eraProgram calls, through the façades the bridge generated, a server
// that speaks only MCP 2026-07-28 (the TypeScript SDK v2 with legacy
// 'reject'), a legacy one (SDK 1.x), and a modern server that answers
// every call input_required.
const eraProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/capbridge/capbridge/capwire"

	"e2e.test/ir"
	"e2e.test/legacy"
	"e2e.test/modern"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(r *capwire.Result, err error) *capwire.Result {
		if err != nil {
			fmt.Fprintln(os.Stderr, "call failed:", err)
			os.Exit(1)
		}
		return r
	}
	r := must(modern.Echo(ctx, modern.EchoArgs{Text: "héllo"}))
	fmt.Printf("modern echo: %s\n", r.Text())
	r = must(modern.Image(ctx))
	fmt.Printf("modern image: %s:%s\n", r.Content[0].Type, r.Content[0].Kind)
	r = must(modern.Add(ctx, modern.AddArgs{A: 40, B: 2}))
	var sum struct{ Sum float64 ` + "`msgpack:\"sum\"`" + ` }
	if err := r.Decode(&sum); err != nil {
		fmt.Fprintln(os.Stderr, "decode:", err)
		os.Exit(1)
	}
	fmt.Printf("modern add: %s sum=%v\n", r.Text(), sum.Sum)
	r = must(modern.Fail(ctx))
	fmt.Printf("modern fail: %s is_error=%v\n", r.Text(), r.IsError)
	r = must(legacy.Echo(ctx, legacy.EchoArgs{Text: "old"}))
	fmt.Printf("legacy echo: %s\n", r.Text())
	_, err := ir.Echo(ctx, ir.EchoArgs{Text: "x"})
	var d *capwire.Denied
	if !errors.As(err, &d) {
		fmt.Fprintln(os.Stderr, "want a denial, got", err)
		os.Exit(1)
	}
	fmt.Printf("ir echo: denied %s retryable=%v\n", d.Code, capwire.Retryable(d.Code))
}
`

const eraWant = `modern echo: héllo
modern image: other:image
modern add: 42 sum=42
modern fail: it failed is_error=true
legacy echo: old
ir echo: denied input_required retryable=false
`

// TestEndToEndEras boots a modern-only server beside a legacy one and
// serves both to a Go program through generated façades; status names
// each one's era, revision and serverInfo.
func TestEndToEndEras(t *testing.T) {
	defer leakcheck.Check(t)()
	script := func(name string, argv []string) config.Server {
		s := config.NewServer(name, argv[0])
		s.Args = argv[1:]
		s.StartupTimeout = time.Minute
		s.InheritEnv = []string{"PATH", "HOME"}
		return s
	}
	tb := startBridge(t, nil,
		script("modern", interop.Script(t, interop.ModernServer, "reject")),
		script("legacy", interop.Script(t, interop.LegacyServer)),
		mcptestServer("ir", mcptest.Scenario{Era: mcptest.EraModernOnly, ResultType: "input_required"}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctl := tb.control()
	st, err := ctl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]control.ServerStatus{
		"modern": {Era: "modern", Protocol: "2026-07-28", ServerName: "capbridge-interop-modern", ServerVersion: "2.4.0"},
		"legacy": {Era: "legacy", Protocol: "2025-11-25", ServerName: "capbridge-interop-legacy", ServerVersion: "1.32.2"},
		"ir":     {Era: "modern", Protocol: "2026-07-28", ServerName: "mcptest", ServerVersion: "0.1.0"},
	}
	for _, s := range st.Servers {
		w := want[s.Name]
		if s.State != string(StateReady) || s.Era != w.Era || s.Protocol != w.Protocol || s.ServerName != w.ServerName || s.ServerVersion != w.ServerVersion {
			t.Errorf("status of %s: %+v", s.Name, s)
		}
	}
	granted, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"modern": nil, "legacy": nil, "ir": nil}})
	if err != nil {
		t.Fatal(err)
	}
	dir := goProgramDir(t, "e2e.test")
	for _, server := range []string{"modern", "legacy", "ir"} {
		f, err := ctl.Facade(ctx, &control.FacadeRequest{Server: server, Lang: "go"})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f.Module, f.Module+".go"), f.Source)
	}
	writeFile(t, filepath.Join(dir, "main.go"), eraProgram)
	ctl.Close()

	bin := buildGoProgram(t, dir)
	if out := runGoProgram(t, bin, tb.CallSocket(), granted.Token); out != eraWant {
		t.Errorf("program output:\n%s\nwant:\n%s", out, eraWant)
	}
	tb.shutdown()
}

// A modern server's list_changed arrives on its listen stream and
// re-lists the server as the legacy notification does.
func TestRelistModern(t *testing.T) {
	defer leakcheck.Check(t)()
	sc := mcptest.Scenario{
		Era:      mcptest.EraModernOnly,
		Tools:    []json.RawMessage{tool("relist", `{"type":"object"}`)},
		Relisted: []json.RawMessage{tool("relist", `{"type":"object"}`), tool("add", `{"type":"object"}`)},
	}
	tb := startBridge(t, nil, mcptestServer("s", sc))
	srv := tb.srv("s")
	before := srv.current()
	c := tb.dial(tb.grant(map[string][]string{"s": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	if r, err := c.Call(ctx, "s", "relist", map[string]any{}); err != nil || r.Text() != "ok" {
		t.Fatalf("relist: %+v, %v", r, err)
	}
	eventually(t, "the new table published", func() bool { return srv.current() != before })
	fresh := tb.dial(tb.grant(map[string][]string{"s": nil}))
	if r, err := fresh.Call(ctx, "s", "add", map[string]any{"a": 1, "b": 2}); err != nil || r.Text() != "3" {
		t.Errorf("added tool: %+v, %v", r, err)
	}
	c.Close()
	fresh.Close()
	tb.shutdown()
}

// A denial's message quotes what a server sent, cut to a bound: the cut
// must not split a character, and whatever the text, the call gets its
// one reply. A 2026-07-28 server asking for input under a key whose
// 64th byte is inside "é" once cost the call its reply: the clipped key
// was invalid UTF-8, the denial did not encode, and the call waited out
// its caller's deadline.
func TestInputRequiredKeyCutMidRune(t *testing.T) {
	defer leakcheck.Check(t)()
	key := strings.Repeat("a", 63) + "é"
	tb := startBridge(t, nil, mcptestServer("ir", mcptest.Scenario{Era: mcptest.EraModernOnly, ResultType: "input_required", InputRequestKey: key}))
	c := tb.dial(tb.grant(map[string][]string{"ir": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	_, err := c.Call(ctx, "ir", "echo", map[string]any{"text": "x"})
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeInputRequired {
		t.Fatalf("call: %v, want an input_required denial", err)
	}
	if !utf8.ValidString(d.Message) || !strings.Contains(d.Message, strings.Repeat("a", 63)+"… (elicitation/create)") {
		t.Errorf("denial message %q: want the key clipped before the split character, then its method", d.Message)
	}
	c.Close()
	tb.shutdown()
}
