package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/lock"
)

// A reload applies a changed configuration without a restart. Each
// server of the new one is compared with the one in force:
//
//   - added: it is created and boots; calls to it are refused
//     server_unavailable ("starting") until it is ready, as at boot;
//   - removed: it leaves the set (a call naming it is
//     unknown_capability), drains the calls it has, and retires;
//   - replaced (a setting of its process or its admission changed): a new
//     server boots beside it; once the new one's first attempt ends, it
//     takes the name and the old one drains and retires: make before
//     break, so calls to the server do not fail while it is replaced;
//   - changed (only its policy: tools, destructive, restrict, timeouts,
//     quotas, its lock entry): it keeps its process, and its live table
//     is rebuilt from the listing it kept, before the reload returns, so
//     the next call is held to the new policy;
//   - unchanged: untouched.
//
// Grants and connections survive: a grant names servers, not processes.
// A configuration that does not validate (the reader's errors, a secret
// reference that does not resolve, a [bridge] setting that needs a
// restart, a policy that does not fit a running server's tools) is
// refused whole, and nothing changes.

// ErrNoReload is a reload of a bridge that has no configuration to read
// again (Options.Reload is nil).
var ErrNoReload = errors.New("bridge: this capbridge has no configuration file to read again")

// Reload reads the configuration again (Options.Reload) and applies it;
// trigger says who asked ("control", "watch"), for the audit line and
// status. A configuration that is refused is a *control.Error coded
// bad_config, and the running one stays.
func (b *Bridge) Reload(ctx context.Context, trigger string) (*control.Reloaded, error) {
	if b.reloader == nil {
		return nil, &control.Error{Code: control.CodeBadConfig, Message: ErrNoReload.Error()}
	}
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	r, err := b.reload(ctx, trigger)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "bridge: ")
		b.lastReload.Store(&control.Reloaded{AtMS: time.Now().UnixMilli(), Trigger: trigger, Error: msg})
		b.audit.Warn().Str("event", "reload").Str("trigger", trigger).Str("error", msg).Msg("reload refused; the running configuration stays")
		b.log.Error().Str("trigger", trigger).Str("error", msg).Msg("reload refused; the running configuration stays")
		return nil, &control.Error{Code: control.CodeBadConfig, Message: msg}
	}
	b.lastReload.Store(r)
	b.audit.Info().Str("event", "reload").Str("trigger", trigger).Strs("added", r.Added).Strs("removed", r.Removed).
		Strs("replaced", r.Replaced).Strs("changed", r.Changed).Strs("unchanged", r.Unchanged).Bool("defaults", r.Defaults).Msg("configuration reloaded")
	b.log.Info().Str("trigger", trigger).Strs("added", r.Added).Strs("removed", r.Removed).Strs("replaced", r.Replaced).
		Strs("changed", r.Changed).Msg("configuration reloaded")
	return r, nil
}

// plan is what a reload will do to each server.
type plan struct {
	added, replaced, changed []config.Server
	removed                  []*server
	unchanged                []string
	locks                    map[string]*lockPolicy // each server of the new config's lock policy
}

