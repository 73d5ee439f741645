package interchange

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// benchDoc is one benchmark document in both encodings.
type benchDoc struct {
	name    string
	json    []byte
	msgpack []byte
}

// smallJSON is a typical tool argument (about 200 bytes).
const smallJSON = `{"owner":"capbridge","repo":"capbridge","title":"Conversion fails on nested arrays",` +
	`"body":"Steps:\n1. call the tool\n2. observe \"fault\"","labels":["bug","p1"],"assignees":[],` +
	`"draft":false,"milestone":3,"weight":0.5}`

// mediumJSON builds a nested document of about 20 KB: objects of arrays
// of objects, seven containers deep, with every scalar kind.
func mediumJSON() string {
	var b strings.Builder
	var node func(depth, i int)
	node = func(depth, i int) {
		fmt.Fprintf(&b, `{"id":%d,"name":"node-%d-%d","ratio":%g,"ok":%t,"note":null,"path":"a/b\tc\u00e9","tags":["alpha","beta"]`,
			i*7919-3000, depth, i, float64(i)/7, i%2 == 0)
		if depth < 3 {
			b.WriteString(`,"children":[`)
			for j := range 5 {
				if j > 0 {
					b.WriteByte(',')
				}
				node(depth+1, i*4+j)
			}
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	node(0, 1)
	return b.String()
}

// largeJSON builds about 2 MB: an array of flat-ish records.
func largeJSON() string {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < 2<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"sku":"SKU-%08d","title":"Item number %d, colour grey","price":%d.%02d,`+
			`"stock":%d,"active":%t,"tags":["t%d","t%d","t%d"],"dims":{"w":%d,"h":%d,"d":%d}}`,
			i, i*31, i, i%500, i%100, i%1000-200, i%3 != 0, i%7, i%11, i%13, i%40, i%50, i%60)
	}
	b.WriteString(`]}`)
	return b.String()
}

// benchDocs builds the documents once per test binary; callers must not
// modify them.
var benchDocs = sync.OnceValue(func() []benchDoc {
	docs := []benchDoc{
		{name: "small", json: []byte(smallJSON)},
		{name: "medium", json: []byte(mediumJSON())},
		{name: "large", json: []byte(largeJSON())},
	}
	for i := range docs {
		mp, err := ToMsgPack(docs[i].json)
		if err != nil {
			panic(fmt.Sprintf("benchmark document %s: %v", docs[i].name, err))
		}
		docs[i].msgpack = mp
	}
	return docs
})

// BenchmarkToJSON compares AppendJSON into a reused buffer with the naive
// path (msgpack.Unmarshal into any, then json.Marshal), in the same run.
func BenchmarkToJSON(b *testing.B) {
	for _, d := range benchDocs() {
		b.Run(d.name+"/interchange", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d.msgpack)))
			var buf []byte
			for b.Loop() {
				out, err := AppendJSON(buf[:0], d.msgpack)
				if err != nil {
					b.Fatal(err)
				}
				buf = out
			}
		})
		b.Run(d.name+"/naive", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d.msgpack)))
			for b.Loop() {
				var v any
				if err := msgpack.Unmarshal(d.msgpack, &v); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToMsgPack compares AppendMsgPack into a reused buffer with the
// naive path (json.Unmarshal into any, then msgpack.Marshal).
func BenchmarkToMsgPack(b *testing.B) {
	for _, d := range benchDocs() {
		b.Run(d.name+"/interchange", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d.json)))
			var buf []byte
			for b.Loop() {
				out, err := AppendMsgPack(buf[:0], d.json)
				if err != nil {
					b.Fatal(err)
				}
				buf = out
			}
		})
		b.Run(d.name+"/naive", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d.json)))
			for b.Loop() {
				var v any
				if err := json.Unmarshal(d.json, &v); err != nil {
					b.Fatal(err)
				}
				if _, err := msgpack.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBenchDocsRoundTrip keeps the benchmark documents honest: they
// convert both ways and have the advertised sizes.
func TestBenchDocsRoundTrip(t *testing.T) {
	for _, d := range benchDocs() {
		js, err := ToJSON(d.msgpack)
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		if mp, err := ToMsgPack(js); err != nil || !bytes.Equal(mp, d.msgpack) {
			t.Fatalf("%s: round trip changed the value (%v)", d.name, err)
		}
		t.Logf("%s: %d bytes JSON, %d bytes MessagePack", d.name, len(d.json), len(d.msgpack))
	}
}
