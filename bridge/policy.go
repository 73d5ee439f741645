package bridge

import (
	"maps"

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

// destructiveDecision applies the destructive tools of table t (the
// operator's list and the server's hints, table.destructive) to a call of
// tool on server under g (nil: the operator's authority, which declares
// the rule and is bound by it only as far as it chooses to call). It
// returns the decision, and whether the call may go on.
func destructiveDecision(t *table, g *Grant, server, tool string) (string, bool) {
	if !t.destructive[tool] {
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

// checkPolicy checks the policy against the tools a listing serves: a
// restrict guard whose pointer names no argument of its tool's schema
// fails the listing (it is a configuration error, and a guard that
// matches nothing must not pass for one that holds).
func checkPolicy(tools []mcpwire.Tool, conf *config.Server) error {
	byName := make(map[string][]byte, len(tools))
	for _, t := range tools {
		byName[t.Name] = t.InputSchema
	}
	if errs := conf.CheckGuards(func(tool string) ([]byte, bool) { b, ok := byName[tool]; return b, ok }); len(errs) > 0 {
		return errs
	}
	return nil
}

// noteHints records the tools listed marks destructiveHint: true, and
// returns every tool so marked since capbridge started. A server's hint
// that a tool is destructive can only make capbridge more careful, so it
// is honoured; its claim that a tool is not (the hint false, absent, or
// withdrawn in a later listing) is never trusted, so a hint once given
// stays for the life of the process, across re-listings and restarts.
//
// A dry call (a reload checking a policy) records and logs nothing: it
// returns what would be marked.
func (s *server) noteHints(listed []mcpwire.Tool, conf *config.Server, dry bool) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	hinted := s.hinted
	if dry {
		hinted = maps.Clone(hinted)
	}
	for _, t := range listed {
		if a := t.Annotations; a != nil && a.DestructiveHint != nil && *a.DestructiveHint && !hinted[t.Name] {
			if hinted == nil {
				hinted = map[string]bool{}
			}
			hinted[t.Name] = true
			switch {
			case dry:
			case conf.IsNotDestructive(t.Name):
				s.log.Info().Str("tool", clip(t.Name)).Msg("the server marks this tool destructive; not_destructive overrides it")
			case !conf.IsDestructive(t.Name):
				s.log.Info().Str("tool", clip(t.Name)).Msg("the server marks this tool destructive: only a grant that names it, or allows destructive tools, may call it (not_destructive overrides)")
			}
		}
	}
	if !dry {
		s.hinted = hinted
	}
	return maps.Clone(hinted)
}

// destructiveSet is the destructive tools of a listing: the operator's,
// and the server's hints (noteHints), less not_destructive.
func destructiveSet(hinted map[string]bool, conf *config.Server) map[string]bool {
	out := make(map[string]bool, len(conf.Destructive)+len(hinted))
	for _, name := range conf.Destructive {
		out[name] = true
	}
	for name := range hinted {
		if !conf.IsNotDestructive(name) {
			out[name] = true
		}
	}
	return out
}

// duplicateTool returns a name listed twice, or "".
func duplicateTool(listed []mcpwire.Tool) string {
	seen := make(map[string]bool, len(listed))
	for _, t := range listed {
		if seen[t.Name] {
			return t.Name
		}
		seen[t.Name] = true
	}
	return ""
}