func (b *Bridge) reload(ctx context.Context, trigger string) (*control.Reloaded, error) {
	if b.ctx.Err() != nil {
		return nil, errors.New("bridge: capbridge is shutting down")
	}
	cfg, lf, err := b.reloader()
	if err != nil {
		return nil, err
	}
	old := b.live.Load()
	if err := sameBridge(old, cfg); err != nil {
		return nil, err
	}
	p, err := b.plan(old, cfg, lf)
	if err != nil {
		return nil, err
	}
	if b.onSecrets != nil {
		// Before anything of the new configuration runs: its secrets, and
		// those of every server that may still be running: the old
		// configuration's, and those an earlier reload took out of the set
		// that still drain. A secret rotated keeps its earlier value: the
		// server that was given it drains with it.
		all := Secrets(cfg)
		for _, s := range old.Servers {
			addSecrets(all, s)
		}
		for _, s := range b.outsiders() {
			addSecrets(all, *s.cfg())
		}
		b.onSecrets(all)
	}
	// Policy first: it cannot fail now (the plan built each table dry),
	// and the servers keep their processes.
	var errs []error
	for _, c := range p.changed {
		if err := b.srv(c.Name).repolicy(&c, p.locks[c.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	// New servers boot; a replacement waits for its first attempt before
	// it takes over, so its name never answers "starting". Until they are
	// in the set, Shutdown finds them among the servers outside it.
	fresh := map[string]*server{}
	for _, c := range append(slices.Clip(p.added), p.replaced...) {
		fresh[c.Name] = b.newServer(c, p.locks[c.Name])
	}
	if !b.outsideSet(fresh) {
		return nil, errors.New("bridge: capbridge is shutting down")
	}
	for _, s := range fresh {
		s.begin()
	}
	for _, c := range p.replaced {
		select {
		case <-fresh[c.Name].firstDone:
		case <-ctx.Done():
		case <-b.ctx.Done():
		}
	}
	// The new set, in the new configuration's order.
	next := make([]*server, 0, len(cfg.Servers))
	for _, c := range cfg.Servers {
		if s := fresh[c.Name]; s != nil {
			next = append(next, s)
		} else {
			next = append(next, b.srv(c.Name))
		}
	}
	prev := b.set.Load()
	outgoing := slices.Clone(p.removed)
	for _, c := range p.replaced {
		outgoing = append(outgoing, prev.byName[c.Name])
	}
	b.mu.Lock()
	if b.closing {
		// Shutdown began meanwhile: it retires what booted, which it
		// found outside the set, with the rest.
		b.mu.Unlock()
		return nil, errors.New("bridge: capbridge is shutting down")
	}
	b.set.Store(newServerSet(next))
	b.live.Store(cfg)
	for _, s := range fresh {
		delete(b.outside, s)
	}
	for _, s := range outgoing {
		b.outside[s] = true
		// Started under mu while not closing: Shutdown, which sets
		// closing under mu before it waits for the drainers, waits for
		// every one.
		b.drainers.Go(func() { b.drainAndRetire(s) })
	}
	b.mu.Unlock()
	r := &control.Reloaded{AtMS: time.Now().UnixMilli(), Trigger: trigger, Unchanged: p.unchanged, Defaults: old.Quota != cfg.Quota}
	for _, l := range []struct {
		dst *[]string
		src []config.Server
	}{{&r.Added, p.added}, {&r.Replaced, p.replaced}, {&r.Changed, p.changed}} {
		for _, c := range l.src {
			*l.dst = append(*l.dst, c.Name)
		}
	}
	for _, s := range p.removed {
		r.Removed = append(r.Removed, s.name())
	}
	if len(errs) > 0 {
		// Applied, with a server that will take its policy late: said in
		// the logs, not a refusal, since the rest has changed.
		b.log.Warn().Err(errors.Join(errs...)).Msg("reload applied; a server takes its new policy late")
	}
	return r, nil
}

// plan compares cfg with old server by server, and builds each changed
// policy against the server's current listing, dry, so that a policy
// that does not fit (a guard naming no argument, --strict's unmatched
// entries) refuses the reload before anything changes.
func (b *Bridge) plan(old, cfg *config.Config, lf *lock.File) (*plan, error) {
	p := &plan{locks: map[string]*lockPolicy{}}
	was := map[string]config.Server{}
	for _, s := range old.Servers {
		was[s.Name] = s
	}
	var errs []error
	for _, c := range cfg.Servers {
		if lf != nil {
			p.locks[c.Name] = &lockPolicy{entry: lf.Servers[c.Name], mode: cfg.Bridge.LockMode}
		}
		prev, ok := was[c.Name]
		delete(was, c.Name)
		s := b.srv(c.Name)
		switch {
		case !ok || s == nil:
			p.added = append(p.added, c)
		case !reflect.DeepEqual(processOf(prev), processOf(c)):
			p.replaced = append(p.replaced, c)
		case !reflect.DeepEqual(policyOf(prev), policyOf(c)) || !sameLock(s.lock.Load(), p.locks[c.Name]):
			p.changed = append(p.changed, c)
			if t := s.current(); t != nil {
				if _, err := s.build(context.Background(), t.client, t.raw, &c, p.locks[c.Name], true); err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: [mcp.%s]: the new policy does not fit the server's tools: %w", c.File, c.Line, c.Name, err))
				}
			}
		default:
			p.unchanged = append(p.unchanged, c.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(was)) {
		if s := b.srv(name); s != nil {
			p.removed = append(p.removed, s)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// processOf is what of a server's configuration its process and its
// admission depend on: a change to any of it replaces the server.
// Everything else is policy (policyOf) or where it was written.
func processOf(s config.Server) config.Server {
	return config.Server{
		Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, InheritEnv: s.InheritEnv, Cwd: s.Cwd,
		StartupTimeout: s.StartupTimeout, Restart: s.Restart, RestartBackoff: s.RestartBackoff, RestartMax: s.RestartMax,
		MaxInflight: s.MaxInflight, MaxQueue: s.MaxQueue, MaxInflightPerGrant: s.MaxInflightPerGrant, MaxQueuePerGrant: s.MaxQueuePerGrant,
		Remote: s.Remote,
	}
}

// policyOf is what of a server's configuration a call is held to, which
// a reload changes in place.
func policyOf(s config.Server) config.Server {
	return config.Server{
		ToolsAllow: s.ToolsAllow, ToolsDeny: s.ToolsDeny, StderrToCaller: s.StderrToCaller,
		Destructive: s.Destructive, NotDestructive: s.NotDestructive, Restrict: s.Restrict, Strict: s.Strict,
		CallTimeout: s.CallTimeout, MaxCallTimeout: s.MaxCallTimeout, CancelGrace: s.CancelGrace,
		Quota: s.Quota, ToolQuotas: s.ToolQuotas,
	}
}

// sameLock reports whether two lock policies hold a server to the same
// entry in the same mode.
func sameLock(a, b *lockPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.mode == b.mode && reflect.DeepEqual(a.entry, b.entry)
}

// sameBridge refuses a [bridge] change other than the lock's: the
// sockets, the budgets and the logs are the running process's, which
// only a restart changes.
func sameBridge(old, cfg *config.Config) error {
	a, c := old.Bridge, cfg.Bridge
	a.Lock, a.LockMode, c.Lock, c.LockMode = "", "", "", ""
	if reflect.DeepEqual(a, c) {
		return nil
	}
	va, vc := reflect.ValueOf(a), reflect.ValueOf(c)
	var keys []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vc.Field(i).Interface()) {
			keys = append(keys, snake(va.Type().Field(i).Name))
		}
	}
	return fmt.Errorf("bridge: [bridge] %s changed, which takes a restart (only lock and lock_mode reload); put it back, or restart capbridge", strings.Join(keys, ", "))
}

// snake is a Go field name as its capbridge.toml key: MaxConnsPerUID is
// max_conns_per_uid, AllowedUIDs allowed_uids (an acronym's plural s
// stays with it).
func snake(name string) string {
	r := []rune(name)
	upper := func(i int) bool { return i < len(r) && unicode.IsUpper(r[i]) }
	var b strings.Builder
	for i, c := range r {
		if i > 0 && upper(i) {
			prevLower := !upper(i - 1)
			acronymEnds := upper(i-1) && i+1 < len(r) && !upper(i+1) && !(r[i+1] == 's' && (i+2 == len(r) || upper(i+2)))
			if prevLower || acronymEnds {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// newServer creates the server of cfg held to lp (nil: no lock), with
// its series; it starts nothing.
func (b *Bridge) newServer(cfg config.Server, lp *lockPolicy) *server {
	s := newServer(cfg, b.rawLog, b.audit, b.bootOpts, b.progress)
	s.lock.Store(lp)
	if b.metrics != nil {
		s.metrics = b.metrics.seriesFor(cfg.Name, cfg.Remote != nil)
	}
	return s
}

// outsideSet records servers Shutdown must retire that are not in the
// set in force, unless the bridge is closing (false: nothing recorded).
func (b *Bridge) outsideSet(fresh map[string]*server) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	if b.outside == nil {
		b.outside = map[*server]bool{}
	}
	for _, s := range fresh {
		b.outside[s] = false
	}
	return true
}

// outsiders are the servers outside the set: booting before they join
// it, or draining after a reload took them out.
func (b *Bridge) outsiders() []*server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Collect(maps.Keys(b.outside))
}

// drainAndRetire retires s, which a reload took out of the set, once
// its calls are done: at most its max_call_timeout and cancel_grace
// after the reload, which is as long as a call entered before it may
// take. Shutdown, if it comes first, has it retired at once, as it does
// every server once its calls are done or its grace is over.
func (b *Bridge) drainAndRetire(s *server) {
	drained := s.drain()
	bound := time.NewTimer(s.cfg().MaxCallTimeout + s.cfg().CancelGrace)
	defer bound.Stop()
	select {
	case <-drained:
	case <-bound.C:
		s.log.Warn().Msg("calls still running when the reload's drain bound passed; they end with the server")
	case <-b.ctx.Done():
	}
	exit, err := s.retire()
	ev := s.log.Info()
	if err != nil {
		ev = s.log.Error().Err(err)
	}
	ev.Str("exit", exit.Status).Msg("server retired after a reload")
	b.audit.Info().Str("event", "reload_retired").Str("server", s.name()).Str("exit", exit.Status).Msg("server retired after a reload")
	b.mu.Lock()
	delete(b.outside, s)
	b.mu.Unlock()
}

// drainingLocked is each server a reload took out of the set that has
// yet to retire, by name; the caller holds mu. Servers booting for a
// reload are outside the set too, but not draining.
func (b *Bridge) drainingLocked() []*server {
	var out []*server
	for s, taken := range b.outside {
		if taken {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y *server) int { return strings.Compare(x.name(), y.name()) })
	return out
}

// retirees is every server Shutdown retires: those in force, and those
// outside the set: booting for a reload, or draining after one.
func (b *Bridge) retirees() []*server {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.serverList())
	for s := range b.outside {
		out = append(out, s)
	}
	return out
}
