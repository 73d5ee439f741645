package bridge

import (
	"testing"
)

func TestDestructiveDecision(t *testing.T) {
	tab := &table{destructive: map[string]bool{"rm": true}}
	every := &Grant{servers: map[string]map[string]bool{"s": nil}}
	named := &Grant{servers: map[string]map[string]bool{"s": {"rm": true}}}
	opted := &Grant{servers: map[string]map[string]bool{"s": nil}, allowDestructive: true}
	for _, c := range []struct {
		g    *Grant
		tool string
		want string
		ok   bool
	}{
		{every, "ls", "", true},
		{every, "rm", policyDestructiveRefuse, false},
		{named, "rm", policyDestructiveNamed, true},
		{opted, "rm", policyDestructiveOptIn, true},
		{nil, "rm", policyOperator, true},
	} {
		got, ok := destructiveDecision(tab, c.g, "s", c.tool)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.tool, got, ok, c.want, c.ok)
		}
	}
}
