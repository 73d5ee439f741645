package bridge

import "github.com/capbridge/capbridge/capwire"

// serverSet is the configured servers at one moment: a reload publishes
// a new one whole (reload.go), and a call reads the set in force with
// one atomic load. A set is never modified once published.
type serverSet struct {
	byName map[string]*server
	order  []*server // configuration order (by name)
}

func newServerSet(servers []*server) *serverSet {
	set := &serverSet{byName: make(map[string]*server, len(servers)), order: servers}
	for _, s := range servers {
		set.byName[s.name()] = s
	}
	return set
}

// lookup returns the server called name in the set in force.
func (b *Bridge) lookup(name string) (*server, bool) {
	s, ok := b.set.Load().byName[name]
	return s, ok
}

// srv is lookup's server, nil when there is none.
func (b *Bridge) srv(name string) *server {
	s, _ := b.lookup(name)
	return s
}

// serverList is the servers in force, in configuration order.
func (b *Bridge) serverList() []*server { return b.set.Load().order }

// enter enters s, the server name looked up to, for a call (server.enter),
// or returns the call's denial. If a reload took s out of the set meanwhile, the
// server in force under name (its replacement) takes the call. The
// caller calls leave on the server returned once the call is done.
func (b *Bridge) enter(name string, s *server) (*server, *table, *outcome) {
	t, err := s.enter()
	if err == errDraining {
		var ok bool
		if s, ok = b.lookup(name); !ok {
			o := deny(capwire.CodeUnknownCapability, "no MCP server is called "+quote(name)+" (a reload removed it)")
			return nil, nil, &o
		}
		t, err = s.enter()
	}
	switch {
	case err == errDraining:
		// Replaced twice while the call looked it up.
		o := deny(capwire.CodeServerUnavailable, "server "+quote(name)+" is being replaced by a reload; try again")
		return nil, nil, &o
	case err != nil:
		o := deny(capwire.CodeServerUnavailable, s.unavailableMessage(err))
		return nil, nil, &o
	}
	return s, t, nil
}
