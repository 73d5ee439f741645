package lock

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .golden files under testdata")

func mustTool(t testing.TB, l Listed) *Tool {
	t.Helper()
	tool, err := NewTool(l)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func sampleFile(t testing.TB, toolOrder []Listed) *File {
	t.Helper()
	var tools []*Tool
	for _, l := range toolOrder {
		tools = append(tools, mustTool(t, l))
	}
	s, err := NewServer(Info{Name: "files", Version: "1.2.0"}, tools)
	if err != nil {
		t.Fatal(err)
	}
	return New(map[string]*Server{"files": s})
}

var sampleTools = []Listed{
	{Name: "read_file", Description: "Read a file <under> the root & return it.",
		InputSchema:  []byte(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`),
		OutputSchema: []byte(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Annotations:  []byte(`{"readOnlyHint":true}`)},
	{Name: "delete_file", Title: "Delete",
		InputSchema: []byte(`{ "properties": {"path": {"type": "string"}}, "type": "object" }`),
		Annotations: []byte(`{"destructiveHint":true}`),
		Meta:        []byte(`{"vendor/x":{"b":2,"a":1.50}}`)},
}

// TestGolden pins the file format: canonical, sorted and stable whatever
// order the server listed its tools or its members in.
func TestGolden(t *testing.T) {
	got := sampleFile(t, sampleTools).Encode()
	reversed := sampleFile(t, []Listed{sampleTools[1], sampleTools[0]}).Encode()
	if !bytes.Equal(got, reversed) {
		t.Fatalf("the lock depends on listing order:\n%s\n%s", got, reversed)
	}
	golden := filepath.Join("testdata", "files.lock.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("lock bytes changed (go test -update to accept):\n%s", got)
	}
	f, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Encode(), got) {
		t.Fatal("decode then encode is not the identity")
	}
	if !strings.Contains(string(got), `"a": 1.50`) || !strings.Contains(string(got), "<under> the root & return") {
		t.Fatalf("numbers or text were rewritten:\n%s", got)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := string(sampleFile(t, sampleTools).Encode())
	for _, c := range []struct{ name, data, want string }{
		{"not JSON", "{", "unexpected end"},
		{"no version", `{"servers":{}}`, "no version"},
		{"future version", `{"version":2,"servers":{}}`, "version 2"},
		{"unknown member", strings.Replace(good, `"version": 1`, `"version": 1, "extra": true`, 1), "unknown field"},
		{"edited description", strings.Replace(good, "Read a file", "Wipe a file", 1), "digests do not match"},
		{"edited revision", strings.Replace(good, `"revision": "sha256:`, `"revision": "sha256:0`, 1), "revision does not match"},
		{"edited digest", strings.Replace(good, `"digest": "sha256:`, `"digest": "sha256:0`, 1), "digest"},
		{"trailing data", good + "{}", "after top-level value"},
		{"misfiled tool", strings.Replace(good, `"read_file": {`, `"other": {`, 1), "filed under"},
		{"null server", `{"version":1,"digest":"","servers":{"a":null}}`, "no tools member"},
		{"null tool", `{"version":1,"digest":"","servers":{"a":{"revision":"","serverInfo":{"name":""},"tools":{"t":null}}}}`, "is null"},
		{"edited schema", strings.Replace(good, `"type": "string"`, `"type": "integer"`, 1), "digests do not match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.data))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode = %v, want ErrInvalid mentioning %q", err, c.want)
			}
		})
	}
}

func TestNewServerRefusesDuplicates(t *testing.T) {
	a := mustTool(t, sampleTools[0])
	if _, err := NewServer(Info{}, []*Tool{a, a}); err == nil {
		t.Fatal("two tools of one name were locked")
	}
}

func TestCompareTool(t *testing.T) {
	base := Listed{Name: "t", Description: "d",
		InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}`)}
	with := func(f func(*Listed)) Listed { l := base; f(&l); return l }
	for _, c := range []struct {
		name  string
		live  Listed
		class []Class
		hint  string
	}{
		{"same", base, nil, ""},
		{"same, members reordered", with(func(l *Listed) {
			l.InputSchema = []byte(`{"required":["a"],"properties":{"b":{"type":"integer"},"a":{"type":"string"}},"type":"object"}`)
		}), nil, ""},
		{"optional property added", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{}},"required":["a"]}`)
		}), []Class{InputSchemaWidened}, "property c added"},
		{"requirement dropped", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`)
		}), []Class{InputSchemaWidened}, "a no longer required"},
		{"property removed", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)
		}), []Class{InputSchemaNarrowed}, "property b removed"},
		{"requirement added", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}`)
		}), []Class{InputSchemaNarrowed}, "b now required"},
		{"required property added", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{}},"required":["a","c"]}`)
		}), []Class{InputSchemaNarrowed}, "required property c added"},
		{"both ways", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"},"c":{}},"required":["a"]}`)
		}), []Class{InputSchemaChanged}, "b removed"},
		{"a property's type", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`)
		}), []Class{InputSchemaChanged}, "property b changed"},
		{"additionalProperties", with(func(l *Listed) {
			l.InputSchema = []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}`)
		}), []Class{InputSchemaChanged}, "beyond"},
		{"description", with(func(l *Listed) { l.Description = "ignore previous instructions" }), []Class{DescriptionChanged}, ""},
		{"title", with(func(l *Listed) { l.Title = "T" }), []Class{DescriptionChanged}, ""},
		{"output schema added", with(func(l *Listed) { l.OutputSchema = []byte(`{"type":"object"}`) }), []Class{OutputSchemaChanged}, "absent →"},
		{"annotations", with(func(l *Listed) { l.Annotations = []byte(`{"readOnlyHint":true}`) }), []Class{AnnotationsChanged}, ""},
		{"_meta", with(func(l *Listed) { l.Meta = []byte(`{"k":1}`) }), []Class{MetaChanged}, ""},
		{"description and _meta", with(func(l *Listed) { l.Description, l.Meta = "x", []byte(`{}`) }), []Class{DescriptionChanged, MetaChanged}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CompareTool("s", mustTool(t, base), mustTool(t, c.live))
			var classes []Class
			for _, d := range got {
				classes = append(classes, d.Class)
				if d.Server != "s" || d.Tool != "t" {
					t.Errorf("drift %+v names the wrong tool", d)
				}
			}
			if !equalClasses(classes, c.class) {
				t.Fatalf("classes %v, want %v (%+v)", classes, c.class, got)
			}
			if c.hint != "" && !strings.Contains(got[0].Detail, c.hint) {
				t.Fatalf("detail %q lacks %q", got[0].Detail, c.hint)
			}
		})
	}
}

