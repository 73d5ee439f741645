package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// A tool that requires MCP tasks (server-everything's
// simulate-research-query, taskSupport "required") is served: the call
// follows the task the server answers with, polling as it directs, to the
// report; a caller that gives up first is told so within its deadline.
func TestTaskEndToEnd(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, everythingServer(t))
	if st := tb.srv("everything").snapshot(); st.State != StateReady {
		t.Fatalf("everything: %s: %s", st.State, st.Reason)
	}
	if d, err := tb.srv("everything").facade(); err != nil {
		t.Fatal(err)
	} else if _, ok := d.WireName("simulate-research-query"); !ok {
		t.Fatalf("simulate-research-query is not on the façade: %q", d.ToolNames())
	}
	c := tb.dial(tb.grant(map[string][]string{"everything": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	r, err := c.Call(ctx, "everything", "simulate-research-query", map[string]any{"topic": "capbridge"})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || !strings.Contains(r.Text(), "# Research Report: capbridge") {
		t.Errorf("report (is_error %v):\n%.400s", r.IsError, r.Text())
	}

	// Four stages of a second each: a caller that allows half a second
	// is answered within its deadline, and the task is cancelled.
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	start := time.Now()
	_, err = c.Call(short, "everything", "simulate-research-query", map[string]any{"topic": "late"})
	var d *capwire.Denied
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &d) && d.Code == capwire.CodeTimeout) {
		t.Errorf("a call past its deadline: %v", err)
	}
	if took := time.Since(start); took > backstop/2 {
		t.Errorf("the call took %v", took)
	}
	c.Close()
	tb.shutdown()
}

// A harness lists a real server's resources and templates through the
// control plane, and a program whose grant allows that server's resources
// reads one of them, and follows a link a tool returned.
func TestResourcesEndToEnd(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, everythingServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := tb.control()
	list, err := ctl.Resources(ctx, &control.ResourcesRequest{Server: "everything"})
	if err != nil {
		t.Fatal(err)
	}
	ctl.Close()
	var resources []struct{ URI, Name, MimeType string }
	var templates []struct{ URITemplate, Name string }
	if err := json.Unmarshal([]byte(list.Resources), &resources); err != nil || len(resources) == 0 {
		t.Fatalf("resources %.300s: %v", list.Resources, err)
	}
	if err := json.Unmarshal([]byte(list.Templates), &templates); err != nil || len(templates) == 0 || templates[0].URITemplate == "" {
		t.Fatalf("templates %.300s: %v", list.Templates, err)
	}
	_, token, err := tb.Grant(GrantSpec{Servers: map[string][]string{"everything": nil}, Resources: []string{"everything"}})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(token)
	r, err := c.ReadResource(ctx, "everything", resources[0].URI)
	if err != nil || len(r.Content) == 0 || r.Content[0].URI != resources[0].URI || r.Content[0].Text == "" && r.Content[0].Data == nil {
		t.Fatalf("read %s: %+v, %v", resources[0].URI, r, err)
	}
	links, err := c.Call(ctx, "everything", "get-resource-links", map[string]any{"count": 1})
	if err != nil || len(links.Content) < 2 {
		t.Fatalf("get-resource-links: %+v, %v", links, err)
	}
	var link capwire.Block
	for _, b := range links.Content {
		if b.Kind == capwire.KindResourceLink {
			link = b
		}
	}
	if r, err := c.ReadResource(ctx, "everything", link.URI); err != nil || len(r.Content) == 0 {
		t.Errorf("follow the link %q: %+v, %v", link.URI, r, err)
	}
	c.Close()
	tb.shutdown()
}
