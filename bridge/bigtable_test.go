package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/argcheck"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
	"github.com/capbridge/capbridge/mcpwire"
	"github.com/rs/zerolog"
)

// bigTools is a listing just past eagerChecks: its table compiles input
// schemas lazily, and its façade (over a mebibyte) keeps no plans.
const bigTools = eagerChecks + 100

// rawechoTools configures a rawecho server listing n tools
// (rawecho.ToolsCommand).
func rawechoTools(name string, n int) config.Server {
	argv, env := rawecho.ToolsCommand(n, "")
	s := config.NewServer(name, argv[0])
	s.Args, s.Env = argv[1:], map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	s.StartupTimeout = 60 * time.Second
	return s
}

// checkable splits tools into those argcheck judges and those it does not.
func checkable(tools []mcpwire.Tool) (judged, unjudged []mcpwire.Tool) {
	for _, tool := range tools {
		if _, err := argcheck.Compile(tool.InputSchema); err == nil {
			judged = append(judged, tool)
		} else {
			unjudged = append(unjudged, tool)
		}
	}
	return judged, unjudged
}

// TestLazyChecks: a table of more than eagerChecks tools compiles none
// when it is built, and then judges each tool's arguments as a table
// compiling at build does; it keeps at most maxLazyChecks schemas, from
// many goroutines at once.
func TestLazyChecks(t *testing.T) {
	cfg := config.Server{Name: "big"}
	s := newServer(cfg, zerolog.Nop(), zerolog.Nop(), bootOptions{}, nil)
	listed := bigPages(t, bigTools)
	big, err := s.build(context.Background(), nil, listed, &cfg, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	small, err := s.build(context.Background(), nil, listed[:eagerChecks], &cfg, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if big.lazy == nil || big.checks != nil || small.lazy != nil || len(small.checks) == 0 {
		t.Fatalf("lazy %v with %d tools, %v with %d", big.lazy != nil, bigTools, small.lazy != nil, eagerChecks)
	}
	judged, unjudged := checkable(listed)
	if len(judged) == 0 || len(unjudged) == 0 {
		t.Fatalf("%d tools judged, %d not: the listing does not test both", len(judged), len(unjudged))
	}
	empty := mp(t, map[string]any{})
	for _, tool := range unjudged[:10] {
		if big.check(tool.Name) != nil {
			t.Errorf("%s: argcheck cannot judge it, but it is checked", tool.Name)
		}
	}
	for _, tool := range judged[:10] {
		eager := small.check(tool.Name)
		if eager == nil {
			eager, _ = argcheck.Compile(tool.InputSchema)
		}
		want, got := eager.Check(empty), big.check(tool.Name).Check(empty)
		if want == nil || got == nil || *want != *got {
			t.Errorf("%s with no arguments: fault %+v, compiled at build %+v", tool.Name, got, want)
		}
	}
	if big.check("no such tool") != nil {
		t.Error("a tool the table lacks has a schema")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(listed); i += 4 {
				big.check(listed[i].Name)
			}
		})
	}
	wg.Wait()
	kept := 0
	big.lazy.m.Range(func(_, _ any) bool { kept++; return true })
	if kept > maxLazyChecks || kept < maxLazyChecks/2 {
		t.Errorf("%d schemas kept after %d tools were checked, bound %d", kept, len(listed), maxLazyChecks)
	}
}

// TestBigListing: a server listing more tools than a table compiles at
// build, with a façade too big to keep its plans, serves everything a
// small one does: calls with their arguments checked against the tool's
// schema, the façade, describe and search.
func TestBigListing(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, rawechoTools("big", bigTools))
	cc := tb.control()
	defer tb.shutdown()
	defer cc.Close()
	ctx := ctlCtx(t)
	tab := tb.srv("big").current()
	if tab.lazy == nil {
		t.Fatal("the table compiled every schema at build")
	}

	judged, unjudged := checkable(tab.listed)
	last := judged[len(judged)-1]
	_, err := cc.Call(ctx, &control.CallRequest{Server: "big", Tool: last.Name, Args: mp(t, map[string]any{})})
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeBadArguments || !strings.Contains(d.Message, "input schema of tool") {
		t.Errorf("%s without its required arguments: %v", last.Name, err)
	}
	if _, err := cc.Call(ctx, &control.CallRequest{Server: "big", Tool: unjudged[0].Name, Args: mp(t, map[string]any{"text": "through"})}); errors.As(err, &d) && d.Code == capwire.CodeBadArguments {
		t.Errorf("%s, whose schema argcheck cannot judge, was judged: %v", unjudged[0].Name, err)
	}
	if res, err := cc.Call(ctx, &control.CallRequest{Server: "big", Tool: "echo", Args: mp(t, map[string]any{"text": "through"})}); err != nil || res.Text() != "through" {
		t.Errorf("echo: %+v, %v", res, err)
	}

	f, err := cc.Facade(ctx, &control.FacadeRequest{Server: "big", Lang: "python"})
	if err != nil || !strings.Contains(f.Source, "def "+strings.ReplaceAll(strings.ToLower(last.Name), "-", "_")) {
		t.Errorf("python façade: %v", err)
	}
	desc, err := cc.Describe(ctx, &control.DescribeRequest{Server: "big", Tools: []string{last.Name, "echo"}})
	if err != nil || strings.Count(desc.Declarations, "\nfunc ")+strings.Count(desc.Declarations[:5], "func ") != 2 || !strings.Contains(desc.Declarations, fmt.Sprintf("%q", last.Name)) {
		t.Errorf("describe %s, echo: %v\n%.600s", last.Name, err, desc.Declarations)
	}
	found, err := cc.Search(ctx, &control.SearchRequest{Query: last.Name})
	if err != nil || len(found.Matches) == 0 || found.Matches[0].Tool != last.Name {
		t.Errorf("search %s: %+v, %v", last.Name, found, err)
	}
}
