package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// brokenServer is configured but cannot start, so it never has a façade.
func brokenServer(name string) config.Server {
	s := config.NewServer(name, "/nonexistent/capbridge-test-server")
	s.StartupTimeout = 10 * time.Second
	return s
}

// The façade carries the preamble; describe and search serve what a lean
// rung leaves out, from the façades the bridge generated at boot, with
// the codes docs/control.md gives their refusals.
func TestControlDescribeSearch(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}), mcptestServer("u", mcptest.Scenario{}), brokenServer("broken"))
	cc := tb.control()
	ctx := ctlCtx(t)

	want, _ := codegen.Preamble(codegen.Go)
	if f, err := cc.Facade(ctx, &control.FacadeRequest{Server: "t"}); err != nil || f.Preamble != want || strings.Contains(f.Surface, want) {
		t.Fatalf("facade: preamble %q, %v", f.Preamble, err)
	}

	d, err := cc.Describe(ctx, &control.DescribeRequest{Server: "t", Tools: []string{"slow", "Echo"}})
	if err != nil || d.Module != "t" {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	slow, echo := strings.Index(d.Declarations, "func Slow(ctx, SlowArgs{"), strings.Index(d.Declarations, "func Echo(ctx, EchoArgs{")
	if slow < 0 || echo < slow || !strings.Contains(d.Declarations, `"Sleeps ms milliseconds, then answers like echo."`) {
		t.Errorf("describe slow, Echo: want both, in the order asked, described whole:\n%s", d.Declarations)
	}
	all, err := cc.Describe(ctx, &control.DescribeRequest{Server: "u"})
	if err != nil || strings.Count(all.Declarations, "\nfunc ")+1 != strings.Count(tb.srv("u").current().gen.Surface, "\nfunc ") {
		t.Errorf("describe of every tool: %v\n%s", err, all.Declarations)
	}

	found, err := cc.Search(ctx, &control.SearchRequest{Query: "echo"})
	if err != nil || len(found.Matches) < 2 {
		t.Fatalf("search echo: %+v, %v", found, err)
	}
	// The same tool on two servers scores the same; the tie keeps
	// configuration order.
	if m := found.Matches; m[0].Server != "t" || m[0].Tool != "echo" || m[0].Func != "Echo" || m[1].Server != "u" || m[1].Tool != "echo" ||
		m[0].Score != m[1].Score || m[0].Signature != "t.Echo(ctx, t.EchoArgs{Text string})" {
		t.Errorf("search echo: %+v", m)
	}
	for i := 1; i < len(found.Matches); i++ {
		if found.Matches[i].Score > found.Matches[i-1].Score {
			t.Errorf("matches out of order: %+v", found.Matches)
		}
	}
	one, err := cc.Search(ctx, &control.SearchRequest{Servers: []string{"u"}, Query: "answers sum integers", Limit: 1})
	if err != nil || len(one.Matches) != 1 || one.Matches[0].Server != "u" || one.Matches[0].Tool != "add" {
		t.Errorf("search one server, limit 1: %+v, %v", one, err)
	}
	// A server named again is searched once: 20 000 names cost one
	// search (they cost one each, and the matches repeated).
	again, err := cc.Search(ctx, &control.SearchRequest{Servers: slices.Repeat([]string{"u", "t"}, 10_000), Query: "echo", Limit: 100})
	twice, err2 := cc.Search(ctx, &control.SearchRequest{Servers: []string{"u", "t"}, Query: "echo", Limit: 100})
	if err != nil || err2 != nil || !slices.Equal(again.Matches, twice.Matches) {
		t.Errorf("search of servers named again: %d matches (%v), want the %d of each once (%v)", len(again.Matches), err, len(twice.Matches), err2)
	}
	none, err := cc.Search(ctx, &control.SearchRequest{Query: "zzzqqq"})
	if err != nil || none.Matches == nil || len(none.Matches) != 0 {
		t.Errorf("search for nothing: %+v, %v", none, err)
	}

	for _, tc := range []struct {
		name string
		do   func() error
		code string
		says string
	}{
		{"describe of an unknown server", func() error {
			_, err := cc.Describe(ctx, &control.DescribeRequest{Server: "nope"})
			return err
		}, control.CodeUnknownServer, `"nope"`},
		{"describe of an unknown tool", func() error {
			_, err := cc.Describe(ctx, &control.DescribeRequest{Server: "t", Tools: []string{"echo", "no_such_tool"}})
			return err
		}, control.CodeUnknownTool, `"no_such_tool"`},
		{"describe of a server that never booted", func() error {
			_, err := cc.Describe(ctx, &control.DescribeRequest{Server: "broken"})
			return err
		}, control.CodeUnavailable, "broken"},
		{"describe in an unknown language", func() error {
			_, err := cc.Describe(ctx, &control.DescribeRequest{Server: "t", Lang: "cobol"})
			return err
		}, control.CodeBadRequest, "cobol"},
		{"search with no query", func() error {
			_, err := cc.Search(ctx, &control.SearchRequest{Query: "  "})
			return err
		}, control.CodeBadRequest, "query"},
		{"search with a long query", func() error {
			_, err := cc.Search(ctx, &control.SearchRequest{Query: strings.Repeat("a", control.MaxSearchQuery+1)})
			return err
		}, control.CodeBadRequest, "1024"},
		{"search over the limit", func() error {
			_, err := cc.Search(ctx, &control.SearchRequest{Query: "echo", Limit: control.MaxSearchLimit + 1})
			return err
		}, control.CodeBadRequest, "limit"},
		{"search of an unknown server", func() error {
			_, err := cc.Search(ctx, &control.SearchRequest{Servers: []string{"t", "nope"}, Query: "echo"})
			return err
		}, control.CodeUnknownServer, `"nope"`},
		{"search of a server that never booted", func() error {
			_, err := cc.Search(ctx, &control.SearchRequest{Servers: []string{"broken"}, Query: "echo"})
			return err
		}, control.CodeUnavailable, "broken"},
	} {
		err := tc.do()
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(ce.Message, tc.says) {
			t.Errorf("%s: %v, want a control error %s saying %s", tc.name, err, tc.code, tc.says)
		}
	}
	cc.Close()
	tb.shutdown()
}

