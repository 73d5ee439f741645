package mcpproto

import (
	"strings"
	"testing"
)

var peekTests = []struct {
	name, line string
	id         int64
	ok         bool
}{
	{"valid response", `{"jsonrpc":"2.0","id":5,"result":{}}`, 5, true},
	{"id after result", `{"result":{"a":[1,{"b":"}]"}]},"jsonrpc":"2.0","id":12}`, 12, true},
	{"NaN in result", `{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"x":NaN}}}`, 3, true},
	{"NaN before id", `{"jsonrpc":"2.0","result":{"x":[NaN,-Infinity]},"id":4}`, 4, true},
	{"top-level NaN before id", `{"result":NaN, "id" : 4 }`, 4, true},
	{"late syntax error", `{"jsonrpc":"2.0","id":6,"result":{"content":[}`, 6, true},
	{"too deep", `{"jsonrpc":"2.0","id":8,"result":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, 8, true},
	{"deep before id", `{"result":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `,"id":9}`, 9, true},
	{"bad utf8", "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"t\":\"\xff\xfe\"}}", 2, true},
	{"escaped quote in string", `{"result":"a\"b,\"id\":1","id":2}`, 2, true},
	{"error response", `{"jsonrpc":"2.0","id":7,"error":{"code":NaN}}`, 7, true},
	{"cut prefix", `{"jsonrpc":"2.0","id":10,"result":{"content":[{"type":"text","text":"xxxx`, 10, true},
	{"cut before result", `{"jsonrpc":"2.0","id":10,"res`, 0, false},
	{"request", `{"jsonrpc":"2.0","id":3,"method":"x","params":NaN}`, 0, false},
	{"method after result", `{"result":NaN,"method":"x","id":3}`, 0, false},
	{"no result", `{"jsonrpc":"2.0","id":3}`, 0, false},
	{"string id", `{"jsonrpc":"2.0","id":"3","result":NaN}`, 0, false},
	{"negative id", `{"jsonrpc":"2.0","id":-3,"result":NaN}`, 0, false},
	{"fractional id", `{"jsonrpc":"2.0","id":3.5,"result":NaN}`, 0, false},
	{"two ids", `{"id":3,"id":4,"result":NaN}`, 0, false},
	{"id in nested object", `{"result":{"id":3},"x":NaN`, 0, false},
	{"not an object", `[{"id":3,"result":1}]`, 0, false},
	{"junk", `mcptest noise line 1: this is not JSON`, 0, false},
	{"empty", ``, 0, false},
	{"trailing backslash", `{"result":"\`, 0, false},
}

func TestPeekResponseID(t *testing.T) {
	for _, tt := range peekTests {
		id, ok := PeekResponseID([]byte(tt.line))
		if id != tt.id || ok != tt.ok {
			t.Errorf("%s: PeekResponseID = %d, %v; want %d, %v", tt.name, id, ok, tt.id, tt.ok)
		}
	}
}

// FuzzPeekResponseID: the peek is total, and on a line that decodes as a
// response with a small non-negative integer id and plain member names
// it reads that id.
func FuzzPeekResponseID(f *testing.F) {
	for _, tt := range peekTests {
		f.Add([]byte(tt.line))
	}
	for _, tt := range envelopeTests {
		f.Add([]byte(tt.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		id, ok := PeekResponseID(line)
		var m Message
		if DecodeMessage(line, &m) != nil || m.Kind != KindResponse || !m.ID.IsInt || m.ID.Int < 0 {
			return
		}
		if strings.Contains(string(line), `\`) || len(m.ID.Raw) > 18 || m.ID.Raw[0] == '-' {
			return // escaped member names, or an id beyond the peek's plain integers
		}
		if !ok || id != m.ID.Int {
			t.Fatalf("%q: peek %d, %v; decoded id %d", line, id, ok, m.ID.Int)
		}
	})
}
