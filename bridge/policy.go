package bridge

import (
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
