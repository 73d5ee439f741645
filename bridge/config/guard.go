package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/pointer"
	"github.com/capbridge/capbridge/internal/truncate"
)

// Wildcard is the pointer segment that applies a guard to every element
// of an array: "/paths/*" guards each path of a list, where "/paths/0"
// would guard only the first (RFC 6901 has no such segment; in a guard's
// pointer "*" always means this, never a member named "*").
const Wildcard = "*"

// Bound is a guard's min or max: the number as the guard compares it,
// exactly, in decimal (an integer as written, a fraction as the shortest
// decimal that reads back as the configured float64).
type Bound struct {
	Text string
	dec  decimal
}

func newBound(v any) (*Bound, bool) {
	var text string
	switch n := v.(type) {
	case int64:
		text = strconv.FormatInt(n, 10)
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, false
		}
		text = strconv.FormatFloat(n, 'g', -1, 64)
	default:
		return nil, false
	}
	d, ok := parseDecimal(text)
	return &Bound{Text: text, dec: d}, ok
}

// Violation is a restrict guard a call's arguments broke: where (a JSON
// Pointer to the value, or to the member that was missing; for a guard
// with a wildcard, to the element that broke it) and the rule, for the
// denial's message and path.
type Violation struct {
	Pointer, Rule string
}

// CheckArgs evaluates guards (a tool's, from Server.Guards) on a call's
// arguments (JSON, as they will be sent), and returns the first
// violation, or nil. Guards are checked in pointer order, after the keys:
// arguments in which two keys of one object fold to the same key (see
// fold.go) are refused whatever the guards say, since a server that
// ignores case would read either one. A tool without guards costs
// nothing here: its arguments are not read.
//
// Arguments that are not one JSON object hold no guarded value and are
// refused.
func CheckArgs(guards []Guard, args []byte) *Violation {
	if len(guards) == 0 {
		return nil
	}
	start, end, _, f := jsonlex.Valid(args, jsonlex.CheckUTF8)
	if f != nil || args[start] != '{' {
		return &Violation{Rule: "the arguments are not a JSON object"}
	}
	root := args[start:end]
	var fc folder
	if v := fc.collisions(root, make([]byte, 0, 64)); v != nil {
		return v
	}
	for i := range guards {
		if v := guards[i].check(root); v != nil {
			return v
		}
	}
	return nil
}

// FoldCollision reports the first object of args (JSON) two of whose
// keys fold to one key, as CheckArgs refuses it, or nil: the case rule
// alone, for a caller that applies it to tools without guards.
func FoldCollision(args []byte) *Violation {
	start, end, _, f := jsonlex.Valid(args, jsonlex.CheckUTF8)
	if f != nil {
		return &Violation{Rule: "the arguments are not JSON"}
	}
	var fc folder
	return fc.collisions(args[start:end], make([]byte, 0, 64))
}

// folder finds keys that fold together. Its scratch space is reused
// across the objects of one argument tree.
type folder struct {
	buf  []byte   // the folded keys of the object in hand, back to back
	ends []int    // where each one ends in buf
	keys [][]byte // the keys as written (quoted), for the message
}

// smallObject is the member count up to which keys are compared pairwise
// rather than through a map: the common object is small, and a map costs
// more than a few comparisons.
const smallObject = 16

// collisions walks the validated value v (at pointer path) and returns
// the first object with two keys that fold to one.
func (fc *folder) collisions(v, path []byte) *Violation {
	switch v[0] {
	case '{':
		fc.buf, fc.ends, fc.keys = fc.buf[:0], fc.ends[:0], fc.keys[:0]
		_ = jsonlex.EachMember(v, func(k, _ []byte) error {
			fc.buf = appendFoldKey(fc.buf, k)
			fc.ends = append(fc.ends, len(fc.buf))
			fc.keys = append(fc.keys, k)
			return nil
		})
		if i, j := fc.duplicate(); i >= 0 {
			a, b := jsonlex.Unquote(fc.keys[i]), jsonlex.Unquote(fc.keys[j])
			return &Violation{
				Pointer: string(pointer.AppendToken(path, b)),
				Rule:    fmt.Sprintf("keys %s and %s differ only in case, and a server that ignores case reads them as one; send one of them", quoted(a), quoted(b)),
			}
		}
		var found *Violation
		_ = jsonlex.EachMember(v, func(k, val []byte) error {
			if found = fc.collisions(val, pointer.AppendToken(path, jsonlex.Unquote(k))); found != nil {
				return errStop
			}
			return nil
		})
		return found
	case '[':
		var found *Violation
		_ = jsonlex.EachElement(v, func(i int, val []byte) error {
			if found = fc.collisions(val, strconv.AppendInt(append(path, '/'), int64(i), 10)); found != nil {
				return errStop
			}
			return nil
		})
		return found
	}
	return nil
}

