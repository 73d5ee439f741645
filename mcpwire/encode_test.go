package mcpwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestEncodeLines(t *testing.T) {
	for _, tt := range []struct {
		name string
		args string
		want string
		bad  bool
	}{
		{name: "compact args", args: `{"text":"hi"}`, want: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"progressToken":9},"name":"echo","arguments":{"text":"hi"}}}` + "\n"},
		{name: "args with newlines are compacted", args: "{\n \"text\" : \"a b\",\r\n\t\"n\": [1, 2]\n}", want: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"progressToken":9},"name":"echo","arguments":{"text":"a b","n":[1,2]}}}` + "\n"},
		{name: "no args", args: ``, want: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"progressToken":9},"name":"echo"}}` + "\n"},
		{name: "null args", args: `null`, want: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"progressToken":9},"name":"echo"}}` + "\n"},
		{name: "array args", args: `[1]`, bad: true},
		{name: "invalid args", args: `{"a":}`, bad: true},
		{name: "two values", args: `{} {}`, bad: true},
		{name: "invalid utf8 args", args: "{\"a\":\"\xff\"}", bad: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendCallTool(nil, 9, "echo", JSONArgs([]byte(tt.args)), nil, nil, "")
			if tt.bad {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tt.want)
			}
		})
	}
	if _, err := appendCallTool(nil, 1, "", JSONArgs(nil), nil, nil, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty name: %v", err)
	}
}

// A call's traceparent rides in _meta beside the progress token
// (SEP-414); anything without a traceparent's shape, which could break
// out of its JSON string, is refused before a byte is written.
func TestEncodeTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got, err := appendCallTool(nil, 3, "echo", JSONArgs(nil), nil, nil, tp)
	want := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":3,"traceparent":"` + tp + `"},"name":"echo"}}` + "\n"
	if err != nil || string(got) != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	for _, bad := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
		`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"-1`,
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		if out, err := appendCallTool(nil, 1, "t", JSONArgs(nil), nil, nil, bad); !errors.Is(err, ErrInvalidArgument) || len(out) != 0 {
			t.Errorf("traceparent %q: %q, %v; want ErrInvalidArgument and nothing written", bad, out, err)
		}
	}
}

// FuzzCompact: the line built around any accepted arguments is one line
// of valid JSON whose arguments equal the input semantically.
func FuzzCompact(f *testing.F) {
	f.Add([]byte("{\n \"text\" : \"a b\",\r\n\t\"n\": [1, 2]\n}"))
	f.Add([]byte(`{"a":{"b":[true,false,null,"\n"]}}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		line, err := appendCallTool(nil, 1, "t", JSONArgs(args), nil, nil, "")
		if err != nil {
			return
		}
		body := line[:len(line)-1]
		if strings.ContainsAny(string(body), "\n\r") || line[len(line)-1] != '\n' {
			t.Fatalf("line not single: %q", line)
		}
		var got struct {
			Params struct {
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("line is not JSON: %v: %q", err, line)
		}
		var a, b any
		if len(got.Params.Arguments) == 0 {
			return
		}
		if json.Unmarshal(args, &a) != nil || json.Unmarshal(got.Params.Arguments, &b) != nil {
			t.Fatalf("unmarshal failed")
		}
		if aj, _ := json.Marshal(a); string(aj) != string(mustMarshal(b)) {
			t.Fatalf("arguments changed: %s vs %s", aj, mustMarshal(b))
		}
	})
}

func mustMarshal(v any) []byte { b, _ := json.Marshal(v); return b }

// FuzzConvertArgs: the contract that lets converted arguments go out
// unchecked. Whatever MessagePack ConvertArgs accepts, the raw-JSON path
// (which checks everything) accepts too and builds the same line, so
// skipping the check skips nothing.
func FuzzConvertArgs(f *testing.F) {
	f.Add([]byte{0x80})
	f.Add([]byte{0x81, 0xa1, 'a', 0x92, 0xc3, 0xa2, '\n', 0xe2})
	f.Add([]byte{0x81, 0xa1, 'k', 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x81, 0xa2, 0xc3, 0xa9, 0xa3, 0xe2, 0x82, 0xac})
	f.Add([]byte{0x91, 0x01})
	f.Fuzz(func(t *testing.T, mp []byte) {
		a, err := ConvertArgs([]byte("prefix"), mp)
		if err != nil {
			return
		}
		if !a.converted || len(a.JSON()) == 0 || a.JSON()[0] != '{' {
			t.Fatalf("converted args %q", a.JSON())
		}
		got, err := appendCallTool(nil, 1, "t", a, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		want, err := appendCallTool(nil, 1, "t", JSONArgs(a.JSON()), nil, nil, "")
		if err != nil || string(got) != string(want) {
			t.Fatalf("unchecked line %q; checked %q, %v", got, want, err)
		}
	})
}