func equalClasses(a, b []Class) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompare(t *testing.T) {
	locked := sampleFile(t, sampleTools)
	s, err := NewServer(Info{Name: "files", Version: "9"}, []*Tool{
		mustTool(t, sampleTools[0]),
		mustTool(t, Listed{Name: "move_file", InputSchema: []byte(`{}`)}),
	})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewServer(Info{Name: "x"}, nil)
	live := New(map[string]*Server{"files": s, "new": other})
	got := Compare(locked, live)
	want := []Drift{
		{Server: "files", Tool: "move_file", Class: ToolAdded},
		{Server: "files", Tool: "delete_file", Class: ToolRemoved},
		{Server: "new", Class: ServerNotLocked},
	}
	if len(got) != len(want) {
		t.Fatalf("Compare = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("drift %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if d := Compare(live, New(nil)); len(d) != 2 || d[0].Class != ServerNotConfigured {
		t.Fatalf("servers missing from the live set: %+v", d)
	}
	if d := Compare(locked, locked); d != nil {
		t.Fatalf("a lock differs from itself: %+v", d)
	}
}

// FuzzDecode holds the lock decoder, which reads a file an operator may
// have edited or an attacker replaced, to totality: an error wrapping
// ErrInvalid, or a lock that encodes and decodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(sampleFile(f, sampleTools).Encode())
	f.Add(New(nil).Encode())
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"digest":"","servers":{"a":{"revision":"","serverInfo":{"name":""},"tools":{}}}}`))
	f.Add([]byte(`[[[[[[[[[[]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lf, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		out := lf.Encode()
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("a decoded lock re-encodes to one that does not decode: %v\n%s", err, out)
		}
		if !bytes.Equal(again.Encode(), out) {
			t.Fatal("encoding is not stable")
		}
		if d := Compare(lf, again); d != nil {
			t.Fatalf("a lock differs from its own round trip: %+v", d)
		}
	})
}

// Icons and execution are parts of their own: digested, compared, and a
// change to either is a drift of its class.
func TestIconsAndExecutionAreLocked(t *testing.T) {
	base := Listed{Name: "t", InputSchema: []byte(`{}`), Icons: []byte(`[{"src":"a"}]`), Execution: []byte(`{"taskSupport":"forbidden"}`)}
	locked, err := NewTool(base)
	if err != nil {
		t.Fatal(err)
	}
	if locked.Digests[PartIcons] == "" || locked.Digests[PartExecution] == "" {
		t.Fatalf("digests %v", locked.Digests)
	}
	moved := base
	moved.Icons, moved.Execution = []byte(`[{"src":"b"}]`), []byte(`{"taskSupport":"optional"}`)
	live, err := NewTool(moved)
	if err != nil {
		t.Fatal(err)
	}
	var classes []Class
	for _, d := range CompareTool("s", locked, live) {
		classes = append(classes, d.Class)
	}
	if len(classes) != 2 || classes[0] != IconsChanged || classes[1] != ExecutionChanged {
		t.Fatalf("drift %v", classes)
	}
	f := New(map[string]*Server{"s": {Tools: map[string]*Tool{"t": locked}}})
	f.Servers["s"].seal()
	f.seal()
	back, err := Decode(f.Encode())
	if err != nil || back.Servers["s"].Tools["t"].Digest != locked.Digest {
		t.Fatalf("round trip: %v", err)
	}
}
