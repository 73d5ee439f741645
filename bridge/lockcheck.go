package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/telemetry"
	"github.com/capbridge/capbridge/mcpwire"
)

// lockPolicy is what a server's listings are held to: its entry of the
// lock (nil when the lock has none: every tool is then absent) and the
// mode. A nil *lockPolicy holds them to nothing.
type lockPolicy struct {
	entry *lock.Server
	mode  string // config.LockEnforce or config.LockWarn
}

// lockedTool turns a listed tool into its lock form: every member a
// model or program relies on, the annotations whole (a key the
// specification does not define yet is still the server's claim, and a
// change to it is still a change).
func lockedTool(t mcpwire.Tool) (*lock.Tool, error) {
	l := lock.Listed{Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Icons: t.Icons, Execution: t.Execution, Meta: t.Meta}
	if a := t.Annotations; a != nil {
		l.Annotations = a.Raw
		if l.Annotations == nil {
			b, err := json.Marshal(listedAnnotations{a.Title, a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint})
			if err != nil {
				return nil, err
			}
			l.Annotations = b
		}
	}
	return lock.NewTool(l)
}

// lockedServer locks a listing: the tools a server exposes after
// tools.allow and tools.deny, with the serverInfo it gave.
func lockedServer(info lock.Info, tools []mcpwire.Tool) (*lock.Server, error) {
	locked := make([]*lock.Tool, 0, len(tools))
	for _, t := range tools {
		lt, err := lockedTool(t)
		if err != nil {
			return nil, err
		}
		locked = append(locked, lt)
	}
	return lock.NewServer(info, locked)
}

// held applies the lock to tools (already filtered): it returns the
// tools to serve, the drift of each tool that differs from the lock,
// and the names the lock does not have. Under enforce a drifted tool is
// left out (withheld); under warn it is served. A tool the lock lacks is
// left out in both modes: absence is the lock's default.
func (p *lockPolicy) held(server string, tools []mcpwire.Tool) (serve []mcpwire.Tool, drift map[string][]lock.Drift, absent []string, err error) {
	if p == nil {
		return tools, nil, nil, nil
	}
	drift = map[string][]lock.Drift{}
	for _, t := range tools {
		var locked *lock.Tool
		if p.entry != nil {
			locked = p.entry.Tools[t.Name]
		}
		if locked == nil {
			absent = append(absent, t.Name)
			continue
		}
		live, err := lockedTool(t)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("locking tool %q: %w", t.Name, err)
		}
		if d := lock.CompareTool(server, locked, live); d != nil {
			drift[t.Name] = d
			if p.mode == config.LockEnforce {
				continue
			}
		}
		serve = append(serve, t)
	}
	return serve, drift, absent, nil
}

// driftClasses renders a tool's drift for a denial, status and logs:
// its classes, comma-separated, in CompareTool's order.
func driftClasses(d []lock.Drift) string {
	cs := make([]string, len(d))
	for i, x := range d {
		cs[i] = string(x.Class)
	}
	return strings.Join(cs, ",")
}

// reportDrift logs and audits what the lock did to one listing: each
// drifted tool (withheld or, under warn, served), and the tools the lock
// does not name. It is called on every listing, so a restart or a
// re-listing that brings drift is recorded each time.
func (s *server) reportDrift(ctx context.Context, p *lockPolicy, drift map[string][]lock.Drift, absent []string) {
	if p == nil {
		return
	}
	if p.entry == nil {
		s.log.Warn().Msg("the lock has no entry for this server: none of its tools is served; run capbridge lock to approve them")
	}
	action := "withheld"
	if p.mode == config.LockWarn {
		action = "served (lock_mode warn)"
	}
	for _, name := range slices.Sorted(maps.Keys(drift)) {
		d := drift[name]
		details := make([]string, len(d))
		for i, x := range d {
			details[i] = string(x.Class) + ": " + x.Detail
		}
		s.log.Warn().Str("tool", clip(name)).Str("drift", driftClasses(d)).Strs("detail", clipAll(details)).Str("action", action).
			Msg("tool differs from the lock; run capbridge skew to review it, capbridge lock to approve it")
		s.audit.Warn().Str("event", "lock_drift").Str("server", s.cfg().Name).Str("tool", clip(name)).
			Str("drift", driftClasses(d)).Str("action", action).Msg("tool differs from the lock")
		telemetry.Drift(ctx, s.cfg().Name, clip(name), driftClasses(d), action)
	}
	if len(absent) > 0 && p.entry != nil {
		s.log.Warn().Strs("tools", auditNames(absent)).Msg("tools the lock does not name are not served; run capbridge lock to approve them")
		s.audit.Warn().Str("event", "lock_absent").Str("server", s.cfg().Name).Strs("tools", auditNames(absent)).Msg("tools not in the lock")
	}
}

// Surface locks what each ready server lists now, after tools.allow and
// tools.deny and before any lock the bridge holds it to (what locking it
// would approve), with the serverInfo it gave at initialize: what
// capbridge lock writes and skew compares, from a bridge booted for the
// purpose or from a running one. A server that is not ready is left out,
// with the reason it is not.
func (b *Bridge) Surface() (map[string]*lock.Server, map[string]error) {
	out := map[string]*lock.Server{}
	var down map[string]error
	for _, s := range b.serverList() {
		name := s.name()
		t, err := s.ready()
		if err == nil {
			si := t.client.ServerInfo() // of either era: initialize's, or server/discover's _meta
			var ls *lock.Server
			if ls, err = lockedServer(lock.Info{Name: si.Name, Version: si.Version, Title: si.Title}, t.unlocked); err == nil {
				out[name] = ls
				continue
			}
		}
		if down == nil {
			down = map[string]error{}
		}
		down[name] = errors.New(s.unavailableMessage(err))
	}
	return out, down
}

// Dropped names, per ready server, the tools mcpwire left out of its last
// listing because their declaration breaks the server's revision (a
// 2026-07-28 tool whose x-mcp-header annotation is invalid), each with
// why: capbridge skew says so beside tool_removed, which is all a lock
// comparison can see.
func (b *Bridge) Dropped() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, s := range b.serverList() {
		t, err := s.ready()
		if err != nil || t.client == nil {
			continue
		}
		if d := t.client.Dropped(); len(d) > 0 {
			out[s.name()] = d
		}
	}
	return out
}
