package mcpproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

const okTool = `{"name":"echo","inputSchema":{"type":"object"}}`

var toolsPageTests = []struct {
	name  string
	raw   string
	tools int
	next  string
	path  string // fault path; "" = success
	index int
}{
	{name: "one page", raw: `{"tools":[` + okTool + `]}`, tools: 1},
	{name: "full descriptor", raw: `{"tools":[{"name":"add","title":"Add","description":"adds","inputSchema":{"type":"object","properties":{"a":{"type":"integer"}}},"outputSchema":{"type":"object"},"annotations":{"title":"A","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},"icons":[{"src":"data:"}],"_meta":{"k":1},"execution":{"taskSupport":"optional"},"future":1}],"nextCursor":"c2"}`, tools: 1, next: "c2"},
	{name: "empty cursor is a cursor", raw: `{"tools":[],"nextCursor":""}`, tools: 0, next: ""},
	{name: "not an object", raw: `[]`, path: ""},
	{name: "tools missing", raw: `{}`, path: "/tools", index: -1},
	{name: "tools not array", raw: `{"tools":{}}`, path: "/tools", index: -1},
	{name: "tool not object", raw: `{"tools":[` + okTool + `,3]}`, path: "/tools/1", index: 1},
	{name: "name missing", raw: `{"tools":[` + okTool + `,` + okTool + `,{"inputSchema":{}}]}`, path: "/tools/2/name", index: 2},
	{name: "name empty", raw: `{"tools":[{"name":"","inputSchema":{}}]}`, path: "/tools/0/name", index: 0},
	{name: "name not string", raw: `{"tools":[{"name":5,"inputSchema":{}}]}`, path: "/tools/0/name", index: 0},
	{name: "input schema missing", raw: `{"tools":[{"name":"x"}]}`, path: "/tools/0/inputSchema", index: 0},
	{name: "input schema null", raw: `{"tools":[{"name":"x","inputSchema":null}]}`, path: "/tools/0/inputSchema", index: 0},
	{name: "bad hint", raw: `{"tools":[{"name":"x","inputSchema":{},"annotations":{"readOnlyHint":"yes"}}]}`, path: "/tools/0/annotations/readOnlyHint", index: 0},
	{name: "bad cursor", raw: `{"tools":[],"nextCursor":7}`, path: "/nextCursor", index: -1},
	{name: "invalid json", raw: `{"tools":[}`, path: ""},
}

func TestDecodeToolsPage(t *testing.T) {
	for _, tt := range toolsPageTests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecodeToolsPage([]byte(tt.raw))
			if tt.path != "" || strings.HasPrefix(tt.name, "not") || strings.HasPrefix(tt.name, "invalid") {
				var pf *ProtocolFault
				if !errors.As(err, &pf) || pf.Path != tt.path || (tt.path != "" && pf.Index != tt.index) {
					t.Fatalf("err = %#v, want fault at %q index %d", err, tt.path, tt.index)
				}
				if !errors.Is(err, ErrProtocol) {
					t.Error("fault does not match ErrProtocol")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Tools) != tt.tools || p.NextCursor != tt.next || (tt.next != "" || strings.Contains(tt.raw, "nextCursor")) != p.HasNext {
				t.Fatalf("page = %+v", p)
			}
		})
	}
	p, err := DecodeToolsPage([]byte(toolsPageTests[1].raw))
	if err != nil {
		t.Fatal(err)
	}
	tool := p.Tools[0]
	a := tool.Annotations
	if tool.Name != "add" || tool.Title != "Add" || tool.Description != "adds" || string(tool.OutputSchema) != `{"type":"object"}` ||
		a == nil || a.Title != "A" || !*a.ReadOnlyHint || *a.DestructiveHint || !*a.IdempotentHint || *a.OpenWorldHint ||
		string(tool.Icons) != `[{"src":"data:"}]` || string(tool.Meta) != `{"k":1}` || tool.TaskSupport != "optional" ||
		!strings.Contains(string(tool.InputSchema), `"integer"`) {
		t.Fatalf("descriptor = %+v annotations %+v", tool, a)
	}
}

