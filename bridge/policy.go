package bridge

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/mcpwire"
)

// The policy decisions an audit line records: which rule let a call
// through, or which one refused it.
const (
	policyAllowed           = "allowed"               // no rule applied to the tool
	policyGuarded           = "guards_passed"         // every restrict guard held
	policyDestructiveNamed  = "destructive_named"     // a destructive tool the grant names
	policyDestructiveOptIn  = "destructive_opt_in"    // a destructive tool, the grant allows them
	policyDestructiveRefuse = "destructive_refused"   // a destructive tool the grant neither names nor allows
	policyGuardRefused      = "guard_refused"         // a restrict guard did not hold
	policyOperator          = "operator"              // the control socket's call: operator authority
	policyWithheld          = "withheld_by_lock"      // the tool differs from the lock
	policyWarnDrift         = "allowed_despite_drift" // lock_mode warn served a drifted tool
)

// destructiveDecision applies destructive = [...] to a call of tool on
// server s under g (nil: the operator's authority, which declares the
// rule and is bound by it only as far as it chooses to call). It returns
// the decision, and whether the call may go on.
func destructiveDecision(s *config.Server, g *Grant, server, tool string) (string, bool) {
	if !s.IsDestructive(tool) {
		return "", true
	}
	switch {
	case g == nil:
		return policyOperator, true
	case g.names(server, tool):
		return policyDestructiveNamed, true
	case g.allowDestructive:
		return policyDestructiveOptIn, true
	}
	return policyDestructiveRefuse, false
}

// guardViolation is a restrict guard a call's arguments broke: the
// pointer and the rule, for the denial's message and path.
type guardViolation struct {
	pointer, rule string
}

// checkGuards evaluates guards on a call's arguments (JSON, as they will
// be sent), and returns the first violation in pointer order, or nil.
// Arguments that are not a JSON object cannot hold a guarded value, so
// every guard that is not optional is broken.
func checkGuards(guards []config.Guard, args []byte) *guardViolation {
	if len(guards) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return &guardViolation{pointer: "", rule: "the arguments are not a JSON object"}
	}
	for i := range guards {
		g := &guards[i]
		v, found := lookupPointer(root, config.PointerTokens(g.Pointer))
		if !found {
			if g.Optional {
				continue
			}
			return &guardViolation{g.Pointer, "the argument is required by policy"}
		}
		if rule := breaks(g, v); rule != "" {
			return &guardViolation{g.Pointer, rule}
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
func breaks(g *config.Guard, v any) string {
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

// checkPolicy checks the policy against the tools a listing serves: a
// restrict guard whose pointer names no argument of its tool's schema
// fails the listing (it is a configuration error, and a guard that
// matches nothing must not pass for one that holds), and a tool the
// server hints is destructive but the operator did not declare is
// pointed out, since the hint is the server's word alone.
func (s *server) checkPolicy(tools []mcpwire.Tool) error {
	byName := make(map[string][]byte, len(tools))
	for _, t := range tools {
		byName[t.Name] = t.InputSchema
		if a := t.Annotations; a != nil && a.DestructiveHint != nil && *a.DestructiveHint && !s.cfg.IsDestructive(t.Name) {
			s.log.Info().Str("tool", t.Name).Msg("the server hints this tool is destructive; list it in destructive to require a grant that names it")
		}
	}
	if errs := s.cfg.CheckGuards(func(tool string) ([]byte, bool) { b, ok := byName[tool]; return b, ok }); len(errs) > 0 {
		return errs
	}
	return nil
}
