package mcpproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeDiscoverResult(t *testing.T) {
	const sdk = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"probe","version":"1.2.3"}}}`
	d, err := DecodeDiscoverResult([]byte(sdk))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Supports("2026-07-28") || !d.HasTools || !d.ToolsListChanged || d.CacheScope != "private" || !d.HasServerInfo || d.ServerInfo.Name != "probe" || d.ServerInfo.Version != "1.2.3" {
		t.Errorf("decoded %+v", d)
	}
	d, err = DecodeDiscoverResult([]byte(`{"supportedVersions":[],"capabilities":{},"instructions":"hi","ttlMs":5000}`))
	if err != nil || d.Instructions != "hi" || d.TTLMs != 5000 || d.HasTools || d.HasServerInfo {
		t.Errorf("minimal: %+v %v", d, err)
	}
	for _, tt := range []struct{ raw, path string }{
		{`{"capabilities":{}}`, "/supportedVersions"},
		{`{"supportedVersions":[]}`, "/capabilities"},
		{`{"supportedVersions":"2026-07-28","capabilities":{}}`, "/supportedVersions"},
		{`{"supportedVersions":["x",1],"capabilities":{}}`, "/supportedVersions/1"},
		{`{"supportedVersions":[],"capabilities":[]}`, "/capabilities"},
		{`{"supportedVersions":[],"capabilities":{"tools":{"listChanged":"yes"}}}`, "/capabilities/tools/listChanged"},
		{`{"supportedVersions":[],"capabilities":{},"ttlMs":-1}`, "/ttlMs"},
		{`{"supportedVersions":[],"capabilities":{},"ttlMs":1.5}`, "/ttlMs"},
		{`{"supportedVersions":[],"capabilities":{},"cacheScope":"shared"}`, "/cacheScope"},
		{`{"supportedVersions":[],"capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x"}}}`, "/_meta/io.modelcontextprotocol/serverInfo/version"},
		{`{"supportedVersions":[],"capabilities":{},"resultType":"input_required"}`, "/resultType"},
		{`{"supportedVersions":[],"capabilities":{},"resultType":7}`, "/resultType"},
		{`{"supportedVersions":[` + strings.Repeat(`"v",`, 64) + `"v"],"capabilities":{}}`, "/supportedVersions"},
		{`[]`, ""},
	} {
		_, err := DecodeDiscoverResult([]byte(tt.raw))
		var pf *ProtocolFault
		if !errors.As(err, &pf) || pf.Path != tt.path || !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: err %v, want a fault at %q", tt.raw, err, tt.path)
		}
	}
}

func TestDecodeResultType(t *testing.T) {
	for raw, want := range map[string]ResultType{
		`{}`:                              ResultComplete,
		`{"content":[]}`:                  ResultComplete,
		`{"resultType":"complete"}`:       ResultComplete,
		`{"resultType":"input_required"}`: ResultInputRequired,
	} {
		if got, err := DecodeResultType("tools/call", []byte(raw)); err != nil || got != want {
			t.Errorf("%s: %v %v", raw, got, err)
		}
	}
	for _, raw := range []string{`{"resultType":"later"}`, `{"resultType":null}`, `{"resultType":["complete"]}`, `"complete"`} {
		if _, err := DecodeResultType("tools/call", []byte(raw)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

func TestModernErrorData(t *testing.T) {
	sup, req, ok := UnsupportedVersion([]byte(`{"supported":["2026-07-28"],"requested":"2025-11-25"}`))
	if !ok || !slices.Equal(sup, []string{"2026-07-28"}) || req != "2025-11-25" {
		t.Errorf("unsupported: %v %q %v", sup, req, ok)
	}
	for _, d := range []string{``, `null`, `{}`, `{"supported":"x"}`, `{"supported":[1]}`, `[`} {
		if _, _, ok := UnsupportedVersion([]byte(d)); ok {
			t.Errorf("%q read as unsupported-version data", d)
		}
	}
	if got := RequiredCapabilities([]byte(`{"requiredCapabilities":{"sampling":{}}}`)); string(got) != `{"sampling":{}}` {
		t.Errorf("required: %s", got)
	}
	if got := RequiredCapabilities([]byte(`{"requiredCapabilities":["sampling"]}`)); got != nil {
		t.Errorf("required from an array: %s", got)
	}
	id, ok := SubscriptionID([]byte(`{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":4}}`))
	if !ok || !id.IsInt || id.Int != 4 {
		t.Errorf("subscription id: %+v %v", id, ok)
	}
	if id, ok := SubscriptionID([]byte(`{"_meta":{"io.modelcontextprotocol/subscriptionId":"s"}}`)); !ok || id.IsInt || string(id.Raw) != `"s"` {
		t.Errorf("string subscription id: %+v %v", id, ok)
	}
	for _, p := range []string{``, `{}`, `{"_meta":{}}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":null}}`, `{"_meta":[]}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":1.5}}`, `{`} {
		if _, ok := SubscriptionID([]byte(p)); ok {
			t.Errorf("%q read as carrying a subscription id", p)
		}
	}
	if got := InputRequestMethods([]byte(`{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"},"b":{},"c":{"method":"x"}}}`), 2); !slices.Equal(got, []string{"a (roots/list)", "b (?)"}) {
		t.Errorf("input requests: %q", got)
	}
}

// An outputSchema may be any JSON Schema 2020-12 value, true included,
// and execution may be absent: neither fails a listing.
func TestToolSchemasOfTheModernEra(t *testing.T) {
	p, err := DecodeToolsPage([]byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"outputSchema":true},{"name":"b","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}],"resultType":"complete","ttlMs":60000,"cacheScope":"public"}`))
	if err != nil || string(p.Tools[0].OutputSchema) != "true" || p.Tools[0].Execution != nil || p.TTLMs != 60000 || p.CacheScope != "public" {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := DecodeToolsPage([]byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"outputSchema":"x"}]}`)); !errors.Is(err, ErrProtocol) {
		t.Errorf("a string schema accepted: %v", err)
	}
}

// FuzzDecodeDiscoverResult: the decoder is total, and an accepted
// result agrees with encoding/json on the versions and capabilities.
func FuzzDecodeDiscoverResult(f *testing.F) {
	for _, s := range []string{
		`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"p","version":"1"}}}`,
		`{"supportedVersions":[],"capabilities":{}}`, `{"supportedVersions":[1],"capabilities":{}}`, `{"resultType":"x"}`, `[`, ``, `{"ttlMs":99999999999999999999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := DecodeDiscoverResult(raw)
		if err != nil {
			var pf *ProtocolFault
			if !errors.As(err, &pf) {
				t.Fatalf("error is not a *ProtocolFault: %v", err)
			}
			return
		}
		// A map, not a struct: encoding/json matches struct fields
		// case-insensitively, MCP names exactly.
		var ref map[string]json.RawMessage
		var versions []string
		if json.Unmarshal(raw, &ref) != nil || json.Unmarshal(ref["supportedVersions"], &versions) != nil {
			return
		}
		if !slices.Equal(d.SupportedVersions, versions) && len(d.SupportedVersions)+len(versions) > 0 {
			t.Errorf("versions %q, encoding/json %q", d.SupportedVersions, versions)
		}
		if len(d.Capabilities) == 0 || d.Capabilities[0] != '{' {
			t.Errorf("capabilities %q", d.Capabilities)
		}
	})
}