// manyTools is a listing of n tools named tool_000…; each is served by
// mcptest's echo behaviour when called as "echo".
func manyTools(n int) []json.RawMessage {
	out := make([]json.RawMessage, 0, n+1)
	out = append(out, json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}`))
	for i := range n - 1 {
		out = append(out, json.RawMessage(fmt.Sprintf(`{"name":"tool_%03d","inputSchema":{"type":"object"}}`, i)))
	}
	return out
}

// A server's tools are capped where they are read, at bound.MaxTools:
// a server listing 300 tools (over three pages) serves all of them, or
// the ten tools.allow picks, or what tools.deny leaves; one listing more
// than the cap is refused, naming it.
func TestToolCap(t *testing.T) {
	defer leakcheck.Check(t)()
	sc := mcptest.Scenario{Tools: manyTools(300), PageSize: 100}
	narrowed := mcptestServer("narrowed", sc)
	narrowed.ToolsAllow = []string{"echo"}
	for i := range 9 {
		narrowed.ToolsAllow = append(narrowed.ToolsAllow, fmt.Sprintf("tool_%03d", 200+i))
	}
	denied := mcptestServer("denied", sc)
	for i := range 44 {
		denied.ToolsDeny = append(denied.ToolsDeny, fmt.Sprintf("tool_%03d", i))
	}
	wide := mcptestServer("wide", sc)
	over := neverRestart(rawechoTools("over", bound.MaxTools+1))
	tb := startBridge(t, nil, narrowed, denied, wide, over)
	ctx := ctlCtx(t)
	cc := tb.control()

	st, err := cc.Status(ctx)
	if err != nil || len(st.Servers) != 4 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if s := st.Servers[0]; State(s.State) != StateReady || s.Tools != 10 {
		t.Errorf("narrowed to 10 of 300 tools: %+v", s)
	}
	if s := st.Servers[1]; State(s.State) != StateReady || s.Tools != 256 {
		t.Errorf("300 tools less 44 denied: %+v", s)
	}
	if s := st.Servers[2]; State(s.State) != StateReady || s.Tools != 300 {
		t.Errorf("300 tools exposed: %+v", s)
	}
	if s := st.Servers[3]; State(s.State) != StateFailed || !strings.Contains(s.Reason, fmt.Sprintf("more than %d", bound.MaxTools)) {
		t.Errorf("%d tools listed: %+v", bound.MaxTools+1, s)
	}
	res, err := cc.Call(ctx, &control.CallRequest{Server: "narrowed", Tool: "echo", Args: mp(t, map[string]any{"text": "through"})})
	if err != nil || res.Text() != "through" {
		t.Errorf("call on the narrowed server: %+v, %v", res, err)
	}
	if _, err := cc.Describe(ctx, &control.DescribeRequest{Server: "narrowed", Tools: []string{"tool_000"}}); !errors.Is(err, &control.Error{Code: control.CodeUnknownTool}) {
		t.Errorf("a tool tools.allow left out is described: %v", err)
	}
	cc.Close()
	tb.shutdown()
}
