package capwire

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/bound"
)

// A decoder written by someone else (msgpack's reflection decoder) must
// read what we encode as the same map: the encoder writes plain MessagePack.
func TestEncodingIsPlainMessagePack(t *testing.T) {
	payload, err := appendMessage(nil, &CallMsg{ID: 300, Cap: "mcp.gh", Op: "op", Args: m("a", 1), TimeoutMS: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := msgpack.Unmarshal(payload, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"t": "call", "id": uint16(300), "cap": "mcp.gh", "op": "op", "args": map[string]any{"a": int8(1)}, "timeout_ms": int8(5)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		want string
	}{
		{"args not a map", &CallMsg{ID: 1, Cap: "mcp.a", Op: "b", Args: arr(1)}, "not a map"},
		{"args empty", &CallMsg{ID: 1, Cap: "mcp.a", Op: "b"}, "args"},
		{"args trailing", &CallMsg{ID: 1, Cap: "mcp.a", Op: "b", Args: append(m(), 1)}, "bytes after"},
		{"args too deep", &CallMsg{ID: 1, Cap: "mcp.a", Op: "b", Args: m("k", nested(bound.MaxDepth))}, "deeper"},
		{"empty op", &CallMsg{ID: 1, Cap: "mcp.a", Args: m()}, "empty"},
		{"op invalid UTF-8", &CallMsg{ID: 1, Cap: "mcp.a", Op: "\xff", Args: m()}, "UTF-8"},
		{"token invalid UTF-8", &HelloMsg{V: 1, Token: "\xff"}, "UTF-8"},
		{"server invalid UTF-8", &WelcomeMsg{V: 1, Servers: []string{"\xff"}}, "UTF-8"},
		{"text invalid UTF-8", &ResultMsg{Result: Result{Content: []Block{{Type: "text", Text: "\xff"}}}}, "UTF-8"},
		{"unknown block type", &ResultMsg{Result: Result{Content: []Block{{Type: "image"}}}}, "block 0"},
		{"other without kind", &ResultMsg{Result: Result{Content: []Block{{Type: "other"}}}}, "block 0"},
		{"structured malformed", &ResultMsg{Result: Result{Content: []Block{}, Structured: []byte{0x92, 1}}}, "structured"},
		{"denial with a fatal code", &DeniedMsg{ID: 1, Denial: Denied{Code: CodeBadToken}}, "not a denial code"},
		{"denial with an unknown code", &DeniedMsg{ID: 1, Denial: Denied{Code: "nope"}}, "not a denial code"},
		{"fatal with a denial code", &FatalMsg{Code: CodeTimeout}, "not a fatal code"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendFrame([]byte("keep"), tc.msg, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "capwire: ") {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed on error: %q", out)
			}
		})
	}
}

func TestAppendFrameLimit(t *testing.T) {
	msg := &ResultMsg{ID: 1, Result: Result{Content: []Block{{Type: "text", Text: strings.Repeat("x", 100)}}}}
	payload, _ := appendMessage(nil, msg)
	if _, err := AppendFrame(nil, msg, len(payload)); err != nil {
		t.Fatalf("payload exactly at the limit refused: %v", err)
	}
	out, err := AppendFrame([]byte("k"), msg, len(payload)-1)
	if !errors.Is(err, ErrFrameTooLarge) || string(out) != "k" {
		t.Fatalf("one byte over: out %q err %v", out, err)
	}
}

// appendMessage is what the tests use to get a message's payload without
// a length prefix.
func appendMessage(dst []byte, m Message) ([]byte, error) { return m.appendBody(dst) }
