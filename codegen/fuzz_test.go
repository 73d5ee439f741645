package codegen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stubs are the packages a façade imports, reduced to the API it uses, so
// that fuzzing can type-check every generated file in-process (TestCompile
// builds the goldens against the real capwire).
var stubs = map[string]string{
	"context": "package context\n\ntype Context interface{ Done() <-chan struct{} }\n",
	capwireImport: `package capwire
import "context"
type Result struct{ IsError bool }
func (r *Result) Decode(v any) error { return nil }
type Client struct{}
func Shared(ctx context.Context) (*Client, error) { return nil, nil }
func (c *Client) Call(ctx context.Context, server, tool string, args any) (*Result, error) { return nil, nil }
`,
}

type stubImporter map[string]*types.Package

func (s stubImporter) Import(path string) (*types.Package, error) {
	if p, ok := s[path]; ok {
		return p, nil
	}
	src, ok := stubs[path]
	if !ok {
		return nil, fmt.Errorf("no stub for %q", path)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path+".go", src, 0)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: s}
	p, err := conf.Check(path, fset, []*ast.File{f}, nil)
	if err != nil {
		return nil, err
	}
	s[path] = p
	return p, nil
}

// typeCheck type-checks a façade against the stubs.
func typeCheck(src []byte) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "facade.go", src, 0)
	if err != nil {
		return err
	}
	conf := types.Config{Importer: stubImporter{}}
	_, err = conf.Check("facade", fset, []*ast.File{f}, nil)
	return err
}

// TestTypeCheckCorpus type-checks every façade the golden and hostile
// listings produce; it is the fast, in-process twin of TestCompile.
func TestTypeCheckCorpus(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.json")
	hostilePaths, _ := filepath.Glob("testdata/hostile/*.json")
	for _, path := range append(paths, hostilePaths...) {
		g, err := generateFile(t, path, Options{})
		if err != nil {
			continue
		}
		if err := typeCheck(g.Source); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// FuzzGenerate feeds random listings through ParseListing and Generate:
// neither may panic, and a façade that comes out must verify, type-check,
// equal gofmt of itself, be deterministic and carry every tool.
func FuzzGenerate(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.json")
	hostilePaths, _ := filepath.Glob("testdata/hostile/*.json")
	for _, p := range append(paths, hostilePaths...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) < 24<<10 { // larger seeds make minimisation crawl
			f.Add(data)
		}
	}
	f.Add([]byte(`[{"name":"a-b","inputSchema":{"type":"object","properties":{"_":{"type":"string"},"x":{"type":"array","items":{"type":"integer"}}},"required":["_"]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tools, err := ParseListing(data)
		if err != nil {
			return
		}
		g, err := Generate("fuzz", tools, Options{})
		if err != nil {
			return
		}
		if err := verifyGo(g.Source, intentFor(t, g, tools)); err != nil {
			t.Fatalf("handed out unverifiable source: %v", err)
		}
		if err := typeCheck(g.Source); err != nil {
			t.Fatalf("handed out source that does not type-check: %v\n%s", err, g.Source)
		}
		if d := gofmtDiff(g.Source); d != "" {
			t.Fatalf("handed out source that is not gofmt-clean: %s\n%s", d, g.Source)
		}
		again, err := Generate("fuzz", tools, Options{})
		if err != nil || !bytes.Equal(again.Source, g.Source) || again.Surface != g.Surface {
			t.Fatal("not deterministic")
		}
		for _, tool := range tools {
			if !bytes.Contains(g.Source, []byte(`, "fuzz", `+goLit(tool.Name)+", ")) {
				t.Fatalf("tool %q is not called by its wire name", tool.Name)
			}
		}
		// What Go generates, TypeScript and Python generate too, and their
		// verification holds.
		for _, fl := range foreign {
			if _, err := g.In(fl.lang); err != nil {
				t.Fatalf("%s: %v", fl.lang, err)
			}
		}
	})
}

// syntheticListing is a listing the shape of a large real server: 85 tools in
// about 230 KB, with oneOf, $ref, nullable type arrays, enums, arrays and
// names with dashes and capitals.
func syntheticListing() []byte {
	var tools []map[string]any
	for i := range 85 {
		props := map[string]any{}
		var req []string
		for j := range 10 {
			name := fmt.Sprintf("param_%d_%d", i, j)
			var s map[string]any
			switch j % 7 {
			case 0:
				s = map[string]any{"type": "string"}
			case 1:
				s = map[string]any{"type": []string{"integer", "null"}}
			case 2:
				s = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
			case 3:
				s = map[string]any{"$ref": "#/$defs/shared"}
			case 4:
				s = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			case 5:
				s = map[string]any{"type": "string", "enum": []string{"asc", "desc", "none"}}
				name = fmt.Sprintf("sortOrder%d", j)
			case 6:
				s = map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}
			}
			s["description"] = strings.Repeat(fmt.Sprintf("Parameter %d of tool %d controls something. ", j, i), 2)
			props[name] = s
			if j%3 == 0 {
				req = append(req, name)
			}
		}
		tools = append(tools, map[string]any{
			"name":        fmt.Sprintf("API-do-Thing-%d", i),
			"description": strings.Repeat(fmt.Sprintf("Tool %d does a thing in the remote system and returns what it found. ", i), 8),
			"inputSchema": map[string]any{
				"type": "object", "properties": props, "required": req,
				"$defs": map[string]any{"shared": map[string]any{"type": "boolean"}},
			},
			"annotations": map[string]any{"readOnlyHint": i%2 == 0},
		})
	}
	data, _ := json.MarshalIndent(map[string]any{"tools": tools}, "", " ")
	return data
}

func TestSyntheticShape(t *testing.T) {
	data := syntheticListing()
	if len(data) < 200<<10 || len(data) > 260<<10 {
		t.Fatalf("synthetic listing is %d bytes, want about 230 KB", len(data))
	}
	tools, err := ParseListing(data)
	if err != nil || len(tools) != 85 {
		t.Fatalf("%d tools, %v", len(tools), err)
	}
	g, err := Generate("big", tools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := typeCheck(g.Source); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGenerate measures generating the synthetic 85-tool listing
// against a baseline in the same run: decoding that listing into any with
// encoding/json, the least any consumer of it pays.
func BenchmarkGenerate(b *testing.B) {
	data := syntheticListing()
	b.Run("baseline-unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-and-generate", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			tools, err := ParseListing(data)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Generate("big", tools, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
