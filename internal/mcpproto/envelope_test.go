package mcpproto

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

var envelopeTests = []struct {
	name   string
	line   string
	kind   Kind
	fault  string // substring of the fault's reason; "" = success
	isJSON bool   // for faults: the line was JSON
	id     string // raw id expected
	method string
	result string
	code   int64
}{
	{name: "response", line: `{"jsonrpc":"2.0","id":7,"result":{"a":[1,2]}}`, kind: KindResponse, id: "7", result: `{"a":[1,2]}`},
	{name: "response with whitespace", line: " {\"jsonrpc\" : \"2.0\" ,\t\"result\" : {} , \"id\" : 7 } ", kind: KindResponse, id: "7", result: `{}`},
	{name: "error response", line: `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope","data":{"x":1}}}`, kind: KindResponse, id: "3", code: -32601},
	{name: "string id response", line: `{"jsonrpc":"2.0","id":"7","result":{}}`, kind: KindResponse, id: `"7"`, result: `{}`},
	{name: "server request", line: `{"jsonrpc":"2.0","id":"s1","method":"roots/list","params":{}}`, kind: KindRequest, id: `"s1"`, method: "roots/list"},
	{name: "notification", line: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`, kind: KindNotification, method: "notifications/progress"},
	{name: "escaped key and method", line: `{"jsonrpc":"2.0","\u006dethod":"p\u0069ng","id":1}`, kind: KindRequest, id: "1", method: "ping"},
	{name: "unknown members ignored", line: `{"jsonrpc":"2.0","id":1,"result":{},"extra":[{"deep":true}]}`, kind: KindResponse, id: "1", result: `{}`},
	{name: "big integer id", line: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}`, kind: KindResponse, id: "123456789012345678901234567890", result: `{}`},

	{name: "not json", line: `Server listening on stdio`, fault: "invalid character"},
	{name: "empty line", line: ``, fault: "unexpected end"},
	{name: "truncated", line: `{"jsonrpc":"2.0","id":1,"result":{`, fault: "expected object key"},
	{name: "trailing data", line: `{"jsonrpc":"2.0","id":1,"result":{}} x`, fault: "trailing data"},
	{name: "array", line: `[1]`, fault: "not a JSON object", isJSON: true},
	{name: "wrong version", line: `{"jsonrpc":"1.0","id":1,"result":{}}`, fault: `"jsonrpc" is not "2.0"`, isJSON: true},
	{name: "missing version", line: `{"id":1,"result":{}}`, fault: `"jsonrpc" is not "2.0"`, isJSON: true},
	{name: "null id", line: `{"jsonrpc":"2.0","id":null,"result":{}}`, fault: "id is null", isJSON: true},
	{name: "float id", line: `{"jsonrpc":"2.0","id":1.0,"result":{}}`, fault: "id is not an integer", isJSON: true},
	{name: "exponent id", line: `{"jsonrpc":"2.0","id":1e2,"result":{}}`, fault: "id is not an integer", isJSON: true},
	{name: "object id", line: `{"jsonrpc":"2.0","id":{},"result":{}}`, fault: "neither string nor integer", isJSON: true},
	{name: "both result and error", line: `{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"m"}}`, fault: "both", isJSON: true, id: "4"},
	{name: "neither result nor error", line: `{"jsonrpc":"2.0","id":4}`, fault: "neither", isJSON: true, id: "4"},
	{name: "response without id", line: `{"jsonrpc":"2.0","result":{}}`, fault: `without "id"`, isJSON: true},
	{name: "duplicate id", line: `{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`, fault: "duplicate", isJSON: true},
	{name: "method not string", line: `{"jsonrpc":"2.0","method":1}`, fault: "not a string", isJSON: true},
	{name: "request with result", line: `{"jsonrpc":"2.0","id":1,"method":"x","result":{}}`, fault: `carries "result"`, isJSON: true},
	{name: "scalar params", line: `{"jsonrpc":"2.0","method":"x","params":3}`, fault: "neither object nor array", isJSON: true},
	{name: "error not object", line: `{"jsonrpc":"2.0","id":1,"error":"bad"}`, fault: "not an object", isJSON: true},
	{name: "error code float", line: `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`, fault: "not an integer", isJSON: true},
	{name: "error without message", line: `{"jsonrpc":"2.0","id":1,"error":{"code":1}}`, fault: "without message", isJSON: true},
	{name: "control char in string", line: "{\"jsonrpc\":\"2.0\",\"method\":\"a\x01\"}", fault: "control character"},
	{name: "bad escape", line: `{"jsonrpc":"2.0","method":"\q"}`, fault: "invalid escape"},
	{name: "deep nesting", line: `{"jsonrpc":"2.0","method":"x","params":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, fault: "nesting deeper"},
}

func TestDecodeMessage(t *testing.T) {
	for _, tt := range envelopeTests {
		t.Run(tt.name, func(t *testing.T) {
			var m Message
			err := DecodeMessage([]byte(tt.line), &m)
			if tt.fault != "" {
				var mf *MessageFault
				if !errors.As(err, &mf) || !strings.Contains(mf.Reason, tt.fault) {
					t.Fatalf("err = %v, want fault containing %q", err, tt.fault)
				}
				if mf.JSON != tt.isJSON {
					t.Errorf("fault.JSON = %v, want %v", mf.JSON, tt.isJSON)
				}
				if !errors.Is(err, ErrProtocol) {
					t.Errorf("fault does not match ErrProtocol")
				}
				if tt.id != "" && (!m.HasID || string(m.ID.Raw) != tt.id) {
					t.Errorf("id on fault = %q (has %v), want %q", m.ID.Raw, m.HasID, tt.id)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if m.Kind != tt.kind {
				t.Errorf("kind = %v, want %v", m.Kind, tt.kind)
			}
			if string(m.ID.Raw) != tt.id {
				t.Errorf("id = %q, want %q", m.ID.Raw, tt.id)
			}
			if string(m.Method) != tt.method {
				t.Errorf("method = %q, want %q", m.Method, tt.method)
			}
			if tt.result != "" && string(m.Result.Bytes()) != tt.result {
				t.Errorf("result = %q, want %q", m.Result.Bytes(), tt.result)
			}
			if tt.code != 0 && (m.Error == nil || m.Error.Code != tt.code) {
				t.Errorf("error = %+v, want code %d", m.Error, tt.code)
			}
		})
	}
}

func TestIDKinds(t *testing.T) {
	var m Message
	if err := DecodeMessage([]byte(`{"jsonrpc":"2.0","id":"5","result":{}}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.ID.IsInt {
		t.Fatal(`string id "5" must never equal integer id 5`)
	}
	if err := DecodeMessage([]byte(`{"jsonrpc":"2.0","id":-5,"result":{}}`), &m); err != nil || !m.ID.IsInt || m.ID.Int != -5 {
		t.Fatalf("id -5: %+v %v", m.ID, err)
	}
}

func TestSplitBatch(t *testing.T) {
	for _, tt := range []struct {
		line  string
		n     int
		fault string
	}{
		{`[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":{}}]`, 2, ""},
		{`[]`, 0, "empty batch"},
		{`[{"jsonrpc":"2.0","method":"a"},3]`, 0, "element 1 is not an object"},
		{`{"jsonrpc":"2.0"}`, 0, "not a JSON array"},
		{`[`, 0, "unexpected end"},
	} {
		elems, err := SplitBatch([]byte(tt.line))
		if tt.fault != "" {
			if err == nil || !strings.Contains(err.Error(), tt.fault) {
				t.Errorf("%s: err = %v, want %q", tt.line, err, tt.fault)
			}
			continue
		}
		if err != nil || len(elems) != tt.n {
			t.Errorf("%s: %d elems, err %v; want %d", tt.line, len(elems), err, tt.n)
		}
	}
}

// FuzzDecodeMessage: the decoder is total, agrees with encoding/json on
// what is JSON, and every success is a well-formed classification.
func FuzzDecodeMessage(f *testing.F) {
	for _, tt := range envelopeTests {
		f.Add([]byte(tt.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var m Message
		err := DecodeMessage(line, &m)
		var mf *MessageFault
		if err != nil && !errors.As(err, &mf) {
			t.Fatalf("non-fault error %T: %v", err, err)
		}
		if utf8.Valid(line) && (mf == nil || !strings.Contains(mf.Reason, "nesting")) {
			isJSON := err == nil || mf.JSON
			if isJSON != json.Valid(line) {
				t.Fatalf("JSON validity %v disagrees with encoding/json for %q (%v)", isJSON, line, err)
			}
		}
		if err != nil {
			return
		}
		switch m.Kind {
		case KindResponse:
			if m.Result.IsZero() == (m.Error == nil) || !m.HasID {
				t.Fatalf("bad response %+v", m)
			}
		case KindRequest:
			if !m.HasID || m.Method == nil {
				t.Fatalf("bad request %+v", m)
			}
		case KindNotification:
			if m.HasID || m.Method == nil {
				t.Fatalf("bad notification %+v", m)
			}
		default:
			t.Fatalf("kind %v", m.Kind)
		}
		if m.Params != nil && !json.Valid(m.Params) || !m.Result.IsZero() && !json.Valid(m.Result.Bytes()) {
			t.Fatalf("raw member is not JSON")
		}
	})
}
