package config

import (
	"bytes"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// positions maps a dotted key path ("mcp.github.args") to the line it is
// first defined on, so that every error about a key can say where it is.
// go-toml's decoder reports positions only for syntax errors; the index
// gives the same precision to the checks this package makes itself.
type positions map[string]int

// indexPositions walks the document's expressions. It is called only on a
// document that has already decoded, so parse errors are not expected;
// should one occur, the index is simply incomplete and errors fall back to
// naming the key without a line.
func indexPositions(doc []byte) positions {
	pos := positions{}
	p := unstable.Parser{}
	p.Reset(doc)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e.Key())
			first := e.Key()
			if first.Next() {
				pos.add(strings.Join(table, "."), lineOf(doc, first.Node().Raw))
			}
		case unstable.KeyValue:
			pos.addKeyValue(doc, table, e)
		}
	}
	return pos
}

func (pos positions) addKeyValue(doc []byte, prefix []string, kv *unstable.Node) {
	it := kv.Key()
	if !it.Next() {
		return
	}
	line := lineOf(doc, it.Node().Raw)
	path := append(append([]string(nil), prefix...), keyParts(kv.Key())...)
	// A dotted key (a.b.c = 1) defines every prefix on its own line.
	for i := len(prefix) + 1; i <= len(path); i++ {
		pos.add(strings.Join(path[:i], "."), line)
	}
	if v := kv.Value(); v.Kind == unstable.InlineTable {
		for c := v.Children(); c.Next(); {
			if c.Node().Kind == unstable.KeyValue {
				pos.addKeyValue(doc, path, c.Node())
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

func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

func lineOf(doc []byte, r unstable.Range) int {
	if int(r.Offset) > len(doc) {
		return 0
	}
	return 1 + bytes.Count(doc[:r.Offset], []byte{'\n'})
}
