package capwire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/bound"
)

// raw marks bytes that m appends verbatim instead of encoding.
type raw = msgpack.RawMessage

// m builds a MessagePack map with keys in the order given, so tests can
// place a field (the id, say) after the fault they provoke.
func m(kv ...any) raw {
	b := appendMapHeader(nil, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		switch k := kv[i].(type) {
		case string:
			b = appendStr(b, k)
		case raw:
			b = append(b, k...)
		}
		b = appendVal(b, kv[i+1])
	}
	return b
}

func appendVal(b []byte, v any) []byte {
	if r, ok := v.(raw); ok {
		return append(b, r...)
	}
	enc, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(b, enc...)
}

func arr(vs ...any) raw {
	b := appendArrayHeader(nil, len(vs))
	for _, v := range vs {
		b = appendVal(b, v)
	}
	return b
}

// nested is n arrays inside each other around a nil.
func nested(n int) raw {
	b := bytes.Repeat([]byte{0x91}, n)
	return append(b, 0xc0)
}

var roundTrips = []struct {
	name string
	msg  Message
}{
	{"hello", &HelloMsg{V: 1, Token: "tok-123"}},
	{"hello empty token", &HelloMsg{V: 1, Token: ""}},
	{"welcome", &WelcomeMsg{V: 1, Servers: []string{"github", "fs"}}},
	{"welcome no servers", &WelcomeMsg{V: 1, Servers: []string{}}},
	{"call", &CallMsg{ID: 7, Cap: "mcp.github", Op: "create_issue", Args: m("title", "bug", "labels", []string{"a", "b"})}},
	{"call timeout big id", &CallMsg{ID: 1 << 40, Cap: "mcp.fs", Op: "read", Args: m(), TimeoutMS: 30000}},
	{"call traceparent", &CallMsg{ID: 2, Cap: "mcp.fs", Op: "read", Args: m(), Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
	{"call nested args", &CallMsg{ID: 0, Cap: "mcp.x", Op: "y", Args: m("deep", nested(bound.MaxDepth-1))}},
	{"cancel", &CancelMsg{ID: 99}},
	{"result", &ResultMsg{ID: 7, Result: Result{Content: []Block{{Type: "text", Kind: "text", Text: "hi"}, {Type: "other", Kind: "image"}}, Structured: m("n", 1)}}},
	{"result error truncated", &ResultMsg{ID: 8, Result: Result{IsError: true, Content: []Block{{Type: "text", Kind: "text", Text: strings.Repeat("é", 40000)}}, Truncated: true}}},
	{"result every kind", &ResultMsg{ID: 10, Result: Result{Content: []Block{
		{Type: "other", Kind: "image", MIME: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}, Size: 4},
		{Type: "other", Kind: "audio", MIME: "audio/wav", Size: 1 << 40},
		{Type: "other", Kind: "resource", URI: "file:///a.txt", MIME: "text/plain", Text: "contents"},
		{Type: "other", Kind: "resource", URI: "file:///a.bin", Data: make([]byte, 70000), Size: 70000},
		{Type: "other", Kind: "resource_link", URI: "test://static/1", Name: "one", MIME: "text/plain", Size: 10},
	}}}},
	{"result empty", &ResultMsg{ID: 9, Result: Result{Content: []Block{}}}},
	{"denied", &DeniedMsg{ID: 3, Denial: Denied{Code: CodeBadArguments, Message: "title: want string", Path: "/title"}}},
	{"denied server error", &DeniedMsg{ID: 4, Denial: Denied{Code: CodeServerError, Message: "boom", RPCCode: -32602}}},
	{"denied server error code 0", &DeniedMsg{ID: 5, Denial: Denied{Code: CodeServerError}}},
	{"denied quota rate", &DeniedMsg{ID: 6, Denial: Denied{Code: CodeQuotaExceeded, Message: "slow down", Quota: "github:rate", RetryMS: 250}}},
	{"denied quota total", &DeniedMsg{ID: 7, Denial: Denied{Code: CodeQuotaExceeded, Message: "spent", Quota: "calls"}}},
	{"denied no id", &DeniedMsg{NoID: true, Denial: Denied{Code: CodeBadRequest, Message: "no id"}}},
	{"fatal", &FatalMsg{Code: CodeBadToken, Message: "token not accepted"}},
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			payload, err := appendMessage(nil, tc.msg)
			if err != nil {
				t.Fatalf("appendMessage: %v", err)
			}
			got, err := Decode(payload)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.msg) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tc.msg)
			}
			// The same message through a whole frame.
			frame, err := AppendFrame([]byte("xx"), tc.msg, 0)
			if err != nil {
				t.Fatalf("AppendFrame: %v", err)
			}
			if string(frame[:2]) != "xx" || !bytes.Equal(frame[6:], payload) {
				t.Fatalf("AppendFrame did not append prefix+payload")
			}
			fr := NewFrameReader(bytes.NewReader(frame[2:]), 0)
			p, err := fr.ReadFrame(nil)
			if err != nil || !bytes.Equal(p, payload) {
				t.Fatalf("ReadFrame = %x, %v", p, err)
			}
		})
	}
}

func TestCodes(t *testing.T) {
	denials := []string{CodeBadRequest, CodeUnknownCapability, CodeNotGranted, CodeUnknownTool, CodeBadArguments,
		CodeServerUnavailable, CodeTimeout, CodeCancelled, CodeServerError, CodeResultMalformed, CodeResultTooLarge,
		CodeOverloaded, CodeRevoked, CodeShuttingDown, CodeSurfaceChanged, CodeInputRequired, CodeQuotaExceeded}
	fatals := []string{CodeBadFrame, CodeFrameTooLarge, CodeBadHello, CodeBadToken, CodeUnsupportedVersion}
	if len(codes) != len(denials)+len(fatals) {
		t.Fatalf("code table has %d entries, want %d", len(codes), len(denials)+len(fatals))
	}
	for _, c := range denials {
		if !isDenialCode(c) || IsFatalCode(c) {
			t.Errorf("%s: isDenialCode %v IsFatalCode %v", c, isDenialCode(c), IsFatalCode(c))
		}
	}
	for _, c := range fatals {
		if isDenialCode(c) || !IsFatalCode(c) || Retryable(c) {
			t.Errorf("%s misclassified", c)
		}
	}
	retry := map[string]bool{CodeServerUnavailable: true, CodeTimeout: true, CodeOverloaded: true}
	for _, c := range denials {
		if Retryable(c) != retry[c] {
			t.Errorf("Retryable(%s) = %v", c, Retryable(c))
		}
	}
	if Retryable("made_up") || isDenialCode("made_up") || IsFatalCode("made_up") {
		t.Error("an unknown code is classified")
	}
	d := &Denied{Code: CodeTimeout}
	if !errors.Is(d, ErrTimeout) || errors.Is(d, ErrOverloaded) || !errors.Is(d, &Denied{Code: CodeTimeout}) {
		t.Error("Denied.Is does not compare codes")
	}
	f := &FatalMsg{Code: CodeBadToken}
	if !errors.Is(f, ErrBadToken) || errors.Is(f, ErrBadHello) {
		t.Error("FatalMsg.Is does not compare codes")
	}
}
