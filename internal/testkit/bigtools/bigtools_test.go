package bigtools

import (
	"encoding/json"
	"strconv"
	"testing"
)

// TestPages: pages chain by nextCursor, cover every tool once, put extra
// first, and hold valid tools with unique names, schemas of every size the
// package promises.
func TestPages(t *testing.T) {
	const n, size = 1234, 500
	names := map[string]bool{}
	from, pages := 0, 0
	for {
		var page struct {
			Tools []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					Type       string                     `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				} `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		}
		raw := Page(nil, from, size, n, `{"name":"first","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`)
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, tool := range page.Tools {
			if names[tool.Name] {
				t.Fatalf("tool %s listed twice", tool.Name)
			}
			names[tool.Name] = true
			s := tool.InputSchema
			if s.Type != "object" || len(s.Properties) < 1 || len(s.Properties) > 10 {
				t.Fatalf("tool %s: schema %+v", tool.Name, s)
			}
			for _, r := range s.Required {
				if _, ok := s.Properties[r]; !ok {
					t.Fatalf("tool %s requires %s, which it does not define", tool.Name, r)
				}
			}
		}
		pages++
		if page.NextCursor == nil {
			break
		}
		if from, _ = strconv.Atoi(*page.NextCursor); from != pages*size {
			t.Fatalf("cursor %q after page %d", *page.NextCursor, pages)
		}
	}
	if len(names) != n || !names["first"] || pages != 3 {
		t.Fatalf("%d tools over %d pages, first listed: %v", len(names), pages, names["first"])
	}
	if b := len(Tool(nil, 7)); b < 300 || b > 4096 {
		t.Errorf("tool 7 is %d bytes", b)
	}
}