var initTests = []struct {
	name, raw, path string
}{
	{name: "full", raw: `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"s","version":"1","title":"S"},"instructions":"use \"echo\""}`},
	{name: "no version", raw: `{"capabilities":{},"serverInfo":{"name":"s","version":"1"}}`, path: "/protocolVersion"},
	{name: "no capabilities", raw: `{"protocolVersion":"x","serverInfo":{"name":"s","version":"1"}}`, path: "/capabilities"},
	{name: "caps not object", raw: `{"protocolVersion":"x","capabilities":[],"serverInfo":{"name":"s","version":"1"}}`, path: "/capabilities"},
	{name: "listChanged not bool", raw: `{"protocolVersion":"x","capabilities":{"tools":{"listChanged":1}},"serverInfo":{"name":"s","version":"1"}}`, path: "/capabilities/tools/listChanged"},
	{name: "no server name", raw: `{"protocolVersion":"x","capabilities":{},"serverInfo":{"version":"1"}}`, path: "/serverInfo/name"},
	{name: "no server info", raw: `{"protocolVersion":"x","capabilities":{}}`, path: "/serverInfo"},
	{name: "instructions not string", raw: `{"protocolVersion":"x","capabilities":{},"serverInfo":{"name":"s","version":"1"},"instructions":{}}`, path: "/instructions"},
}

func TestDecodeInitializeResult(t *testing.T) {
	for _, tt := range initTests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeInitializeResult([]byte(tt.raw))
			if tt.path != "" {
				var pf *ProtocolFault
				if !errors.As(err, &pf) || pf.Path != tt.path {
					t.Fatalf("err = %v, want fault at %q", err, tt.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.ProtocolVersion != "2025-11-25" || !r.HasTools || !r.ToolsListChanged || r.ServerInfo != (Implementation{"s", "1", "S"}) || r.Instructions != `use "echo"` {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

var callResultTests = []struct {
	name, raw, path string
	kinds           []string
}{
	{name: "every kind", raw: `{"content":[{"type":"text","text":"hi\n"},{"type":"image","data":"AA==","mimeType":"image/png"},{"type":"audio","data":"AA==","mimeType":"audio/wav"},{"type":"resource_link","uri":"file:///x","name":"x"},{"type":"resource","resource":{"uri":"file:///y","text":"t"}},{"type":"resource","resource":{"uri":"file:///z","blob":"AA=="}},{"type":"hologram","future":true}],"structuredContent":{"kinds":[1]},"isError":true,"_meta":{}}`,
		kinds: []string{"text", "image", "audio", "resource_link", "resource", "resource", "hologram"}},
	{name: "empty", raw: `{"content":[]}`, kinds: []string{}},
	{name: "structured array allowed", raw: `{"content":[],"structuredContent":[1,2]}`, kinds: []string{}},
	{name: "no content", raw: `{"isError":false}`, path: "/content"},
	{name: "content not array", raw: `{"content":"x"}`, path: "/content"},
	{name: "block not object", raw: `{"content":[{"type":"text","text":""},1]}`, path: "/content/1"},
	{name: "block without type", raw: `{"content":[{"text":"x"}]}`, path: "/content/0/type"},
	{name: "text without text", raw: `{"content":[{"type":"text"}]}`, path: "/content/0/text"},
	{name: "text not string", raw: `{"content":[{"type":"text","text":1}]}`, path: "/content/0/text"},
	{name: "isError not bool", raw: `{"content":[],"isError":"true"}`, path: "/isError"},
}

func TestDecodeCallToolResult(t *testing.T) {
	for _, tt := range callResultTests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeCallToolResult([]byte(tt.raw))
			if tt.path != "" {
				var pf *ProtocolFault
				if !errors.As(err, &pf) || pf.Path != tt.path {
					t.Fatalf("err = %v, want fault at %q", err, tt.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Content) != len(tt.kinds) {
				t.Fatalf("content = %+v", r.Content)
			}
			for i, k := range tt.kinds {
				if r.Content[i].Type != k || !json.Valid([]byte(r.Content[i].Raw)) {
					t.Errorf("block %d = %+v, want %s", i, r.Content[i], k)
				}
			}
		})
	}
	r, _ := DecodeCallToolResult([]byte(callResultTests[0].raw))
	if r.Content[0].Text != "hi\n" || !r.IsError || string(r.StructuredContent) != `{"kinds":[1]}` || string(r.Meta) != `{}` {
		t.Fatalf("result = %+v", r)
	}
}

// FuzzProtocol: the three result decoders are total, and text blocks
// agree with encoding/json's reading of the same string.
func FuzzProtocol(f *testing.F) {
	for _, tt := range toolsPageTests {
		f.Add([]byte(tt.raw))
	}
	for _, tt := range initTests {
		f.Add([]byte(tt.raw))
	}
	for _, tt := range callResultTests {
		f.Add([]byte(tt.raw))
	}
	for _, raw := range []string{
		`{"contents":[{"uri":"a:","text":"t"},{"uri":"b:","mimeType":"x/y","blob":"AA=="}]}`,
		`{"task":{"taskId":"t1","status":"working","ttl":null,"pollInterval":1000}}`,
		`{"taskId":"t1","status":"completed","statusMessage":"done"}`,
		`{"resultType":"task","taskId":"t","status":"failed"}`,
		`{"taskId":"t3","status":"failed","error":{"code":-32000,"message":"no"}}`,
		`{"resources":[{"uri":"a:","name":"a"}],"nextCursor":"c"}`,
		`{"resourceTemplates":[{"uriTemplate":"a:{x}","name":"a"}]}`,
	} {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, err := range []error{
			func() error { _, err := DecodeToolsPage(raw); return err }(),
			func() error { _, err := DecodeInitializeResult(raw); return err }(),
			func() error { _, err := DecodeReadResourceResult(raw); return err }(),
			func() error { _, _, err := DecodeCreateTaskResult(raw); return err }(),
			func() error {
				task, err := DecodeTask(raw)
				if err == nil {
					_, err = task.TaskError()
				}
				return err
			}(),
			func() error { _, err := DecodeListPage("resources/list", "resources", "uri", raw); return err }(),
		} {
			var pf *ProtocolFault
			if err != nil && !errors.As(err, &pf) {
				t.Fatalf("non-fault error %T", err)
			}
		}
		r, err := DecodeCallToolResult(raw)
		// The path from a validated envelope reads the same result the
		// same way, without checking it again.
		var m Message
		line := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), raw...), '}')
		if DecodeMessage(line, &m) == nil && !m.Result.IsZero() && bytes.Equal(m.Result.Bytes(), bytes.TrimSpace(raw)) {
			for _, v := range []jsonlex.Value{m.Result, m.Result.Own()} {
				rv, errv := DecodeCallToolResultValue(v)
				if (err == nil) != (errv == nil) || err != nil && err.Error() != errv.Error() || !reflect.DeepEqual(r, rv) {
					t.Fatalf("from the envelope (owned %v): %+v, %v; alone: %+v, %v", v.Owned(), rv, errv, r, err)
				}
			}
		}
		if err != nil {
			var pf *ProtocolFault
			if !errors.As(err, &pf) {
				t.Fatalf("non-fault error %T", err)
			}
			return
		}
		for _, b := range r.Content {
			if b.Type != "text" {
				continue
			}
			// A map, not a struct: encoding/json matches struct fields
			// case-insensitively, and "TEXT" is not "text".
			var ref map[string]any
			if json.Unmarshal([]byte(b.Raw), &ref) == nil && ref["text"] != b.Text {
				t.Fatalf("text %q, encoding/json %q", b.Text, ref["text"])
			}
		}
	})
}

