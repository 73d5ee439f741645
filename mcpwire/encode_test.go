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
			got, err := appendCallTool(nil, 9, "echo", []byte(tt.args), nil)
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
	if _, err := appendCallTool(nil, 1, "", nil, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty name: %v", err)
	}
}

// FuzzCompact: the line built around any accepted arguments is one line
// of valid JSON whose arguments equal the input semantically.
func FuzzCompact(f *testing.F) {
	f.Add([]byte("{\n \"text\" : \"a b\",\r\n\t\"n\": [1, 2]\n}"))
	f.Add([]byte(`{"a":{"b":[true,false,null,"\n"]}}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		line, err := appendCallTool(nil, 1, "t", args, nil)
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
