package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/mcpwire"
)

// Every kind of MCP content block reaches the program with what it can
// use: the bytes of images, audio and binary resources (within
// max_result_data), a resource's URI and text, a link's URI and name.
func TestResultKinds(t *testing.T) {
	defer leakcheck.Check(t)()
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
	wav, _ := base64.StdEncoding.DecodeString("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=")
	for _, tc := range []struct {
		name  string
		limit int
		want  []capwire.Block
		cut   bool
	}{
		{name: "default", limit: config.DefaultMaxResultData, want: []capwire.Block{
			{Type: "text", Kind: "text", Text: "a text block"},
			{Type: "other", Kind: "image", MIME: "image/png", Data: png, Size: int64(len(png))},
			{Type: "other", Kind: "audio", MIME: "audio/wav", Data: wav, Size: int64(len(wav))},
			{Type: "other", Kind: "resource_link", URI: "file:///mcptest/link.txt", Name: "link.txt", MIME: "text/plain"},
			{Type: "other", Kind: "resource", URI: "file:///mcptest/embedded.txt", MIME: "text/plain", Text: "embedded text", Size: 13},
			{Type: "other", Kind: "resource", URI: "file:///mcptest/embedded.bin", MIME: "application/octet-stream", Data: []byte{0, 1, 2, 0xff}, Size: 4},
		}},
		// The image fits, the audio does not: it is carried as its size,
		// and so is everything after it that does not fit what is left.
		{name: "limited", limit: len(png) + 10, cut: true, want: []capwire.Block{
			{Type: "text", Kind: "text", Text: "a text block"},
			{Type: "other", Kind: "image", MIME: "image/png", Data: png, Size: int64(len(png))},
			{Type: "other", Kind: "audio", MIME: "audio/wav", Size: int64(len(wav))},
			{Type: "other", Kind: "resource_link", URI: "file:///mcptest/link.txt", Name: "link.txt", MIME: "text/plain"},
			{Type: "other", Kind: "resource", URI: "file:///mcptest/embedded.txt", MIME: "text/plain", Text: "embedded text", Size: 13},
			{Type: "other", Kind: "resource", URI: "file:///mcptest/embedded.bin", MIME: "application/octet-stream", Data: []byte{0, 1, 2, 0xff}, Size: 4},
		}},
		{name: "none", limit: 0, cut: true, want: []capwire.Block{
			{Type: "text", Kind: "text", Text: "a text block"},
			{Type: "other", Kind: "image", MIME: "image/png", Size: int64(len(png))},
			{Type: "other", Kind: "audio", MIME: "audio/wav", Size: int64(len(wav))},
			{Type: "other", Kind: "resource_link", URI: "file:///mcptest/link.txt", Name: "link.txt", MIME: "text/plain"},
			{Type: "other", Kind: "resource", URI: "file:///mcptest/embedded.txt", MIME: "text/plain", Text: "embedded text", Size: 13},
			{Type: "other", Kind: "resource", URI: "file:///mcptest/embedded.bin", MIME: "application/octet-stream", Size: 4},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxResultData = tc.limit }, mcptestServer("t", mcptest.Scenario{}))
			c := tb.dial(tb.grant(map[string][]string{"t": nil}))
			ctx, cancel := context.WithTimeout(context.Background(), backstop)
			defer cancel()
			r, err := c.Call(ctx, "t", "content", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Content, tc.want) || r.Truncated != tc.cut {
				t.Errorf("content (truncated %v):\n got %+v\nwant %+v", r.Truncated, r.Content, tc.want)
			}
			c.Close()
			tb.shutdown()
		})
	}
}

// A block that breaks MCP's schema costs its call a result_malformed
// naming where; unknown kinds cross as markers; server strings are capped.
func TestReduceBlocks(t *testing.T) {
	b := &Bridge{cfg: config.Defaults()}
	long := make([]byte, 3*maxBlockURI)
	for i := range long {
		long[i] = 'u'
	}
	for _, tc := range []struct {
		name, raw string
		want      capwire.Block
		path      string
	}{
		{name: "image without data", raw: `{"type":"image","mimeType":"image/png"}`, path: "/content/0/data"},
		{name: "image data not base64", raw: `{"type":"image","data":"%%%%","mimeType":"image/png"}`, path: "/content/0/data"},
		{name: "resource without resource", raw: `{"type":"resource"}`, path: "/content/0/resource"},
		{name: "resource blob a number", raw: `{"type":"resource","resource":{"uri":"x:","blob":3}}`, path: "/content/0/resource/blob"},
		{name: "unpadded base64", raw: `{"type":"audio","data":"AAEC/w"}`, want: capwire.Block{Type: "other", Kind: "audio", Data: []byte{0, 1, 2, 0xff}, Size: 4}},
		{name: "unknown kind", raw: `{"type":"hologram","depth":3}`, want: capwire.Block{Type: "other", Kind: "hologram"}},
		{name: "link size and long uri", raw: `{"type":"resource_link","uri":"` + string(long) + `","name":"n","size":12}`,
			want: capwire.Block{Type: "other", Kind: "resource_link", URI: truncate.Ellipsis(string(long), maxBlockURI), Name: "n", Size: 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := b.reduce(&mcpwire.CallToolResult{Content: []mcpwire.ContentBlock{{Type: typeOf(tc.raw), Raw: tc.raw}}})
			if tc.path != "" {
				if o.denial == nil || o.denial.Code != capwire.CodeResultMalformed || o.denial.Path != tc.path {
					t.Fatalf("outcome %+v %+v, want result_malformed at %s", o.result, o.denial, tc.path)
				}
				return
			}
			if o.denial != nil || !reflect.DeepEqual(o.result.Content, []capwire.Block{tc.want}) {
				t.Fatalf("outcome %.300v %v, want %.300v", o.result, o.denial, tc.want)
			}
			if n := len(o.result.Content[0].URI); n > maxBlockURI+len("…") {
				t.Errorf("URI of %d bytes crossed, over %d", n, maxBlockURI)
			}
		})
	}
}