var errStop = errors.New("stop")

// duplicate returns the indexes of the first two keys of the object in
// hand that fold to one, or -1, -1.
func (fc *folder) duplicate() (int, int) {
	n := len(fc.ends)
	folded := func(i int) []byte {
		start := 0
		if i > 0 {
			start = fc.ends[i-1]
		}
		return fc.buf[start:fc.ends[i]]
	}
	if n <= smallObject {
		for j := 1; j < n; j++ {
			for i := 0; i < j; i++ {
				if bytes.Equal(folded(i), folded(j)) {
					return i, j
				}
			}
		}
		return -1, -1
	}
	seen := make(map[string]int, n)
	for j := range n {
		f := folded(j)
		if i, ok := seen[string(f)]; ok {
			return i, j
		}
		seen[string(f)] = j
	}
	return -1, -1
}

// check evaluates the guard on the validated root object.
func (g *Guard) check(root []byte) *Violation {
	toks := g.tokens
	if toks == nil {
		toks = pointer.Tokens(g.Pointer)
	}
	return g.walk(root, toks, make([]byte, 0, 64))
}

// walk follows toks from the validated value v, which sits at path, and
// checks the value they lead to (every element, at a wildcard). Only a
// member missing from an object is absence, which an optional guard
// allows; a value of the wrong shape on the way (an array, a string or
// null where the pointer names a member) breaks the guard even when it is
// optional, since a server may read that shape its own way.
func (g *Guard) walk(v []byte, toks []string, path []byte) *Violation {
	if len(toks) == 0 {
		if rule := g.breaks(v); rule != "" {
			return &Violation{Pointer: string(path), Rule: rule}
		}
		return nil
	}
	tok := toks[0]
	switch v[0] {
	case '{':
		if tok == Wildcard {
			return &Violation{Pointer: string(path), Rule: "must be an array: the guard applies to each of its elements"}
		}
		var val []byte
		variant := ""
		_ = jsonlex.EachMember(v, func(k, mv []byte) error {
			if jsonlex.KeyIs(k, tok) {
				val = mv
				return errStop
			}
			if key := jsonlex.Unquote(k); foldEqual(key, tok) {
				variant = key
				return errStop
			}
			return nil
		})
		switch {
		case variant != "":
			return &Violation{Pointer: string(pointer.AppendToken(path, variant)),
				Rule: fmt.Sprintf("%s differs from the guarded argument %s only in case; spell it %s", quoted(variant), quoted(tok), quoted(tok))}
		case val == nil:
			return g.absent(path, toks)
		}
		return g.walk(val, toks[1:], pointer.AppendToken(path, tok))
	case '[':
		if tok == Wildcard {
			var found *Violation
			_ = jsonlex.EachElement(v, func(i int, ev []byte) error {
				if found = g.walk(ev, toks[1:], strconv.AppendInt(append(path, '/'), int64(i), 10)); found != nil {
					return errStop
				}
				return nil
			})
			return found
		}
		idx, ok := arrayIndex(tok)
		if !ok {
			return &Violation{Pointer: string(path), Rule: fmt.Sprintf("must be an object with member %s, not an array", quoted(tok))}
		}
		var val []byte
		_ = jsonlex.EachElement(v, func(i int, ev []byte) error {
			if i == idx {
				val = ev
				return errStop
			}
			return nil
		})
		if val == nil {
			return g.absent(path, toks)
		}
		return g.walk(val, toks[1:], pointer.AppendToken(path, tok))
	}
	what := "an object with member " + quoted(tok)
	if tok == Wildcard {
		what = "an array"
	}
	return &Violation{Pointer: string(path), Rule: fmt.Sprintf("must be %s, not %s", what, kindOf(v))}
}

// absent is the verdict on a missing member: nothing for an optional
// guard, a violation naming the whole missing pointer otherwise.
func (g *Guard) absent(path []byte, toks []string) *Violation {
	if g.Optional {
		return nil
	}
	for _, t := range toks {
		path = pointer.AppendToken(path, t)
	}
	return &Violation{Pointer: string(path), Rule: "the argument is required by policy"}
}

// arrayIndex reads an RFC 6901 array index: digits, no leading zero.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	i, err := strconv.ParseUint(tok, 10, 31)
	return int(i), err == nil
}

