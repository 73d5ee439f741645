package mcpproto

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/internal/bound"
)

// linesReader serves the same input again and again in reads of at most
// 64 KiB, like a pipe.
type linesReader struct {
	data []byte
	off  int
}

func (r *linesReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		r.off = 0
	}
	n := copy(p[:min(len(p), 64<<10)], r.data[r.off:])
	r.off += n
	return n, nil
}

// BenchmarkFramer compares the framer (fed by 64 KiB reads) with
// bufio.Reader.ReadBytes, the usual Go way to read NDJSON, on the same
// input in the same run.
func BenchmarkFramer(b *testing.B) {
	for _, size := range []int{100, 16<<20 - 1} {
		line := append(bytes.Repeat([]byte("x"), size), '\n')
		b.Run(fmt.Sprintf("%dB/framer", size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			r := &linesReader{data: line}
			f := NewFramer(bound.MaxMessage)
			buf := make([]byte, 64<<10)
			for b.Loop() {
				for got := false; !got; {
					n, _ := r.Read(buf)
					f.Push(buf[:n])
					for {
						l, err := f.Next()
						if err != nil {
							b.Fatal(err)
						}
						if l == nil {
							break
						}
						got = true
					}
				}
			}
		})
		b.Run(fmt.Sprintf("%dB/bufio", size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			br := bufio.NewReaderSize(&linesReader{data: line}, 64<<10)
			for b.Loop() {
				if _, err := br.ReadBytes('\n'); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClassify compares our one-pass envelope decoder with gjson
// (validate, then read the members) on responses of 64 B and 16 KiB of
// text.
func BenchmarkClassify(b *testing.B) {
	for _, n := range []int{64, 16 << 10} {
		line := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", n) + `"}]}}`)
		b.Run(fmt.Sprintf("%dB/scanner", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			var m Message
			for b.Loop() {
				if err := DecodeMessage(line, &m); err != nil || m.Kind != KindResponse {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%dB/gjson", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if !gjson.ValidBytes(line) {
					b.Fatal("invalid")
				}
				r := gjson.GetManyBytes(line, "jsonrpc", "id", "method", "result", "error")
				if r[0].Str != "2.0" || r[1].Type != gjson.Number || r[2].Exists() || !r[3].Exists() {
					b.Fatal("misclassified")
				}
			}
		})
	}
}

// BenchmarkResultLine measures the client's decoding of one tools/call
// result line with one text block of 64 B, 1 KiB and 16 KiB, as mcpwire
// runs it: the envelope, the copy of the result out of the read buffer,
// and the result itself.
func BenchmarkResultLine(b *testing.B) {
	for _, n := range []int{64, 1 << 10, 16 << 10} {
		line := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", n) + `"}]}}`)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			var m Message
			for b.Loop() {
				if err := DecodeMessage(line, &m); err != nil {
					b.Fatal(err)
				}
				r, err := decodeResultLine(&m)
				if err != nil || len(r.Content) != 1 || len(r.Content[0].Text) != n {
					b.Fatal(err)
				}
			}
		})
	}
}

// decodeResultLine is the client's path from a decoded envelope to the
// tools/call result.
func decodeResultLine(m *Message) (*CallToolResult, error) {
	return DecodeCallToolResultValue(m.Result.Own())
}
