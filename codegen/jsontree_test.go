package codegen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/truncate"
)

// streamTree is an independent reader of the same tree: encoding/json's
// token stream, the bounds and the duplicate rule applied in the order
// the tokens come. parseTree must agree with it.
func streamTree(raw []byte, maxDepth, maxNodes int) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		n       *node
		pending string
		haveKey bool
	}
	var stack []frame
	var root *node
	count := 0
	attach := func(v *node) error {
		if count++; count > maxNodes {
			return &errTree{fmt.Sprintf("more than %d JSON values", maxNodes)}
		}
		if len(stack) == 0 {
			root = v
			return nil
		}
		top := &stack[len(stack)-1]
		if top.n.kind == kindArray {
			top.n.elems = append(top.n.elems, v)
			return nil
		}
		for _, k := range top.n.keys {
			if k == top.pending {
				return &errTree{fmt.Sprintf("duplicate object key %q", truncate.Ellipsis(top.pending, 40))}
			}
		}
		top.n.keys, top.n.vals, top.haveKey = append(top.n.keys, top.pending), append(top.n.vals, v), false
		return nil
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil, &errTree{"empty input"}
		}
		if err != nil {
			return nil, &errTree{"not valid JSON: " + err.Error()}
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case string:
			if top != nil && top.n.kind == kindObject && !top.haveKey {
				top.pending, top.haveKey = t, true
			} else {
				err = attach(&node{kind: kindString, str: t})
			}
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxDepth {
					return nil, &errTree{fmt.Sprintf("nested deeper than %d levels", maxDepth)}
				}
				v := &node{kind: kindObject}
				if t == '[' {
					v.kind = kindArray
				}
				if err = attach(v); err == nil {
					stack = append(stack, frame{n: v})
				}
			default:
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			err = attach(&node{kind: kindNumber, str: string(t)})
		case bool:
			err = attach(&node{kind: kindBool, b: t})
		case nil:
			err = attach(&node{kind: kindNull})
		}
		if err != nil {
			return nil, err
		}
		if root != nil && len(stack) == 0 {
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return nil, &errTree{"trailing data after the JSON value"}
			}
			return root, nil
		}
	}
}

// sameTree reports whether a and b are the same tree, keys in order.
func sameTree(a, b *node) bool {
	if a.kind != b.kind || a.str != b.str || a.b != b.b || len(a.keys) != len(b.keys) || len(a.vals) != len(b.vals) || len(a.elems) != len(b.elems) {
		return false
	}
	for i := range a.keys {
		if a.keys[i] != b.keys[i] || !sameTree(a.vals[i], b.vals[i]) {
			return false
		}
	}
	for i := range a.elems {
		if !sameTree(a.elems[i], b.elems[i]) {
			return false
		}
	}
	return true
}

// checkTree holds parseTree to streamTree on raw: the same tree, or both
// refusing it; for valid JSON, for the same reason.
func checkTree(t *testing.T, raw []byte, maxDepth, maxNodes int) {
	t.Helper()
	got, gerr := parseTree(raw, maxDepth, maxNodes)
	want, werr := streamTree(raw, maxDepth, maxNodes)
	switch {
	case gerr == nil && werr == nil:
		if !sameTree(got, want) {
			t.Fatalf("%q: trees differ", raw)
		}
	case (gerr == nil) != (werr == nil):
		t.Fatalf("%q: parseTree error %v, encoding/json's %v", raw, gerr, werr)
	case json.Valid(raw) && gerr.Error() != werr.Error():
		t.Fatalf("%q: parseTree refuses %q, encoding/json's reading %q", raw, gerr, werr)
	}
}

var treeCases = []string{
	`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]},"b":{"type":["integer","null"],"minimum":-1.5e3}},"required":["a"]}`,
	` [1, 2.0, -0, 1e10, true, false, null, "s", {}, []] `,
	`"\u00e9\ud83d\ude00\ud800x\\\/\b\f\n\r\t"`,
	"\"bad \xff\xfe utf8 \xc3\"",
	"{\"k\xff\":1}",
	`{"a":1,"a":2}`,
	`{"a":{"b":1},"a":[1]}`,
	`{"\u0061":1,"a":2}`,
	`[[[[[[1]]]]]]`,
	`{"a":[{"b":[{"c":{}}]}]}`,
	``, `   `, `{`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `01`, `1 2`, `{} x`, `nul`, `"\x"`, "\"\x01\"", `[1 2]`, `{1:2}`, `-`, `1.`, `.5`,
	`{"a":1,"a" x}`, `{"a":1,"a":01}`, `{"a":[1,2,3,4,5,6,7,8,9]}`,
}

func TestParseTree(t *testing.T) {
	for _, c := range treeCases {
		for _, bounds := range [][2]int{{64, 1 << 16}, {3, 1 << 16}, {64, 5}, {1, 1}} {
			checkTree(t, []byte(c), bounds[0], bounds[1])
		}
	}
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	if _, err := parseTree([]byte(deep), 64, 1<<16); err == nil || err.Error() != "nested deeper than 64 levels" {
		t.Errorf("65 levels: %v", err)
	}
	checkTree(t, []byte(deep), 64, 1<<16)
	checkTree(t, []byte(strings.Repeat("[", 64)+strings.Repeat("]", 64)), 64, 1<<16)
	checkTree(t, []byte(strings.Repeat("[", 100000)), 64, 1<<16)
	many := "[" + strings.Repeat("0,", 70000) + "0]"
	checkTree(t, []byte(many), 64, 1<<16)

	// Objects past indexFrom keys are indexed: a duplicate is found
	// wherever it falls, and every key is found by get.
	for _, keys := range []int{indexFrom, indexFrom + 1, indexFrom + 2, 100} {
		obj := wideObject(keys)
		checkTree(t, []byte(obj), 64, 1<<16)
		for _, dup := range []int{0, indexFrom - 1, indexFrom, keys - 1} {
			checkTree(t, []byte(strings.TrimSuffix(obj, "}")+fmt.Sprintf(`,"k%d":1}`, dup)), 64, 1<<16)
		}
		n, err := parseTree([]byte(obj), 64, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if v := n.get(fmt.Sprintf("k%d", i)); v == nil || v.str != fmt.Sprint(i) {
				t.Errorf("%d keys: get(k%d) = %v", keys, i, v)
			}
		}
		if n.get("k-1") != nil || n.get("") != nil {
			t.Errorf("%d keys: get found a key the object lacks", keys)
		}
	}
}

