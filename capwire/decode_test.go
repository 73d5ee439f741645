package capwire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/bound"
)

func TestDecodeTolerates(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want Message
	}{
		{"unknown fields of any type", m("zz", raw{0xc7, 2, 5, 1, 2}, "t", "cancel", "bin", []byte{1, 2}, "f", 1.5, "id", 3, "x", m("y", arr(1, 2))), &CancelMsg{ID: 3}},
		{"id as int8 holding a non-negative value", m("t", "cancel", "id", raw{0xd0, 0x05}), &CancelMsg{ID: 5}},
		{"timeout nil means none", m("t", "call", "id", 1, "cap", "mcp.a", "op", "b", "args", m(), "timeout_ms", nil), &CallMsg{ID: 1, Cap: "mcp.a", Op: "b", Args: m()}},
		{"invalid UTF-8 inside args is the converter's business", m("t", "call", "id", 1, "cap", "mcp.a", "op", "b", "args", m("k", raw{0xa2, 0xff, 0xfe})), &CallMsg{ID: 1, Cap: "mcp.a", Op: "b", Args: m("k", raw{0xa2, 0xff, 0xfe})}},
		{"args exactly bound.MaxDepth deep", m("t", "call", "id", 1, "cap", "mcp.a", "op", "b", "args", m("k", nested(bound.MaxDepth-1))), &CallMsg{ID: 1, Cap: "mcp.a", Op: "b", Args: m("k", nested(bound.MaxDepth-1))}},
		{"unknown block type kept", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "video", "src", "x"))), &ResultMsg{ID: 1, Result: Result{Content: []Block{{Type: "video"}}}}},
		{"denied with unknown code and nil optionals", m("t", "denied", "id", 2, "code", "new_code", "message", nil, "path", nil, "rpc_code", nil), &DeniedMsg{ID: 2, Denial: Denied{Code: "new_code"}}},
		{"negative rpc code", m("t", "denied", "id", 2, "code", "server_error", "rpc_code", raw{0xd1, 0x80, 0xfe}), &DeniedMsg{ID: 2, Denial: Denied{Code: "server_error", RPCCode: -32514}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.in)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// hostile frames: every one must give a *WireError with the right code,
// fatality, path and (for calls) the recovered id, and never panic.
var hostile = []struct {
	name  string
	in    []byte
	code  string
	fatal bool
	path  string
	id    int64 // -1: no id recoverable
}{
	{"empty payload", nil, CodeBadFrame, true, "", -1},
	{"not a map: array", arr(1, 2), CodeBadFrame, true, "", -1},
	{"not a map: string", appendStr(nil, "call"), CodeBadFrame, true, "", -1},
	{"not a map: int", []byte{0x05}, CodeBadFrame, true, "", -1},
	{"never-used byte", []byte{0xc1}, CodeBadFrame, true, "", -1},
	{"never-used byte as a value", m("t", "cancel", "id", raw{0xc1}), CodeBadFrame, true, "", -1},
	{"truncated map", m("t", "cancel", "id", 1)[:5], CodeBadFrame, true, "", -1},
	{"truncated string", []byte{0x81, 0xa1, 't', 0xdb, 0xff, 0xff, 0xff, 0xff, 'c'}, CodeBadFrame, true, "", -1},
	{"trailing bytes", append(m("t", "cancel", "id", 1), 0xc0), CodeBadFrame, true, "", -1},
	{"two maps", append(m("t", "cancel", "id", 1), m("t", "cancel", "id", 2)...), CodeBadFrame, true, "", -1},
	{"map32 claiming 2^32-1 pairs", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 't'}, CodeBadFrame, true, "", -1},
	{"huge array in args", m("t", "call", "id", 1, "cap", "mcp.a", "op", "b", "args", m("a", raw{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01})), CodeBadFrame, true, "", -1},
	{"huge map in unknown field", m("t", "call", "id", 1, "x", raw{0xdf, 0xff, 0xff, 0xff, 0xff}), CodeBadFrame, true, "", -1},
	{"10^6 nesting, unterminated", append(m("t", "call", "id", 1, "args", raw{0x81, 0xa1, 'k'}), bytes.Repeat([]byte{0x91}, 1_000_000)...), CodeBadFrame, true, "", -1},
	{"10^6 nesting in args, id after it", m("t", "call", "cap", "mcp.a", "op", "b", "args", m("k", nested(1_000_000)), "id", 42), CodeBadRequest, false, "/args", 42},
	{"args one level too deep", m("t", "call", "id", 6, "cap", "mcp.a", "op", "b", "args", m("k", nested(bound.MaxDepth))), CodeBadRequest, false, "/args", 6},
	{"missing t", m("id", 1), CodeBadRequest, false, "", 1},
	{"t not a string", m("t", 1, "id", 2), CodeBadRequest, false, "/t", 2},
	{"t invalid UTF-8", m("t", raw{0xa2, 0xc3, 0x28}, "id", 2), CodeBadRequest, false, "/t", 2},
	{"unknown t", m("t", "frobnicate", "id", 7), CodeBadRequest, false, "/t", 7},
	{"call missing op", m("t", "call", "id", 5, "cap", "mcp.a", "args", m()), CodeBadRequest, false, "", 5},
	{"call op wrong type, id last", m("t", "call", "cap", "mcp.a", "op", 12, "args", m(), "id", 9), CodeBadRequest, false, "/op", 9},
	{"call op empty", m("t", "call", "id", 9, "cap", "mcp.a", "op", "", "args", m()), CodeBadRequest, false, "/op", 9},
	{"call op invalid UTF-8", m("t", "call", "id", 9, "cap", "mcp.a", "op", raw{0xa1, 0xff}, "args", m()), CodeBadRequest, false, "/op", 9},
	{"call cap wrong type", m("t", "call", "id", 9, "cap", true, "op", "x", "args", m()), CodeBadRequest, false, "/cap", 9},
	{"call args array", m("t", "call", "id", 10, "cap", "mcp.a", "op", "b", "args", arr(1)), CodeBadRequest, false, "/args", 10},
	{"call args nil", m("t", "call", "id", 10, "cap", "mcp.a", "op", "b", "args", nil), CodeBadRequest, false, "/args", 10},
	{"call args missing", m("t", "call", "id", 10, "cap", "mcp.a", "op", "b"), CodeBadRequest, false, "", 10},
	{"call id negative", m("t", "call", "id", -1, "cap", "mcp.a", "op", "b", "args", m()), CodeBadRequest, false, "/id", -1},
	{"call id float", m("t", "call", "id", 1.0, "cap", "mcp.a", "op", "b", "args", m()), CodeBadRequest, false, "/id", -1},
	{"call id string", m("t", "call", "id", "1", "cap", "mcp.a", "op", "b", "args", m()), CodeBadRequest, false, "/id", -1},
	{"call timeout string", m("t", "call", "id", 11, "cap", "mcp.a", "op", "b", "args", m(), "timeout_ms", "5"), CodeBadRequest, false, "/timeout_ms", 11},
	{"duplicate id", m("t", "call", "id", 12, "id", 13, "cap", "mcp.a", "op", "b", "args", m()), CodeBadRequest, false, "/id", 13},
	{"duplicate t", m("t", "call", "t", "cancel", "id", 12), CodeBadRequest, false, "/t", 12},
	{"non-string key", m(raw{0x01}, "x", "t", "cancel", "id", 14), CodeBadRequest, false, "", 14},
	{"container key", m(raw(m("a", 1)), "x", "t", "cancel", "id", 14), CodeBadRequest, false, "", 14},
	{"cancel without id", m("t", "cancel"), CodeBadRequest, false, "", -1},
	{"hello v string", m("t", "hello", "v", "1", "token", "x"), CodeBadHello, true, "/v", -1},
	{"hello token missing", m("t", "hello", "v", 1), CodeBadHello, true, "", -1},
	{"hello token invalid UTF-8", m("t", "hello", "v", 1, "token", raw{0xa3, 'a', 0xff, 'b'}), CodeBadHello, true, "/token", -1},
	{"hello too deep", m("t", "hello", "v", 1, "token", "x", "x", nested(200)), CodeBadHello, true, "/x", -1},
	{"welcome server not a string", m("t", "welcome", "v", 1, "servers", arr("a", 2)), CodeBadRequest, false, "/servers/1", -1},
	{"welcome servers missing", m("t", "welcome", "v", 1), CodeBadRequest, false, "", -1},
	{"result content not an array", m("t", "result", "id", 1, "is_error", false, "content", "x"), CodeBadRequest, false, "/content", 1},
	{"result block without type", m("t", "result", "id", 1, "is_error", false, "content", arr(m("text", "x"))), CodeBadRequest, false, "/content/0", 1},
	{"result text block without text", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "text"))), CodeBadRequest, false, "/content/0", 1},
	{"result other block without kind", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "other"))), CodeBadRequest, false, "/content/0", 1},
	{"result text invalid UTF-8", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "text", "text", "ok"), m("type", "text", "text", raw{0xa1, 0x80}))), CodeBadRequest, false, "/content/1/text", 1},
	{"result block not a map", m("t", "result", "id", 1, "is_error", false, "content", arr("text")), CodeBadRequest, false, "/content/0", 1},
	{"result block duplicate text", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "text", "text", "a", "text", "b"))), CodeBadRequest, false, "/content/0/text", 1},
	{"result block data a string", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "other", "kind", "image", "data", "iVBOR"))), CodeBadRequest, false, "/content/0/data", 1},
	{"result block size negative", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "other", "kind", "image", "size", -1))), CodeBadRequest, false, "/content/0/size", 1},
	{"result block duplicate uri", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "other", "kind", "resource", "uri", "a", "uri", "b"))), CodeBadRequest, false, "/content/0/uri", 1},
	{"result block mime invalid UTF-8", m("t", "result", "id", 1, "is_error", false, "content", arr(m("type", "other", "kind", "image", "mime", raw{0xa1, 0x80}))), CodeBadRequest, false, "/content/0/mime", 1},
	{"result is_error not bool", m("t", "result", "id", 1, "is_error", 0, "content", arr()), CodeBadRequest, false, "/is_error", 1},
	{"result structured too deep", m("t", "result", "id", 1, "is_error", false, "content", arr(), "structured", nested(bound.MaxDepth+1)), CodeBadRequest, false, "/structured", 1},
	{"denied code empty", m("t", "denied", "id", 1, "code", ""), CodeBadRequest, false, "/code", 1},
	{"denied rpc_code float", m("t", "denied", "id", 1, "code", "server_error", "rpc_code", 1.5), CodeBadRequest, false, "/rpc_code", 1},
	{"fatal without code", m("t", "fatal", "message", "x"), CodeBadRequest, false, "", -1},
}