func kindOf(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// quoted renders a key the caller chose for a message: valid UTF-8, cut
// to 64 bytes, quoted.
func quoted(s string) string { return strconv.Quote(truncate.Ellipsis(s, 64)) }

// breaks returns the first rule of g that the validated value v breaks,
// described, or "".
func (g *Guard) breaks(v []byte) string {
	isString, isNumber := v[0] == '"', v[0] == '-' || isDigit(v[0])
	var s string
	if isString {
		s = jsonlex.Unquote(v)
	}
	if g.Values != nil && !g.oneOf(v, s) {
		return "values: not one of the allowed values"
	}
	if g.Prefix != nil {
		if !isString || !strings.HasPrefix(s, *g.Prefix) {
			return "prefix: must be a string starting with " + strconv.Quote(*g.Prefix)
		}
		if why := pathEscape(s); why != "" {
			return "prefix: " + why
		}
	}
	if g.Pattern != nil && (!isString || !g.Pattern.MatchString(s)) {
		return "pattern: must be a string matching " + strconv.Quote(g.Pattern.Text)
	}
	if g.Min != nil || g.Max != nil {
		if !isNumber {
			return "range: must be a number"
		}
		// A number no float64 holds is refused: most servers read
		// numbers as float64, and would read it as infinity.
		if f, err := strconv.ParseFloat(string(v), 64); err != nil || math.IsInf(f, 0) {
			return "range: must be a finite number"
		}
		d, _ := parseDecimal(string(v))
		if g.Min != nil && d.cmp(g.Min.dec) < 0 {
			return "range: must be at least " + g.Min.Text
		}
		if g.Max != nil && d.cmp(g.Max.dec) > 0 {
			return "range: must be at most " + g.Max.Text
		}
	}
	return ""
}

// oneOf compares the validated value v (s, when it is a string) with the
// allowed values: strings and booleans exactly, numbers by exact decimal
// value (3 and 3.0 are one number; 2^53 and 2^53+1 are two).
func (g *Guard) oneOf(v []byte, s string) bool {
	switch v[0] {
	case '"':
		for _, a := range g.Values {
			if a == any(s) {
				return true
			}
		}
	case 't', 'f':
		b := v[0] == 't'
		for _, a := range g.Values {
			if a == any(b) {
				return true
			}
		}
	case '{', '[', 'n':
	default:
		d, ok := parseDecimal(string(v))
		if !ok {
			return false
		}
		nums := g.nums
		if nums == nil {
			nums = numbersOf(g.Values)
		}
		for _, a := range nums {
			if d.cmp(a) == 0 {
				return true
			}
		}
	}
	return false
}

// numbersOf returns the numbers among allowed values, exactly.
func numbersOf(values []any) []decimal {
	var out []decimal
	for _, a := range values {
		if b, ok := newBound(a); ok {
			out = append(out, b.dec)
		}
	}
	return out
}

// pathEscape says why s, a value that passed a prefix, could still leave
// the prefix at a server that reads it as a path, or "". The prefix rule
// is lexical: capbridge cannot see the server's file system (symbolic
// links are the server's to resolve) and does not decode or normalise the
// value, so a value a server might decode or normalise into a step out
// is refused instead: a ".." segment, an escaped '.', '/', '\' or '%'
// (%2e, %2f, %5c, %25), a NUL, and the compatibility characters that
// Unicode's NFKC normalisation turns into '.', '/', '\' or '%'.
func pathEscape(s string) string {
	if hasDotDot(s) {
		return "must not contain a \"..\" segment"
	}
	wide := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0:
			return "must not contain a NUL character"
		case c == '%' && i+2 < len(s):
			switch strings.ToLower(s[i+1 : i+3]) {
			case "2e", "2f", "5c", "25", "00":
				return "must not contain a percent-encoded '.', '/', '\\', '%' or NUL (" + s[i:i+3] + ")"
			}
		case c >= 0x80:
			wide = true
		}
	}
	if wide {
		for _, r := range s {
			if nfkcPathRune(r) {
				return fmt.Sprintf("must not contain %U, which Unicode normalisation (NFKC) turns into '.', '/', '\\' or '%%'", r)
			}
		}
	}
	return ""
}

// nfkcPathRune reports whether NFKC normalises r into text holding '.',
// '/', '\' or '%' (every such rune, from the Unicode data; ASCII aside).
func nfkcPathRune(r rune) bool {
	switch {
	case r >= 0x2024 && r <= 0x2026, // one and two dot leaders, ellipsis
		r == 0x2100, r == 0x2101, r == 0x2105, r == 0x2106, // a/c, a/s, c/o, c/u
		r >= 0x2488 && r <= 0x249B,            // digit full stops
		r == 0x33C2, r == 0x33C7, r == 0x33D8, // squared a.m., Co., p.m.
		r == 0xFE19, r == 0xFE30, r == 0xFE52, r == 0xFE68, r == 0xFE6A, // vertical and small forms
		r == 0xFF05, r == 0xFF0E, r == 0xFF0F, r == 0xFF3C, // fullwidth % . / \
		r == 0x1F100: // digit zero full stop
		return true
	}
	return false
}

func hasDotDot(s string) bool {
	for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}
