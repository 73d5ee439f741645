package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
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
	Tool string
	// Pointer is "/path", "/options/mode", or with a Wildcard segment
	// "/paths/*" (every element); never "" (the whole arguments).
	Pointer string
	Values  []any    // allowed values: string, int64, float64 or bool; nil: any
	Prefix  *string  // the value is a string starting with it, with no way out of it (pathEscape)
	Pattern *Pattern // the value is a string the expression matches whole
	Min     *Bound   // the value is a number at least this, compared exactly
	Max     *Bound   // the value is a number at most this, compared exactly
	// Optional lets the argument be absent. By default a guarded
	// argument must be given: a server's default is not something the
	// operator approved.
	Optional bool

	Key  string // "mcp.fs.restrict.write_file./path", for messages
	File string
	Line int

	tokens []string  // Pointer's reference tokens, unescaped
	nums   []decimal // the numbers among Values
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
			n, ok := newBound(v)
			if !ok {
				r.fail(rk, "write a number, unquoted", "must be a number, not %s", describe(v))
				continue
			}
			if k == "min" {
				g.Min = n
			} else {
				g.Max = n
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
	if g.Min != nil && g.Max != nil && g.Min.dec.cmp(g.Max.dec) > 0 {
		r.fail(key+".min", "make min at most max", "min %s is more than max %s", g.Min.Text, g.Max.Text)
		return g, false
	}
	g.tokens = pointer.Tokens(ptr)
	g.nums = numbersOf(g.Values)
	return g, true
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
// an array's items, for a Wildcard token) and says where it fails, or ""
// when each token names something the schema declares. A guard must be
// able to match: a wildcard needs an array, whose items it guards. A
// numeric token names one element of a tuple (prefixItems, or an items
// array); on a list (items) it would guard that element only, and leave
// every other element unguarded, so it is refused for the wildcard.
func resolveInSchema(schema []byte, tokens []string) string {
	node := schema
	for i, tok := range tokens {
		var n struct {
			Properties  map[string]json.RawMessage `json:"properties"`
			Items       json.RawMessage            `json:"items"`
			PrefixItems []json.RawMessage          `json:"prefixItems"`
		}
		if json.Unmarshal(node, &n) != nil {
			return "the schema at " + where(tokens[:i]) + " is not an object schema"
		}
		var tuple []json.RawMessage
		if len(n.Items) > 0 && n.Items[0] == '[' {
			// Draft 4 to 2019-09 spell a tuple "items": [...].
			if json.Unmarshal(n.Items, &tuple) != nil {
				return "the schema at " + where(tokens[:i]) + " has malformed items"
			}
			n.Items = nil
		}
		tuple = append(n.PrefixItems, tuple...)
		if tok == Wildcard {
			switch {
			case n.Items != nil:
				node = n.Items
				continue
			case len(tuple) > 0:
				for _, el := range tuple {
					if why := resolveInSchema(el, tokens[i+1:]); why != "" {
						return why
					}
				}
				return ""
			}
			return where(tokens[:i]) + " is not declared as an array (its schema has no items), so " + where(tokens[:i+1]) + " can match nothing"
		}
		if p, ok := n.Properties[tok]; ok {
			node = p
			continue
		}
		if idx, ok := arrayIndex(tok); ok {
			if idx < len(tuple) {
				node = tuple[idx]
				continue
			}
			if n.Items != nil {
				rest := append(append([]string{}, tokens[:i]...), Wildcard)
				rest = append(rest, tokens[i+1:]...)
				return fmt.Sprintf("%s guards element %d of the list %s only, and leaves every other element unguarded; write %s to guard each element", where(tokens[:i+1]), idx, where(tokens[:i]), where(rest))
			}
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
	var b []byte
	for _, t := range tokens {
		b = pointer.AppendToken(b, t)
	}
	return string(b)
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

// IsNotDestructive reports whether the operator overrode a destructive
// hint for tool (not_destructive).
func (s *Server) IsNotDestructive(tool string) bool { return slices.Contains(s.NotDestructive, tool) }