func TestDecodeHostile(t *testing.T) {
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode succeeded: %#v", msg)
			}
			var we *WireError
			if !errors.As(err, &we) {
				t.Fatalf("error %T %v is not a *WireError", err, err)
			}
			if we.Code != tc.code || we.Fatal != tc.fatal || we.Path != tc.path {
				t.Fatalf("got code %q fatal %v path %q, want %q %v %q (%v)", we.Code, we.Fatal, we.Path, tc.code, tc.fatal, tc.path, we)
			}
			if tc.id >= 0 != we.HasID || (we.HasID && we.ID != uint64(tc.id)) {
				t.Fatalf("got id %d (has %v), want %d (%v)", we.ID, we.HasID, tc.id, we)
			}
			if !errors.Is(err, sentinel(tc.code)) || !strings.HasPrefix(err.Error(), "capwire: ") {
				t.Fatalf("errors.Is by code or message prefix broken: %v", err)
			}
			if !we.Fatal {
				d := we.Denial()
				if _, err := appendMessage(nil, d); err != nil {
					t.Fatalf("the denial for a non-fatal fault does not encode: %v", err)
				}
				if d.NoID == we.HasID || d.ID != we.ID {
					t.Fatalf("denial %+v does not name the call of %v", d, we)
				}
			}
		})
	}
}