// wideObject is an object of n keys k0…kn-1 whose values are their
// numbers.
func wideObject(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.String()
}

// wideRefSchema is a hostile input schema within every per-schema bound:
// records properties, each a $ref to a record of props properties, each
// a $ref to one schema beside junk keys. Planning looks up a dozen keys
// of that schema at each of its records × props uses: scanned key by
// key, it took 6.6 s.
func wideRefSchema(junk, records, props int) []byte {
	return wideUses(records, props, "b", func(b *strings.Builder) {
		b.WriteString(`"b":{`)
		for j := range junk {
			fmt.Fprintf(b, `"%04x":0,`, j) // as long as "type"
		}
		b.WriteString(`"type":"string"}`)
	})
}

// wideAllOfSchema is wideRefSchema whose records' properties are each an
// allOf of one object of junk properties, merged at every use.
func wideAllOfSchema(junk, records, props int) []byte {
	return wideUses(records, props, "M", func(b *strings.Builder) {
		b.WriteString(`"W":{"type":"object","properties":{`)
		for j := range junk {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, `"%04x":0`, j)
		}
		b.WriteString(`}},"M":{"allOf":[{"$ref":"#/$defs/W"}]}`)
	})
}

// wideUses is an object schema of records properties, each a $ref to a
// record of props properties, each a $ref to the definition named used,
// which defs writes among the $defs.
func wideUses(records, props int, used string, defs func(*strings.Builder)) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for r := range records {
		if r > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"r%d":{"$ref":"#/$defs/R%d"}`, r, r)
	}
	b.WriteString(`},"$defs":{`)
	defs(&b)
	for r := range records {
		fmt.Fprintf(&b, `,"R%d":{"type":"object","properties":{`, r)
		for p := range props {
			if p > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%d":{"$ref":"#/$defs/%s"}`, p, used)
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// BenchmarkWideSchemas: a schema's cost does not grow with the product
// of an object's keys and their lookups. Before objects were indexed, a
// 65 000-key object took 9.9 s to read and wideRefSchema's 543 KB 6.6 s
// to generate.
func BenchmarkWideSchemas(b *testing.B) {
	b.Run("read 65000 keys", func(b *testing.B) {
		obj := []byte(wideObject(65000))
		for b.Loop() {
			if _, err := parseTree(obj, maxSchemaDepth, maxSchemaNodes); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generate 10240 merges of a 40000-key allOf", func(b *testing.B) {
		s := wideAllOfSchema(40000, 80, 128)
		for b.Loop() {
			if _, err := Generate("srv", []Tool{{Name: "t", InputSchema: s}}, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generate 10240 uses of a 30000-key schema", func(b *testing.B) {
		s := wideRefSchema(30000, 80, 128)
		for b.Loop() {
			if _, err := Generate("srv", []Tool{{Name: "t", InputSchema: s}}, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzParseTree holds the schema reader to encoding/json's token stream.
func FuzzParseTree(f *testing.F) {
	for _, c := range treeCases {
		f.Add([]byte(c), uint8(64), uint16(1000))
	}
	f.Fuzz(func(t *testing.T, raw []byte, depth uint8, nodes uint16) {
		checkTree(t, raw, int(depth%80), int(nodes))
	})
}

// digestByCompact is listingDigest's canonical form of one schema as
// json.Compact alone made it, which jsonlex now makes where it can.
func digestByCompact(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return listingDigest([]Tool{{Name: "t", InputSchema: raw}})
	}
	return listingDigest([]Tool{{Name: "t", InputSchema: buf.Bytes()}})
}

var digestCases = append([]string{
	" { \"a\" : [ 1 , 2 ] , \"b\" : \"x y\\n\" } ",
	"{\"s\":\"\u2028 raw\"}",
	"\t\n{}\r\n",
	strings.Repeat("[ ", 200) + strings.Repeat("] ", 200),
	strings.Repeat("[", 200) + strings.Repeat("]", 200),
	"{\"a\":1} x",
}, treeCases...)

// TestListingDigestCompact: a schema's digest is the one json.Compact's
// form of it gives, whitespace, depth and invalid JSON included.
func TestListingDigestCompact(t *testing.T) {
	for _, c := range digestCases {
		if got, want := listingDigest([]Tool{{Name: "t", InputSchema: []byte(c)}}), digestByCompact([]byte(c)); got != want {
			t.Errorf("%q: digest %s, json.Compact's %s", c, got, want)
		}
	}
}

// FuzzListingDigest holds the digest's compaction to json.Compact's.
func FuzzListingDigest(f *testing.F) {
	for _, c := range digestCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := listingDigest([]Tool{{Name: "t", InputSchema: raw}}), digestByCompact(raw); got != want {
			t.Fatalf("%q: digest %s, json.Compact's %s", raw, got, want)
		}
	})
}
