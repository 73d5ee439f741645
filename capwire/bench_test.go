package capwire

import (
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/framewrite"
)

// Baseline: the same envelopes through msgpack's reflection-based
// Marshal/Unmarshal of equivalent structs, measured in the same run so the
// report is a ratio.

type baseCall struct {
	T         string             `msgpack:"t"`
	ID        uint64             `msgpack:"id"`
	Cap       string             `msgpack:"cap"`
	Op        string             `msgpack:"op"`
	TimeoutMS uint64             `msgpack:"timeout_ms,omitempty"`
	Args      msgpack.RawMessage `msgpack:"args"`
}

type baseBlock struct {
	Type string `msgpack:"type"`
	Text string `msgpack:"text,omitempty"`
	Kind string `msgpack:"kind,omitempty"`
}

type baseResult struct {
	T          string             `msgpack:"t"`
	ID         uint64             `msgpack:"id"`
	IsError    bool               `msgpack:"is_error"`
	Content    []baseBlock        `msgpack:"content"`
	Structured msgpack.RawMessage `msgpack:"structured"`
	Truncated  bool               `msgpack:"truncated"`
}

const mib = 1 << 20

func benchCall(size int) *CallMsg {
	args := m("title", "Crash on start", "labels", arr("bug"))
	if size > 0 {
		args = m("data", strings.Repeat("x", size))
	}
	return &CallMsg{ID: 12345, Cap: "mcp.github", Op: "create_issue", TimeoutMS: 30000, Args: args}
}

func benchResult(size int) *ResultMsg {
	text := "Created issue #42"
	if size > 0 {
		text = strings.Repeat("y", size)
	}
	return &ResultMsg{ID: 12345, Result: Result{
		Content:    []Block{{Type: BlockText, Kind: KindText, Text: text}, {Type: BlockOther, Kind: "image"}},
		Structured: m("number", 42, "url", "https://example.invalid/issues/42"),
	}}
}

func BenchmarkCall(b *testing.B) {
	for _, sz := range []struct {
		name string
		n    int
	}{{"small", 0}, {"1MiB", mib}} {
		msg := benchCall(sz.n)
		b.Run(sz.name+"/capwire", func(b *testing.B) {
			b.ReportAllocs()
			buf := framewrite.GetBuf()
			defer framewrite.PutBuf(buf)
			for b.Loop() {
				out, err := AppendFrame((*buf)[:0], msg, 0)
				if err != nil {
					b.Fatal(err)
				}
				*buf = out
				got, err := Decode(out[4:])
				if err != nil || got.(*CallMsg).ID != msg.ID {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(out)))
			}
		})
		b.Run(sz.name+"/msgpack-reflect", func(b *testing.B) {
			b.ReportAllocs()
			in := baseCall{T: "call", ID: msg.ID, Cap: msg.Cap, Op: msg.Op, TimeoutMS: msg.TimeoutMS, Args: msg.Args}
			for b.Loop() {
				out, err := msgpack.Marshal(&in)
				if err != nil {
					b.Fatal(err)
				}
				var got baseCall
				if err := msgpack.Unmarshal(out, &got); err != nil || got.ID != msg.ID {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(out) + 4))
			}
		})
	}
}

func BenchmarkResult(b *testing.B) {
	for _, sz := range []struct {
		name string
		n    int
	}{{"small", 0}, {"1MiB", mib}} {
		msg := benchResult(sz.n)
		b.Run(sz.name+"/capwire", func(b *testing.B) {
			b.ReportAllocs()
			buf := framewrite.GetBuf()
			defer framewrite.PutBuf(buf)
			for b.Loop() {
				out, err := AppendFrame((*buf)[:0], msg, 0)
				if err != nil {
					b.Fatal(err)
				}
				*buf = out
				got, err := Decode(out[4:])
				if err != nil || len(got.(*ResultMsg).Result.Content) != 2 {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(out)))
			}
		})
		b.Run(sz.name+"/msgpack-reflect", func(b *testing.B) {
			b.ReportAllocs()
			in := baseResult{T: "result", ID: msg.ID, Structured: msg.Result.Structured}
			for _, blk := range msg.Result.Content {
				in.Content = append(in.Content, baseBlock{Type: blk.Type, Text: blk.Text, Kind: blk.Kind})
			}
			for b.Loop() {
				out, err := msgpack.Marshal(&in)
				if err != nil {
					b.Fatal(err)
				}
				var got baseResult
				if err := msgpack.Unmarshal(out, &got); err != nil || len(got.Content) != 2 {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(out) + 4))
			}
		})
	}
}

// BenchmarkDecodeCall is the bridge's inbound hot path alone: one call
// frame decoded, args left raw.
func BenchmarkDecodeCall(b *testing.B) {
	payload, _ := appendMessage(nil, benchCall(0))
	b.Run("capwire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("msgpack-reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got baseCall
			if err := msgpack.Unmarshal(payload, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