// TestDecodeResultAllocs holds Decode of the result most tools answer,
// one text block, to two allocations: the message with its block, and
// the text (a string the caller keeps). Results of several blocks decode
// as before, into a slice of their own.
func TestDecodeResultAllocs(t *testing.T) {
	one := m("t", "result", "id", 7, "is_error", false, "content", arr(m("type", "text", "text", "hello")))
	allocs := testing.AllocsPerRun(100, func() {
		got, err := Decode(one)
		if err != nil || got.(*ResultMsg).Result.Content[0].Text != "hello" {
			t.Fatal(got, err)
		}
	})
	if allocs > 2 {
		t.Errorf("Decode of a one-block result: %v allocations, want at most 2", allocs)
	}
	two := m("t", "result", "id", 7, "is_error", false, "content", arr(m("type", "text", "text", "a"), m("type", "other", "kind", "image", "size", 3)))
	got, err := Decode(two)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{{Type: BlockText, Kind: KindText, Text: "a"}, {Type: BlockOther, Kind: "image", Size: 3}}
	if c := got.(*ResultMsg).Result.Content; !reflect.DeepEqual(c, want) {
		t.Errorf("two blocks: got %+v, want %+v", c, want)
	}
	none, err := Decode(m("t", "result", "id", 7, "is_error", false, "content", arr()))
	if err != nil {
		t.Fatal(err)
	}
	if c := none.(*ResultMsg).Result.Content; c == nil || len(c) != 0 {
		t.Errorf("no blocks: got %#v, want an empty, non-nil slice", c)
	}
}

// TestDecodeIntoAllocs: a call decoded into a CallMsg the caller holds
// allocates only its capability and operation names; Decode allocates
// the message as well. A frame that is not a valid call leaves the
// caller's CallMsg as it was.
func TestDecodeIntoAllocs(t *testing.T) {
	frame := m("t", "call", "id", 9, "cap", "mcp.fs", "op", "read", "args", m("path", "/x"))
	var into CallMsg
	allocs := testing.AllocsPerRun(100, func() {
		got, err := DecodeInto(frame, &into)
		if err != nil || got != Message(&into) || into.Op != "read" {
			t.Fatal(got, err)
		}
	})
	if allocs > 2 {
		t.Errorf("DecodeInto of a call: %v allocations, want at most 2", allocs)
	}
	if got, err := Decode(frame); err != nil || got.(*CallMsg) == &into || got.(*CallMsg).Cap != "mcp.fs" {
		t.Errorf("Decode: %+v, %v", got, err)
	}
	kept := into
	for _, f := range [][]byte{
		m("t", "call", "id", 10, "cap", "mcp.fs", "op", "", "args", m()),
		m("t", "cancel", "id", 10),
	} {
		if got, err := DecodeInto(f, &into); err == nil && got == Message(&into) {
			t.Errorf("%x decoded into the caller's CallMsg", f)
		}
		if !reflect.DeepEqual(into, kept) {
			t.Errorf("%x changed the caller's CallMsg to %+v", f, into)
		}
	}
}