// FuzzSubscriptionID: the reader is total, and an id it reads is the one
// encoding/json finds.
func FuzzSubscriptionID(f *testing.F) {
	for _, s := range []string{`{"_meta":{"io.modelcontextprotocol/subscriptionId":4}}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"a"}}`, `{"_meta":1}`, `{`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, ok := SubscriptionID(raw)
		if !ok {
			return
		}
		var ref struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(raw, &ref) != nil {
			return
		}
		if want := ref.Meta[MetaSubscriptionID]; want != nil && string(want) != string(id.Raw) {
			t.Errorf("id %s, encoding/json %s", id.Raw, want)
		}
	})
}

// FuzzDecodeResultType: total, and a known type is what encoding/json
// reads (absent is complete).
func FuzzDecodeResultType(f *testing.F) {
	for _, s := range []string{`{}`, `{"resultType":"complete"}`, `{"resultType":"input_required"}`, `{"resultType":"task"}`, `{"resultType":"x"}`, `{"resultType":1}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rt, err := DecodeResultType("tools/call", raw)
		// From a validated envelope the answer is the same.
		var m Message
		line := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), raw...), '}')
		if DecodeMessage(line, &m) == nil && bytes.Equal(m.Result.Bytes(), bytes.TrimSpace(raw)) {
			rv, errv := DecodeResultTypeValue("tools/call", m.Result)
			if rv != rt || (err == nil) != (errv == nil) || err != nil && err.Error() != errv.Error() {
				t.Fatalf("from the envelope: %v, %v; alone: %v, %v", rv, errv, rt, err)
			}
		}
		if err != nil {
			var pf *ProtocolFault
			if !errors.As(err, &pf) {
				t.Fatalf("error is not a *ProtocolFault: %v", err)
			}
			return
		}
		var ref map[string]json.RawMessage
		if json.Unmarshal(raw, &ref) != nil {
			return
		}
		want, s := ResultComplete, ""
		if v, ok := ref["resultType"]; ok {
			if json.Unmarshal(v, &s) != nil || (s != "complete" && s != "input_required" && s != "task") {
				t.Fatalf("accepted resultType %s", v)
			}
		}
		switch s {
		case "input_required":
			want = ResultInputRequired
		case "task":
			want = ResultTask
		}
		if rt != want {
			t.Errorf("%v, encoding/json reads %q", rt, s)
		}
	})
}

// FuzzServerData: the readers of what a server's errors and results
// carry beside the envelope (a batch, -32022's and -32021's data, an
// input_required result's requests, a saved listing, ping's result) are
// total, fault with typed errors, and return only valid UTF-8.
func FuzzServerData(f *testing.F) {
	for _, s := range []string{
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"x"}]`, `[]`, `[1]`,
		`{"supported":["2025-11-25","2026-07-28"],"requested":"1999-01-01"}`, "{\"supported\":[\"\xff\xfe\"],\"requested\":\"\xc0\"}", `{"supported":"x"}`,
		`{"requiredCapabilities":{"sampling":{}}}`,
		`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create"},"b":{"method":1}}}`,
		`{"tools":[{"name":"a","inputSchema":{}}]}`, `[{"name":"a","inputSchema":{}}]`, `{}`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var mf *MessageFault
		if elems, err := SplitBatch(raw); err != nil && !errors.As(err, &mf) {
			t.Fatalf("SplitBatch: %T %v", err, err)
		} else if err == nil && len(elems) == 0 {
			t.Fatal("SplitBatch accepted an empty batch")
		}
		if sup, req, ok := UnsupportedVersion(raw); ok {
			for _, v := range append(sup, req) {
				if !utf8.ValidString(v) {
					t.Fatalf("UnsupportedVersion gave %q", v)
				}
			}
		}
		if caps := RequiredCapabilities(raw); caps != nil && (caps[0] != '{' || !utf8.Valid(caps)) {
			t.Fatalf("RequiredCapabilities gave %q", caps)
		}
		for _, m := range InputRequestMethods(raw, 4) {
			if !utf8.ValidString(m) {
				t.Fatalf("InputRequestMethods gave %q", m)
			}
		}
		var pf *ProtocolFault
		if _, err := DecodeToolList(raw); err != nil && !errors.As(err, &pf) {
			t.Fatalf("DecodeToolList: %T %v", err, err)
		}
		if err := DecodePingResult(raw); err != nil && !errors.As(err, &pf) {
			t.Fatalf("DecodePingResult: %T %v", err, err)
		}
	})
}
