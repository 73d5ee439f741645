package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/pointer"
)

// Lock modes: what serve does with a tool whose listing differs from the
// lock.
const (
	// LockEnforce withholds a drifted tool: absent from façades and
	// surfaces, its calls denied surface_changed.
	LockEnforce = "enforce"
	// LockWarn serves a drifted tool and reports the drift (status,
	// logs, audit trail), for rolling a lock out. A tool the lock does
	// not name is absent in either mode.
	LockWarn = "warn"
)

var lockModes = []string{LockEnforce, LockWarn}

// Guard is one argument restriction of a [mcp.<name>.restrict] table:
// the value at Pointer (RFC 6901, into the call's arguments) must pass
// every rule given. A guard is checked before the call leaves the
// bridge; a violation is refused not_granted.
type Guard struct {
	Tool    string
	Pointer string   // "/path", "/options/mode"; never "" (the whole arguments)
	Values  []any    // allowed values: string, int64, float64 or bool; nil: any
	Prefix  *string  // the value is a string starting with it, with no ".." segment
	Pattern *Pattern // the value is a string the expression matches whole
	Min     *float64 // the value is a number at least this
	Max     *float64 // the value is a number at most this
	// Optional lets the argument be absent. By default a guarded
	// argument must be given: a server's default is not something the
	// operator approved.
	Optional bool

	Key  string // "mcp.fs.restrict.write_file./path", for messages
	File string
	Line int
}

// Pattern is a guard's regular expression: RE2, matched against the
// whole value.
type Pattern struct {
	Text string
	re   *regexp.Regexp
}

// MatchString reports whether the pattern matches the whole of s.
func (p *Pattern) MatchString(s string) bool { return p.re.MatchString(s) }

var guardKeys = []string{"values", "prefix", "pattern", "min", "max", "optional"}

// restrict reads [mcp.<name>.restrict]: a table per tool, in it a table
// per JSON Pointer, in that the rules.
func (r *reader) restrict(key string, v any, s *Server) {
	t, ok := r.table(key, v)
	if !ok {
		return
	}
	for _, tool := range slices.Sorted(maps.Keys(t)) {
		tk := key + "." + tool
		pointers, ok := r.table(tk, t[tool])
		if !ok {
			continue
		}
		for _, ptr := range slices.Sorted(maps.Keys(pointers)) {
			gk := tk + "." + ptr
			if err := checkPointer(ptr); err != "" {
				r.fail(gk, `write a JSON Pointer to one argument, such as "/path" or "/options/mode" (quoted: "/path" = { prefix = "/srv/" })`, "%s", err)
				continue
			}
			rules, ok := r.table(gk, pointers[ptr])
			if !ok {
				continue
			}
			if g, ok := r.guard(gk, tool, ptr, rules); ok {
				g.File, g.Line = r.file, r.pos.line(gk)
				s.Restrict = append(s.Restrict, g)
			}
		}
	}
}

