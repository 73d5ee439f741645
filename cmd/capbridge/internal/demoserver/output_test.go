package demoserver

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestStructuredContentMatchesOutputSchema checks each tool that declares
// an outputSchema against what it returns: per MCP 2025-06-18 a server
// that declares one must return structuredContent conforming to it, and a
// generated façade decodes that content into the declared type.
func TestStructuredContentMatchesOutputSchema(t *testing.T) {
	s := start(t)
	r := s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var list struct {
		Tools []struct {
			Name         string
			OutputSchema *struct {
				Type       string
				Properties map[string]struct{ Type string }
				Required   []string
			}
		}
	}
	if err := json.Unmarshal(r.Result, &list); err != nil {
		t.Fatal(err)
	}
	args := map[string]string{
		"add":        `{"a":1,"b":2}`,
		"now":        `{"timezone":"Europe/Paris"}`,
		"word_count": `{"text":"a b"}`,
	}
	var declared []string
	for _, tl := range list.Tools {
		if tl.OutputSchema == nil {
			continue
		}
		declared = append(declared, tl.Name)
		a, ok := args[tl.Name]
		if !ok {
			t.Errorf("%s declares an outputSchema but this test has no arguments for it", tl.Name)
			continue
		}
		if tl.OutputSchema.Type != "object" {
			t.Errorf("%s: outputSchema type %q, want object (MCP requires an object)", tl.Name, tl.OutputSchema.Type)
		}
		res := s.call(tl.Name, a)
		var got map[string]any
		if err := json.Unmarshal(res.StructuredContent, &got); err != nil {
			t.Errorf("%s: structuredContent %s: %v", tl.Name, res.StructuredContent, err)
			continue
		}
		for _, k := range tl.OutputSchema.Required {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: structuredContent %s lacks required %q", tl.Name, res.StructuredContent, k)
			}
		}
		for k, v := range got {
			p, ok := tl.OutputSchema.Properties[k]
			if !ok {
				t.Errorf("%s: structuredContent has undeclared %q", tl.Name, k)
				continue
			}
			if !jsonTypeIs(v, p.Type) {
				t.Errorf("%s: %q = %v (%T), schema says %s", tl.Name, k, v, v, p.Type)
			}
		}
	}
	if want := []string{"add", "now", "word_count"}; !slices.Equal(declared, want) {
		t.Errorf("tools with an outputSchema = %v, want %v", declared, want)
	}
}

// jsonTypeIs reports whether a value decoded by encoding/json into any is
// of the JSON Schema type typ.
func jsonTypeIs(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	}
	return false
}
