package codegen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/capbridge/capbridge/internal/truncate"
)

// node is one JSON value of a schema, with object members kept in document
// order: parameter order in the generated signature follows the order the
// server wrote its properties in, and encoding/json's maps would lose it.
type node struct {
	kind  nodeKind
	str   string   // kindString; kindNumber holds the literal text
	b     bool     // kindBool
	keys  []string // kindObject, in document order, unique
	vals  []*node  // kindObject, parallel to keys
	elems []*node  // kindArray
}

type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// get returns the member named key of an object, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// errTree is the reason a schema could not be read as a tree; it becomes the
// reason of a whole-value plan, never a failure of generation.
type errTree struct{ reason string }

func (e *errTree) Error() string { return e.reason }

// parseTree decodes raw into an ordered tree. It is total and bounded: it
// streams tokens with an explicit stack (no recursion on the input's
// nesting), stops past maxDepth levels or maxNodes values, and refuses
// duplicate object keys — JSON leaves their meaning to the parser, and a
// server whose parser took the other copy would see a different schema
// than the one we typed.
func parseTree(raw []byte, maxDepth, maxNodes int) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		n       *node
		pending string // object: the key awaiting its value
		haveKey bool
	}
	var (
		stack []frame
		root  *node
		count int
	)
	// attach places v in the innermost open container (or makes it the root)
	// and reports an error for a duplicate key.
	attach := func(v *node) error {
		count++
		if count > maxNodes {
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
		top.n.keys = append(top.n.keys, top.pending)
		top.n.vals = append(top.n.vals, v)
		top.haveKey = false
		return nil
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &errTree{"not valid JSON: " + truncate.Ellipsis(err.Error(), 80)}
		}
		// Inside an object the decoder alternates key and value tokens.
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
				if err := attach(v); err != nil {
					return nil, err
				}
				stack = append(stack, frame{n: v})
			case ']', '}':
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
			// One value only: anything after it is not a schema.
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return nil, &errTree{"trailing data after the JSON value"}
			}
			return root, nil
		}
	}
	return nil, &errTree{"empty input"}
}