func (r *reader) guard(key, tool, ptr string, rules map[string]any) (Guard, bool) {
	g := Guard{Tool: tool, Pointer: ptr, Key: key}
	before := len(r.errs)
	for _, k := range slices.Sorted(maps.Keys(rules)) {
		v, rk := rules[k], key+"."+k
		switch k {
		case "values":
			a, ok := v.([]any)
			if !ok || len(a) == 0 {
				r.fail(rk, `write a non-empty array of strings, numbers or booleans: ["main", "dev"]`, "must be a non-empty array, not %s", describe(v))
				continue
			}
			for _, e := range a {
				switch e.(type) {
				case string, int64, float64, bool:
					g.Values = append(g.Values, e)
				default:
					r.fail(rk, "list strings, numbers or booleans only", "%s cannot be an argument's allowed value", describe(e))
				}
			}
		case "prefix":
			var p string
			if r.str(rk, v, &p) {
				g.Prefix = &p
			}
		case "pattern":
			var p string
			if !r.str(rk, v, &p) {
				continue
			}
			re, err := regexp.Compile(`^(?:` + p + `)$`)
			if err != nil {
				r.fail(rk, "write an RE2 regular expression (https://github.com/google/re2/wiki/Syntax); it must match the whole value", "bad pattern: %v", err)
				continue
			}
			g.Pattern = &Pattern{Text: p, re: re}
		case "min", "max":
			n, ok := number(v)
			if !ok {
				r.fail(rk, "write a number, unquoted", "must be a number, not %s", describe(v))
				continue
			}
			if k == "min" {
				g.Min = &n
			} else {
				g.Max = &n
			}
		case "optional":
			r.boolean(rk, v, &g.Optional)
		default:
			r.unknown(rk, k, guardKeys)
		}
	}
	if len(r.errs) > before {
		return g, false
	}
	if g.Values == nil && g.Prefix == nil && g.Pattern == nil && g.Min == nil && g.Max == nil {
		r.fail(key, "give at least one of values, prefix, pattern, min or max", "a guard with no rule restricts nothing")
		return g, false
	}
	if g.Min != nil && g.Max != nil && *g.Min > *g.Max {
		r.fail(key+".min", "make min at most max", "min %v is more than max %v", *g.Min, *g.Max)
		return g, false
	}
	return g, true
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	}
	return 0, false
}

// checkPointer returns why p is not a JSON Pointer to an argument, or "".
func checkPointer(p string) string {
	if p == "" || p[0] != '/' {
		return fmt.Sprintf("%q is not a JSON Pointer: it must start with /", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Sprintf("%q has a ~ that is not ~0 or ~1", p)
		}
	}
	for _, tok := range pointer.Tokens(p) {
		if tok == "" {
			return fmt.Sprintf("%q has an empty segment", p)
		}
	}
	return ""
}

// Violation is a restrict guard a call's arguments broke: the pointer and
// the rule, for the denial's message and path.
type Violation struct {
	Pointer, Rule string
}

// CheckArgs evaluates guards (a tool's, from Server.Guards) on a call's
// arguments (JSON, as they will be sent), and returns the first violation
// in pointer order, or nil. Arguments that are not a JSON object cannot
// hold a guarded value, so every guard that is not optional is broken.
func CheckArgs(guards []Guard, args []byte) *Violation {
	if len(guards) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return &Violation{Rule: "the arguments are not a JSON object"}
	}
	for i := range guards {
		g := &guards[i]
		v, found := lookupPointer(root, pointer.Tokens(g.Pointer))
		if !found {
			if g.Optional {
				continue
			}
			return &Violation{g.Pointer, "the argument is required by policy"}
		}
		if rule := breaks(g, v); rule != "" {
			return &Violation{g.Pointer, rule}
		}
	}
	return nil
}