// TestOwnedResultSharesNothingWritable: a result decoded from an owned
// Value outlives the line it was read from, and its []byte members are
// its own, so writing them changes no text.
func TestOwnedResultSharesNothingWritable(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"},{"type":"text","text":"a\nb"},{"type":"image","data":"x"}],"structuredContent":{"k":"hello"},"_meta":{"m":1}}}`)
	var m Message
	if err := DecodeMessage(line, &m); err != nil {
		t.Fatal(err)
	}
	r, err := DecodeCallToolResultValue(m.Result.Own())
	if err != nil {
		t.Fatal(err)
	}
	for i := range line {
		line[i] = 'X'
	}
	for i := range r.StructuredContent {
		r.StructuredContent[i] = 'Y'
	}
	for i := range r.Meta {
		r.Meta[i] = 'Y'
	}
	want := []ContentBlock{
		{Type: "text", Text: "hello", Raw: `{"type":"text","text":"hello"}`},
		{Type: "text", Text: "a\nb", Raw: `{"type":"text","text":"a\nb"}`},
		{Type: "image", Raw: `{"type":"image","data":"x"}`},
	}
	if !reflect.DeepEqual(r.Content, want) {
		t.Errorf("content = %+v, want %+v", r.Content, want)
	}
}

// TestLeasedResultRelease: a result decoded from a leased Value shares
// its texts with the lease until Release, which gives the lease back
// (zeroed: a text kept past it reads zeros), empties the result and may
// be called again harmlessly; StructuredContent and Meta are the
// result's own throughout. A result from an owned Value has nothing to
// give back.
func TestLeasedResultRelease(t *testing.T) {
	long := strings.Repeat("y", 2<<10)
	line := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + long + `"}],"structuredContent":{"k":1},"_meta":{"m":1}}}`)
	var m Message
	if err := DecodeMessage(line, &m); err != nil {
		t.Fatal(err)
	}
	r, err := DecodeCallToolResultValue(m.Result.Lease())
	if err != nil {
		t.Fatal(err)
	}
	text, sc, meta := r.Content[0].Text, r.StructuredContent, r.Meta
	if text != long || string(sc) != `{"k":1}` {
		t.Fatalf("text %.8q…, structuredContent %s", text, sc)
	}
	r.Release()
	if r.Content != nil || r.StructuredContent != nil || r.Meta != nil {
		t.Errorf("a released result still holds %+v", r)
	}
	if text != strings.Repeat("\x00", len(long)) {
		t.Errorf("a text kept past Release reads %.8q…, not zeros", text)
	}
	if string(sc) != `{"k":1}` || string(meta) != `{"m":1}` {
		t.Errorf("structuredContent or _meta changed with the lease: %s, %s", sc, meta)
	}
	r.Release()

	owned, err := DecodeCallToolResultValue(m.Result.Own())
	if err != nil {
		t.Fatal(err)
	}
	kept := owned.Content[0].Text
	owned.Release()
	if kept != long {
		t.Error("releasing a result of an owned Value changed its text")
	}
}

