package bridge

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// TestListingAgreesWithCodegen: for the same tools/list bytes, the tools
// a live bridge serves are exactly the tools `capbridge gen --listing`
// generates, and a listing the bridge's client refuses is refused by
// codegen too, so a generated function is never one the bridge answers
// unknown_tool.
func TestListingAgreesWithCodegen(t *testing.T) {
	good := []json.RawMessage{
		json.RawMessage(`{"name":"plain","description":"d","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"tasks-required","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`),
		json.RawMessage(`{"name":"tasks-optional","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`),
		json.RawMessage(`{"name":"tasks-forbidden","inputSchema":{"type":"object"},"execution":{"taskSupport":"forbidden"},"annotations":{"readOnlyHint":true}}`),
	}
	bad := []json.RawMessage{
		json.RawMessage(`{"name":"plain","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"typed-wrong","description":5,"inputSchema":{"type":"object"}}`),
	}
	tb := startBridge(t, nil,
		mcptestServer("good", mcptest.Scenario{Tools: good}),
		mcptestServer("bad", mcptest.Scenario{Tools: bad}))

	listing, err := json.Marshal(map[string]any{"tools": good})
	if err != nil {
		t.Fatal(err)
	}
	generated, err := codegen.ParseListing(listing)
	if err != nil {
		t.Fatal(err)
	}
	var gen []string
	for _, tool := range generated {
		gen = append(gen, tool.Name)
	}
	s := tb.srv("good")
	s.mu.Lock()
	state := s.state
	var served []string
	for name := range s.cur.tools {
		served = append(served, name)
	}
	s.mu.Unlock()
	if state != StateReady {
		t.Fatalf("good server is %s", state)
	}
	slices.Sort(gen)
	slices.Sort(served)
	if !slices.Equal(gen, served) || !slices.Contains(served, "tasks-required") || len(served) != 4 {
		t.Errorf("bridge serves %q, codegen generates %q", served, gen)
	}

	listing, err = json.Marshal(map[string]any{"tools": bad})
	if err != nil {
		t.Fatal(err)
	}
	var le *codegen.ListingError
	if _, err := codegen.ParseListing(listing); !errors.As(err, &le) || le.Index != 1 {
		t.Errorf("codegen accepted a wrongly typed description: %v", err)
	}
	s = tb.srv("bad")
	s.mu.Lock()
	state = s.state
	s.mu.Unlock()
	if state == StateReady {
		t.Errorf("bridge serves a listing with a wrongly typed description")
	}
}
