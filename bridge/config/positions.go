package config

import (
	"bytes"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// positions maps a dotted key path ("mcp.github.args") to the line it is
// first defined on, so that every error about a key can say where it is.
// go-toml's decoder reports positions only for syntax errors; the index
// gives the same precision to the checks this package makes itself.
type positions map[string]int

// maxIndexed bounds the parts of a key path the index records.
// capbridge's own keys are a few parts deep, and a deeper path is an
// error at one of its first parts, which is indexed. Unbounded, a dotted
// key or inline tables nested n deep cost n² (every prefix of every path
// joined and kept): a 32 KiB file took over a second and 270 MB.
const maxIndexed = 16

// indexPositions walks the document's expressions. It is called only on a
// document that has already decoded, so parse errors are not expected;
// should one occur, the index is simply incomplete and errors fall back to
// naming the key without a line. Its work is linear in the document.
func indexPositions(doc []byte) positions {
	x := indexer{pos: positions{}, lines: newlines(doc), size: len(doc)}
	p := unstable.Parser{}
	p.Reset(doc)
	var table string // the current table's path
	depth := 0       // its parts, or more than maxIndexed
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, deep := keyParts(e.Key(), maxIndexed)
			table, depth = strings.Join(parts, "."), len(parts)
			if deep {
				depth = maxIndexed + 1
			}
			first := e.Key()
			if first.Next() {
				x.pos.add(table, x.line(first.Node().Raw))
			}
		case unstable.KeyValue:
			if depth <= maxIndexed {
				x.addKeyValue(table, depth, e)
			}
		}
	}
	return x.pos
}

// indexer builds the positions of one document.
type indexer struct {
	pos   positions
	lines []int // the offset of each '\n' in the document
	size  int
}

// addKeyValue indexes kv, under prefix, the path of depth parts it is
// in.
func (x *indexer) addKeyValue(prefix string, depth int, kv *unstable.Node) {
	it := kv.Key()
	if !it.Next() {
		return
	}
	line := x.line(it.Node().Raw)
	parts, deep := keyParts(kv.Key(), maxIndexed-depth)
	// A dotted key (a.b.c = 1) defines every prefix on its own line.
	path := prefix
	for _, part := range parts {
		if depth > 0 {
			path += "."
		}
		path += part
		depth++
		x.pos.add(path, line)
	}
	if v := kv.Value(); v.Kind == unstable.InlineTable && !deep && depth < maxIndexed {
		for c := v.Children(); c.Next(); {
			if c.Node().Kind == unstable.KeyValue {
				x.addKeyValue(path, depth, c.Node())
			}
		}
	}
}

func (pos positions) add(path string, line int) {
	if _, ok := pos[path]; !ok && line > 0 {
		pos[path] = line
	}
}

// line returns the line of path, or of its nearest enclosing key that has
// one (a value inside an array is reported at the array's key).
func (pos positions) line(path string) int {
	if i := strings.IndexByte(path, '['); i >= 0 {
		path = path[:i] // "args[1]": the element is on its array's line
	}
	for {
		if l, ok := pos[path]; ok {
			return l
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

// keyParts returns a key's parts, at most max of them, and whether it
// has more.
func keyParts(it unstable.Iterator, max int) ([]string, bool) {
	var parts []string
	for it.Next() {
		if len(parts) >= max {
			return parts, true
		}
		parts = append(parts, string(it.Node().Data))
	}
	return parts, false
}

// newlines returns the offset of each '\n' in doc.
func newlines(doc []byte) []int {
	var nl []int
	for off := 0; ; {
		i := bytes.IndexByte(doc[off:], '\n')
		if i < 0 {
			return nl
		}
		nl = append(nl, off+i)
		off += i + 1
	}
}

// line returns the 1-based line of r's start, or 0 if it is not in the
// document.
func (x *indexer) line(r unstable.Range) int {
	off := int(r.Offset)
	if off > x.size {
		return 0
	}
	return 1 + sort.SearchInts(x.lines, off)
}
