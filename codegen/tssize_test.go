package codegen

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// tsDecl renders a listing the way a JSON-Schema-to-TypeScript renderer
// (json-schema-to-typescript's defaults) would: per tool, a documented
// function and an interface for its arguments and its output, nested
// objects inlined, $defs as named interfaces, descriptions in full as
// JSDoc, enums as unions of literals and an index signature on every open
// object. It is the yardstick the surface's size is measured against.
func tsDecl(tools []Tool) string {
	var b strings.Builder
	for _, t := range tools {
		name := tsName(t.Name)
		jsdoc(&b, "", t.Description)
		fmt.Fprintf(&b, "export function %s(args: %sArgs): Promise<CallToolResult>;\n", strings.ToLower(name[:1])+name[1:], name)
		for _, s := range []struct {
			raw  json.RawMessage
			kind string
		}{{t.InputSchema, "Args"}, {t.OutputSchema, "Output"}} {
			if len(s.raw) == 0 {
				continue
			}
			var root any
			if json.Unmarshal(s.raw, &root) != nil {
				continue
			}
			fmt.Fprintf(&b, "export interface %s%s %s\n", name, s.kind, tsType(root, root, "", 0))
			if m, ok := root.(map[string]any); ok {
				for _, key := range []string{"$defs", "definitions"} {
					defs, _ := m[key].(map[string]any)
					for _, k := range sortedMapKeys(defs) {
						jsdoc(&b, "", descOf(defs[k]))
						fmt.Fprintf(&b, "export interface %s %s\n", tsName(k), tsType(defs[k], root, "", 0))
					}
				}
			}
		}
	}
	return b.String()
}

func tsName(s string) string {
	w, _ := spell(s, exported)
	if w == "" {
		return "T"
	}
	return w
}