// lookupPointer follows JSON Pointer tokens through a decoded value.
func lookupPointer(v any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.ParseUint(tok, 10, 31)
			if err != nil || int(i) >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// breaks returns the first rule of g that v breaks, described, or "".
func breaks(g *Guard, v any) string {
	s, isString := v.(string)
	n, isNumber := v.(json.Number)
	if g.Values != nil && !oneOf(v, g.Values) {
		return "values: not one of the allowed values"
	}
	if g.Prefix != nil {
		if !isString || !strings.HasPrefix(s, *g.Prefix) {
			return "prefix: must be a string starting with " + strconv.Quote(*g.Prefix)
		}
		// A path under the prefix must stay under it.
		if hasDotDot(s) {
			return "prefix: must not contain a \"..\" segment"
		}
	}
	if g.Pattern != nil && (!isString || !g.Pattern.MatchString(s)) {
		return "pattern: must be a string matching " + strconv.Quote(g.Pattern.Text)
	}
	if g.Min != nil || g.Max != nil {
		f, err := n.Float64()
		if !isNumber || err != nil || math.IsInf(f, 0) {
			return "range: must be a number"
		}
		if g.Min != nil && f < *g.Min {
			return "range: must be at least " + strconv.FormatFloat(*g.Min, 'g', -1, 64)
		}
		if g.Max != nil && f > *g.Max {
			return "range: must be at most " + strconv.FormatFloat(*g.Max, 'g', -1, 64)
		}
	}
	return ""
}

// oneOf compares a decoded argument with the allowed values: strings and
// booleans exactly, numbers by value (3 and 3.0 are one number).
func oneOf(v any, allowed []any) bool {
	for _, a := range allowed {
		switch x := v.(type) {
		case string, bool:
			if x == a {
				return true
			}
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return false
			}
			switch y := a.(type) {
			case int64:
				if f == float64(y) {
					return true
				}
			case float64:
				if f == y {
					return true
				}
			}
		}
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

// lockPath reads bridge.lock: a path, absolute or relative to the
// config file's directory.
func (r *reader) lockPath(key string, v any, dst *string) {
	var s string
	if !r.str(key, v, &s) {
		return
	}
	if s == "" {
		r.fail(key, `give the lock's path, such as "capbridge.lock" (beside this file)`, "is empty")
		return
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(filepath.Dir(r.file), s)
	}
	*dst = s
}

// CheckGuards checks each restrict guard of s against the input schema
// of the tool it names (schemaOf returns it, and false for a tool it does
// not know): a guard whose pointer names no property of the schema would
// silently restrict nothing, so it is an error at the guard's line. A
// guard on a tool schemaOf does not know is left to UnmatchedTools.
func (s *Server) CheckGuards(schemaOf func(tool string) ([]byte, bool)) ErrorList {
	var errs ErrorList
	for _, g := range s.Restrict {
		schema, ok := schemaOf(g.Tool)
		if !ok {
			continue
		}
		if why := resolveInSchema(schema, pointer.Tokens(g.Pointer)); why != "" {
			errs = append(errs, &Error{File: g.File, Line: g.Line, Key: g.Key,
				Msg: fmt.Sprintf("%s names no argument of tool %q: %s", g.Pointer, g.Tool, why),
				Fix: "check the spelling against `capbridge describe " + s.Name + "`; pointers follow the argument names, such as \"/path\""})
		}
	}
	return errs
}

// resolveInSchema follows tokens through a JSON Schema's properties (and
// an array's items, for a numeric token) and says where it fails, or ""
// when each token names something the schema declares.
func resolveInSchema(schema []byte, tokens []string) string {
	node := schema
	for i, tok := range tokens {
		var n struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Items      json.RawMessage            `json:"items"`
		}
		if json.Unmarshal(node, &n) != nil {
			return "the schema at " + where(tokens[:i]) + " is not an object schema"
		}
		if p, ok := n.Properties[tok]; ok {
			node = p
			continue
		}
		if _, err := strconv.ParseUint(tok, 10, 31); err == nil && n.Items != nil {
			node = n.Items
			continue
		}
		if len(n.Properties) == 0 {
			return where(tokens[:i]) + " declares no properties"
		}
		known := slices.Sorted(maps.Keys(n.Properties))
		msg := fmt.Sprintf("no property %q in %s (it has %s)", tok, where(tokens[:i]), strings.Join(known, ", "))
		if s := suggest(tok, known); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return msg
	}
	return ""
}

func where(tokens []string) string {
	if len(tokens) == 0 {
		return "the arguments"
	}
	return "/" + strings.Join(tokens, "/")
}

// Guards returns the guards of tool, in pointer order.
func (s *Server) Guards(tool string) []Guard {
	var out []Guard
	for _, g := range s.Restrict {
		if g.Tool == tool {
			out = append(out, g)
		}
	}
	return out
}

// IsDestructive reports whether the operator declared tool destructive.
func (s *Server) IsDestructive(tool string) bool { return slices.Contains(s.Destructive, tool) }
