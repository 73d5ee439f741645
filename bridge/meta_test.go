package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A jailed program can describe and search the tools its grant allows,
// and nothing beyond it, and read the resources of the servers whose
// resources its grant allows.
func TestCapbridgeCapability(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}), mcptestServer("other", mcptest.Scenario{}))
	_, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": {"echo", "content", "add"}}, Resources: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(token)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()

	d, err := c.Describe(ctx, "t", "Echo")
	if err != nil || !strings.HasPrefix(d, "func Echo(ctx, EchoArgs{") || !strings.Contains(d, `tool "echo"`) {
		t.Errorf("describe t Echo: %v\n%s", err, d)
	}
	all, err := c.Describe(ctx, "t")
	if err != nil || !strings.Contains(all, "func Add(") || !strings.Contains(all, "func Content(") || strings.Contains(all, "func Slow(") {
		t.Errorf("describe t (the granted tools only): %v\n%s", err, all)
	}
	for _, tc := range []struct {
		server string
		tools  []string
		code   string
	}{
		{"other", nil, capwire.CodeNotGranted},  // a server the grant does not reach
		{"nosuch", nil, capwire.CodeNotGranted}, // its existence is not revealed
		{"t", []string{"slow"}, capwire.CodeNotGranted},
		{"t", []string{"nosuch"}, capwire.CodeUnknownTool},
	} {
		var den *capwire.Denied
		if _, err := c.Describe(ctx, tc.server, tc.tools...); !errors.As(err, &den) || den.Code != tc.code {
			t.Errorf("describe %s %v: %v, want %s", tc.server, tc.tools, err, tc.code)
		}
	}

	found, err := c.Search(ctx, "echo text", 0)
	if err != nil || len(found) == 0 || found[0].Server != "t" || found[0].Tool != "echo" || !strings.HasPrefix(found[0].Signature, "t.Echo(ctx") {
		t.Errorf("search: %+v, %v", found, err)
	}
	for _, m := range found {
		if m.Server != "t" || (m.Tool != "echo" && m.Tool != "content" && m.Tool != "add") {
			t.Errorf("search found %+v, beyond the grant", m)
		}
	}
	var den *capwire.Denied
	if _, err := c.Search(ctx, " ", 0); !errors.As(err, &den) || den.Code != capwire.CodeBadArguments {
		t.Errorf("empty search: %v", err)
	}

	r, err := c.ReadResource(ctx, "t", "file:///mcptest/link.txt")
	if err != nil || len(r.Content) != 1 || r.Content[0].Kind != capwire.KindResource || r.Content[0].Text != "the linked text" || r.Content[0].MIME != "text/plain" {
		t.Errorf("read link.txt: %+v, %v", r, err)
	}
	r, err = c.ReadResource(ctx, "t", "file:///mcptest/embedded.bin")
	if err != nil || len(r.Content) != 1 || string(r.Content[0].Data) != "\x00\x01\x02\xff" {
		t.Errorf("read embedded.bin: %+v, %v", r, err)
	}
	if _, err := c.ReadResource(ctx, "t", "file:///nosuch"); !errors.As(err, &den) || den.Code != capwire.CodeServerError || den.RPCCode != -32002 {
		t.Errorf("read nosuch: %v", err)
	}
	// A grant without resources for a server cannot read them.
	_, token2, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c2 := tb.dial(token2)
	if _, err := c2.ReadResource(ctx, "t", "file:///mcptest/link.txt"); !errors.As(err, &den) || den.Code != capwire.CodeNotGranted {
		t.Errorf("read without resources granted: %v", err)
	}
	if _, _, err := tb.Grant(GrantSpec{Servers: map[string][]string{"t": nil}, Resources: []string{"other"}}); err == nil {
		t.Error("a grant read the resources of a server it does not reach")
	}
	c.Close()
	c2.Close()
	tb.shutdown()
}

