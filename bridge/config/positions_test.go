package config

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The index of a document's positions takes memory linear in its size,
// however deep its keys: a dotted key of 16 000 parts or inline tables
// 8 000 deep, in 32 KiB, took over a second and 270 MB to index when
// every prefix of every path was joined and kept. Keys under a table
// deeper than anything capbridge reads are not indexed; the lines of
// what is indexed are right.
func TestPositionsLinear(t *testing.T) {
	var keys strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&keys, "k%d = 1\n", i)
	}
	for what, doc := range map[string]string{
		"a dotted key":                 "x." + strings.Repeat("a.", 16000) + "b = 1\n",
		"nested inline tables":         "x = " + strings.Repeat("{a=", 8000) + "1" + strings.Repeat("}", 8000) + "\n",
		"keys under a deep table":      "[" + strings.Repeat("a.", 16000) + "b]\n" + keys.String(),
		"keys under a shallow table":   "[mcp.x]\n" + keys.String(),
		"a dotted key with long parts": "x." + strings.Repeat(strings.Repeat("p", 2000)+".", 16) + "b = 1\n",
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pos := indexPositions([]byte(doc))
		runtime.ReadMemStats(&after)
		// go-toml's parser holds an expression's nodes, about 100 bytes
		// for each byte of nested inline tables.
		if got := after.TotalAlloc - before.TotalAlloc; got > 256*uint64(len(doc)) {
			t.Errorf("%s: indexing %d bytes allocated %d", what, len(doc), got)
		}
		if l := pos.line("x.a"); strings.HasPrefix(doc, "x") && l != 1 {
			t.Errorf("%s: x.a on line %d, want 1", what, l)
		}
	}
	pos := indexPositions([]byte("[mcp.x]\n" + keys.String()))
	if l := pos.line("mcp.x.k1999"); l != 2001 {
		t.Errorf("the last key on line %d, want 2001", l)
	}
	if l := pos.line("mcp.x.k7.sub"); l != 9 {
		t.Errorf("below k7: line %d, want 9", l)
	}
}