// A result of one text block is reduced in one allocation (the result
// with its block); several blocks all cross, in order.
func TestReduceAllocs(t *testing.T) {
	b := &Bridge{cfg: config.Defaults()}
	one := &mcpwire.CallToolResult{Content: []mcpwire.ContentBlock{{Type: "text", Text: "hello"}}}
	allocs := testing.AllocsPerRun(100, func() {
		if o := b.reduce(one); o.denial != nil || o.result.Content[0].Text != "hello" {
			t.Fatal(o.denial)
		}
	})
	if allocs > 1 {
		t.Errorf("reducing a one-block result: %v allocations, want 1", allocs)
	}
	three := &mcpwire.CallToolResult{Content: []mcpwire.ContentBlock{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}, {Type: "text", Text: "c"}}}
	o := b.reduce(three)
	want := []capwire.Block{{Type: capwire.BlockText, Text: "a"}, {Type: capwire.BlockText, Text: "b"}, {Type: capwire.BlockText, Text: "c"}}
	if o.denial != nil || !reflect.DeepEqual(o.result.Content, want) {
		t.Fatalf("three blocks: %+v %v, want %+v", o.result, o.denial, want)
	}
}

func typeOf(raw string) string {
	var v struct{ Type string }
	_ = json.Unmarshal([]byte(raw), &v)
	return v.Type
}

// Arguments that break a tool's input schema, where capbridge can check
// it exactly, are refused bad_arguments at the first offending value and
// never reach the server; a schema it cannot check exactly is the
// server's to judge, as before.
func TestSchemaCheck(t *testing.T) {
	defer leakcheck.Check(t)()
	tools := []json.RawMessage{
		json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string","maxLength":5}},"required":["text"],"additionalProperties":false}}`),
		json.RawMessage(`{"name":"add","inputSchema":{"type":"object","properties":{"a":{"type":"integer","minimum":0},"b":{"type":"integer"}},"required":["a","b"]}}`),
		// A pattern is not checked by capbridge: the whole schema is left to the server.
		json.RawMessage(`{"name":"fail","inputSchema":{"type":"object","properties":{"text":{"type":"string","pattern":"^x"}}}}`),
	}
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{Tools: tools}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	for _, tc := range []struct {
		tool string
		args map[string]any
		path string
		msg  string
	}{
		{"echo", map[string]any{"text": 7}, "/text", "want a string, got 7"},
		{"echo", map[string]any{"text": "toolong"}, "/text", "want a string of at most 5 characters, got 7 characters"},
		{"echo", map[string]any{}, "/text", "the property is required"},
		{"echo", map[string]any{"text": "a", "x": 1}, "/x", `the schema allows only "text"`},
		{"add", map[string]any{"a": -1, "b": 2}, "/a", "want a number >= 0, got -1"},
		{"add", map[string]any{"a": 1, "b": []any{2}}, "/b", "want an integer, got an array"},
	} {
		before := tb.srv("t").calls.Load()
		_, err := c.Call(ctx, "t", tc.tool, tc.args)
		var d *capwire.Denied
		if !errors.As(err, &d) || d.Code != capwire.CodeBadArguments || d.Path != tc.path || !strings.Contains(d.Message, tc.msg) {
			t.Errorf("%s %v: %v; want bad_arguments at %s saying %q", tc.tool, tc.args, err, tc.path, tc.msg)
		}
		if after := tb.srv("t").calls.Load(); after != before {
			t.Errorf("%s %v reached the server", tc.tool, tc.args)
		}
	}
	// Fitting arguments pass; an unchecked schema reaches the server,
	// which answers as it does.
	if r, err := c.Call(ctx, "t", "echo", map[string]any{"text": "hi"}); err != nil || r.Text() != "hi" {
		t.Errorf("echo hi: %v, %v", r, err)
	}
	if r, err := c.Call(ctx, "t", "fail", map[string]any{"text": 7}); err != nil || !r.IsError {
		t.Errorf("fail with an unchecked schema: %+v, %v; want the server's tool error", r, err)
	}
	c.Close()
	tb.shutdown()
}