// A started call's outcome is kept for collecting, so its result is never
// given back to the lease pool: two collects that both wait for a call
// with a large result both answer it whole.
func TestCollectTwiceAtOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	text := strings.Repeat("later ", 1<<10)
	for range 3 {
		c1, c2 := tb.dial(token), tb.dial(token)
		h, err := c1.Start(ctx, "t", "slow", map[string]any{"ms": 200, "text": text})
		if err != nil {
			t.Fatal(err)
		}
		results := make(chan error, 2)
		for _, c := range []*capwire.Client{c1, c2} {
			go func() {
				r, err := c.Collect(ctx, h)
				var d *capwire.Denied
				switch {
				case errors.As(err, &d) && d.Code == capwire.CodeBadArguments:
					err = nil // the other collect took it first
				case err == nil && r.Text() != text:
					err = fmt.Errorf("collected %d bytes, not the call's text", len(r.Text()))
				}
				results <- err
			}()
		}
		for range 2 {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		c1.Close()
		c2.Close()
	}
	tb.shutdown()
}

// A program starts calls in the background and collects them later, from
// another connection under the same grant too; a collect that gives up
// leaves the call running; a dropped call is gone; a grant holds at most
// maxStartedPerGrant, and its end takes them with it.
func TestStartCollect(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	token := tb.grant(map[string][]string{"t": nil})
	c := tb.dial(token)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()

	h, err := c.Start(ctx, "t", "slow", map[string]any{"ms": 300, "text": "later"})
	if err != nil || len(h) != 16 {
		t.Fatalf("start: %q, %v", h, err)
	}
	// A collect that allows less than the call takes gives up; the call
	// goes on.
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = c.Collect(short, h)
	stop()
	var d *capwire.Denied
	if err == nil {
		t.Fatal("a collect shorter than the call returned its result")
	}
	// Another connection of the grant collects it.
	c2 := tb.dial(token)
	if r, err := c2.Collect(ctx, h); err != nil || r.Text() != "later" {
		t.Fatalf("collect: %+v, %v", r, err)
	}
	if _, err := c2.Collect(ctx, h); !errors.As(err, &d) || d.Code != capwire.CodeBadArguments || d.Path != "/handle" {
		t.Errorf("collect twice: %v", err)
	}
	// A refusal is collected as the call's refusal.
	h, err = c.Start(ctx, "t", "echo", map[string]any{"text": 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collect(ctx, h); !errors.As(err, &d) || d.Code != capwire.CodeBadArguments || d.Path != "/text" {
		t.Errorf("collect a refused call: %v", err)
	}
	// Drop cancels a started call.
	h, err = c.Start(ctx, "t", "hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Drop(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collect(ctx, h); !errors.As(err, &d) || d.Code != capwire.CodeBadArguments {
		t.Errorf("collect a dropped call: %v", err)
	}
	// At most maxStartedPerGrant at once.
	for i := range maxStartedPerGrant {
		if _, err := c.Start(ctx, "t", "hang", nil); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	if _, err := c.Start(ctx, "t", "hang", nil); !errors.As(err, &d) || d.Code != capwire.CodeOverloaded {
		t.Errorf("one start too many: %v", err)
	}
	// A grant that ends takes its started calls with it.
	c.Close()
	c2.Close()
	tb.shutdown()
}

// A revoke's totals count a started call running at its server when the
// grant ends, as they count a call on a connection: the revoke waits for
// it to end (the grant's end ends it) and be counted.
func TestRevokeCountsStartedCalls(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := tb.control()
	defer ctl.Close()
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(g.Token)
	if _, err := c.Start(ctx, "t", "hang", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the started call at the server", func() bool { return tb.srv("t").status().Inflight == 1 })
	rv, err := ctl.Revoke(ctx, &control.RevokeRequest{Grant: g.Grant})
	if err != nil {
		t.Fatal(err)
	}
	if rv.Calls != 2 {
		t.Errorf("revoke counted %d calls; the program made 2 (start, and the call it started)", rv.Calls)
	}
	tb.shutdown()
}