func sortedMapKeys(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func descOf(s any) string {
	m, _ := s.(map[string]any)
	d, _ := m["description"].(string)
	return d
}

func jsdoc(b *strings.Builder, indent, desc string) {
	if desc == "" {
		return
	}
	// json-schema-to-typescript always writes a block comment.
	lines := strings.Split(desc, "\n")
	fmt.Fprintf(b, "%s/**\n", indent)
	for _, l := range lines {
		fmt.Fprintf(b, "%s * %s\n", indent, l)
	}
	fmt.Fprintf(b, "%s */\n", indent)
}

func tsType(s, root any, indent string, depth int) string {
	m, ok := s.(map[string]any)
	if !ok || depth > 32 {
		return "unknown"
	}
	if ref, ok := m["$ref"].(string); ok {
		return tsName(ref[strings.LastIndexByte(ref, '/')+1:])
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if alts, ok := m[k].([]any); ok {
			var parts []string
			for _, a := range alts {
				parts = append(parts, tsType(a, root, indent, depth+1))
			}
			return "(" + strings.Join(parts, " | ") + ")"
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		var parts []string
		for _, a := range all {
			parts = append(parts, tsType(a, root, indent, depth+1))
		}
		if _, has := m["properties"]; has {
			c := map[string]any{}
			for k, v := range m {
				if k != "allOf" {
					c[k] = v
				}
			}
			parts = append([]string{tsType(c, root, indent, depth+1)}, parts...)
		}
		return strings.Join(parts, " & ")
	}
	if e, ok := m["enum"].([]any); ok {
		var parts []string
		for _, v := range e {
			j, _ := json.Marshal(v)
			parts = append(parts, string(j))
		}
		return strings.Join(parts, " | ")
	}
	if c, ok := m["const"]; ok {
		j, _ := json.Marshal(c)
		return string(j)
	}
	switch t := m["type"].(type) {
	case []any:
		var parts []string
		for _, x := range t {
			c := map[string]any{}
			for k, v := range m {
				c[k] = v
			}
			c["type"] = x
			parts = append(parts, tsType(c, root, indent, depth+1))
		}
		return strings.Join(parts, " | ")
	case string:
		switch t {
		case "string":
			return "string"
		case "integer", "number":
			return "number"
		case "boolean":
			return "boolean"
		case "null":
			return "null"
		case "array":
			if items, ok := m["items"]; ok {
				return "(" + tsType(items, root, indent, depth+1) + ")[]"
			}
			return "unknown[]"
		}
	}
	props, _ := m["properties"].(map[string]any)
	req := map[string]bool{}
	if r, ok := m["required"].([]any); ok {
		for _, x := range r {
			if s, ok := x.(string); ok {
				req[s] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString("{\n")
	in := indent + "  "
	for _, k := range sortedMapKeys(props) {
		jsdoc(&b, in, descOf(props[k]))
		opt := "?"
		if req[k] {
			opt = ""
		}
		fmt.Fprintf(&b, "%s%s%s: %s;\n", in, k, opt, tsType(props[k], root, in, depth+1))
	}
	if ap, ok := m["additionalProperties"]; !ok || ap != false {
		fmt.Fprintf(&b, "%s[k: string]: unknown;\n", in)
	}
	b.WriteString(indent + "}")
	return b.String()
}

// TestSurfaceSize measures the full rung of every golden listing against
// the TypeScript declarations of the same listing (the preamble, printed
// once for all servers, is not counted; it is logged). The four captured
// npm servers and the 320-tool listing are each held to at most 60%. The
// two small synthetic fixtures are logged, not held: they exist to
// exercise unions, collisions and odd enums, and a Go union needs a named
// type per variant where TypeScript writes "string | number[]" inline.
func TestSurfaceSize(t *testing.T) {
	for _, lang := range []Lang{Go, TypeScript, Python} {
		pre, err := Preamble(lang)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s preamble %d bytes", lang, len(pre))
	}
	paths, _ := filepath.Glob("testdata/*.json")
	paths = append(paths, "large")
	for _, path := range paths {
		var tools []Tool
		var err error
		if path == "large" {
			tools = largeListing()
		} else if tools, err = readListing(t, path); err != nil {
			t.Fatal(err)
		}
		ts := tsDecl(tools)
		for _, lang := range []Lang{Go, TypeScript, Python} {
			sizes := rungSizes(t, serverFor(path), tools, lang)
			ratio := float64(sizes[0]) / float64(len(ts))
			t.Logf("%-6s %-20s tools %3d  full %7d  short %7d  signatures %7d  index %7d  typescript %7d  full/ts %.3f",
				lang, serverFor(path), len(tools), sizes[0], sizes[1], sizes[2], sizes[3], len(ts), ratio)
			if (strings.Contains(path, "npm-") || path == "large") && ratio > 0.60 {
				t.Errorf("%s %s: the full surface is %.1f%% of the TypeScript declarations, over 60%%", lang, path, 100*ratio)
			}
		}
	}
}

// rungSizes is the size of the surface on each rung of the ladder, found
// by shrinking the budget one byte below the rung above.
func rungSizes(t *testing.T, server string, tools []Tool, lang Lang) [4]int {
	t.Helper()
	var sizes [4]int
	budget := 1 << 30
	for level := SurfaceFull; level <= SurfaceIndex; level++ {
		g, err := Generate(server, tools, Options{Lang: lang, SurfaceBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		if g.Level != level {
			t.Fatalf("%s: budget %d gave rung %v, want %v", server, budget, g.Level, level)
		}
		sizes[level] = len(g.Surface)
		for _, p := range g.Pages[min(1, len(g.Pages)):] {
			sizes[level] += len(p)
		}
		budget = len(g.Surface) - 1
	}
	return sizes
}

// The held-out listings are the four captured npm listings in three
// languages: twelve surfaces, each held to be no larger than it was
// before the surface gained every result kind, what capbridge refuses,
// deprecation and task labels and "text result" (the issue that asked
// for those asked for no growth).
//
// Those surfaces served fewer tools than these listings hold: a tool
// that requires MCP tasks (everything's simulate-research-query) was
// left out then, and is served now, as the same issue asked. A surface
// that left a served tool out to meet a size would misstate what a
// program can call, so the ceiling is applied like for like: the tools
// served then (heldOutThen, to the byte what they measured then), which
// holds the notation. What the tools served since cost is held apart,
// to the byte (heldOutNow): only everything grows, by its task tool's
// declaration.
var (
	heldOutThen = map[string][3]int{ // go, ts, python
		"everything":          {2518, 2235, 2377},
		"filesystem":          {3830, 3547, 3786},
		"memory":              {3284, 2913, 3058},
		"sequential-thinking": {1471, 1190, 1215},
	}
	heldOutNow = map[string][3]int{
		"everything":          {2797, 2493, 2642},
		"filesystem":          {3774, 3491, 3717},
		"memory":              {3284, 2913, 3058},
		"sequential-thinking": {1471, 1190, 1215},
	}
	// preambleThen is each language's preamble, printed once above every
	// server's surface, as it was then; it is logged beside today's, not
	// held, since the issue asked it to say more.
	preambleThen = [3]int{984, 999, 970}
)

func TestHeldOutSurfaceSize(t *testing.T) {
	var then, now, served [3]int
	for server, ceiling := range heldOutThen {
		tools, err := readListing(t, "testdata/npm-"+server+".json")
		if err != nil {
			t.Fatal(err)
		}
		servedThen := slices.DeleteFunc(slices.Clone(tools), func(tl Tool) bool { return tl.Task })
		for i, lang := range []Lang{Go, TypeScript, Python} {
			old := rungSizes(t, server, servedThen, lang)[0]
			if old > ceiling[i] {
				t.Errorf("%s %s: the tools served then cost %d bytes, over the %d they cost then", lang, server, old, ceiling[i])
			}
			all := rungSizes(t, server, tools, lang)[0]
			if all > heldOutNow[server][i] {
				t.Errorf("%s %s: every tool served costs %d bytes, over its ceiling %d", lang, server, all, heldOutNow[server][i])
			}
			if all != old {
				t.Logf("%s %s: %d bytes for the tools served then (%d then), %d with the %d served since", lang, server, old, ceiling[i], all, len(tools)-len(servedThen))
			}
			then[i] += ceiling[i]
			now[i] += old
			served[i] += all
		}
	}
	for i, lang := range []Lang{Go, TypeScript, Python} {
		pre, err := Preamble(lang)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: the four listings %d bytes then, %d now like for like, %d with every tool served; preamble %d then, %d now",
			lang, then[i], now[i], served[i], preambleThen[i], len(pre))
	}
}