// TestDecodeCallToolResultAllocs holds the decoding of the result most
// tools answer, one text block from an owned Value, to one allocation:
// the result with its block. The text and the block's Raw are cut from
// the Value, and the type is one the spec names, so it is not copied.
func TestDecodeCallToolResultAllocs(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	var m Message
	if err := DecodeMessage(line, &m); err != nil {
		t.Fatal(err)
	}
	own := m.Result.Own()
	allocs := testing.AllocsPerRun(100, func() {
		r, err := DecodeCallToolResultValue(own)
		if err != nil || len(r.Content) != 1 || r.Content[0].Text != "hello" || r.Content[0].Type != "text" {
			t.Fatal(r, err)
		}
	})
	if allocs > 1 {
		t.Errorf("decoding a one-block result: %v allocations, want 1", allocs)
	}
	for _, typ := range []string{"text", "image", "audio", "resource", "resource_link", "other", `\u0074ext`} {
		r, err := DecodeCallToolResult([]byte(`{"content":[{"type":"` + typ + `","text":"t"}]}`))
		want := typ
		if typ == `\u0074ext` {
			want = "text"
		}
		if err != nil || r.Content[0].Type != want {
			t.Errorf("type %s: %+v, %v; want the type %q", typ, r, err, want)
		}
	}
}

// A page or result holds at most maxEntries entries: decoding faults at
// the first beyond, rather than building every entry a 16 MiB line can
// carry before a count is checked.
func TestEntriesBounded(t *testing.T) {
	page := func(member, entry string, n int) []byte {
		return []byte(`{"` + member + `":[` + strings.TrimSuffix(strings.Repeat(entry+",", n), ",") + `]}`)
	}
	const tool, named, content = `{"name":"a","inputSchema":{}}`, `{"uri":"a:","name":"a"}`, `{"uri":"a:","text":"t"}`
	decoders := []struct {
		name, member, entry string
		decode              func([]byte) error
	}{
		{"tools/list", "tools", tool, func(b []byte) error { _, err := DecodeToolsPage(b); return err }},
		{"resources/list", "resources", named, func(b []byte) error { _, err := DecodeListPage("resources/list", "resources", "uri", b); return err }},
		{"resources/read", "contents", content, func(b []byte) error { _, err := DecodeReadResourceResult(b); return err }},
	}
	for _, d := range decoders {
		if err := d.decode(page(d.member, d.entry, maxEntries)); err != nil {
			t.Errorf("%s of %d entries: %v", d.name, maxEntries, err)
		}
		var pf *ProtocolFault
		err := d.decode(page(d.member, d.entry, maxEntries+1))
		if !errors.As(err, &pf) || pf.Path != "/"+d.member+"/"+strconv.Itoa(maxEntries) {
			t.Errorf("%s of %d entries: %v, want a fault at the first beyond", d.name, maxEntries+1, err)
		}
	}
}

// A member given twice counts once, the last, in every page and result,
// as encoding/json reads it.
func TestDuplicateMemberLastWins(t *testing.T) {
	tools, err := DecodeToolsPage([]byte(`{"tools":[{"name":"a","inputSchema":{}}],"tools":[{"name":"b","inputSchema":{}}]}`))
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "b" {
		t.Errorf("tools: %+v, %v", tools, err)
	}
	page, err := DecodeListPage("resources/list", "resources", "uri", []byte(`{"resources":[{"uri":"a:","name":"a"}],"resources":[{"uri":"b:","name":"b"}]}`))
	if err != nil || len(page.Items) != 1 || !strings.Contains(string(page.Items[0]), "b:") {
		t.Errorf("resources: %+v, %v", page, err)
	}
	read, err := DecodeReadResourceResult([]byte(`{"contents":[{"uri":"a:","text":"a"}],"contents":[{"uri":"b:","text":"b"}]}`))
	if err != nil || len(read.Contents) != 1 || read.Contents[0].URI != "b:" {
		t.Errorf("contents: %+v, %v", read, err)
	}
}
