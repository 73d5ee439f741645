package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/auditlog"
	"github.com/capbridge/capbridge/bridge/internal/capserver"
	"github.com/capbridge/capbridge/bridge/internal/fairshare"
	"github.com/capbridge/capbridge/bridge/internal/unixsock"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/telemetry"
	"github.com/capbridge/capbridge/mcpwire"
)

// Options configure a Bridge beyond its config file.
type Options struct {
	Config *config.Config
	// Log receives operational logs; Audit receives one line per
	// connection and per call (see auditCall). Either may be zerolog.Nop().
	Log, Audit zerolog.Logger
	// AuditWriter, when set, is where Audit's lines go instead of Audit's
	// own writer, in batches: lines are gathered and written when 64 KiB
	// are waiting or 5 ms after the first, and Shutdown writes the rest.
	// A line then costs a copy, not a write system call, which at one
	// line per call is most of what the audit trail costs. It must take
	// several lines in one Write (zerolog's ConsoleWriter does not),
	// unless AuditWriteThrough is set. A write to it that fails is
	// counted and logged, and under audit_fail = "closed" stops the calls
	// until a write succeeds (audit.go).
	AuditWriter io.Writer
	// AuditWriteThrough writes each audit line to AuditWriter as it
	// comes, for a writer that takes one line per Write.
	AuditWriteThrough bool
	// ClientVersion is sent as clientInfo.version to every server.
	ClientVersion string
	// Cgroups, when set, runs each server in a cgroup of its own (see
	// mcpwire.Command.Cgroups). The caller closes it after Shutdown.
	Cgroups *mcpwire.Cgroups
	// TokenDir is where capbridge login saves remote servers' logins
	// (by default $XDG_STATE_HOME/capbridge/oauth); "" uses none, and a
	// server that needs a login is needs_login.
	TokenDir string
	// Progress, when set, is called on every change of a server's state
	// (starting, ready, failed, dead, backoff), from the server's own
	// supervisor: it must not block, and may be called concurrently for
	// different servers.
	Progress func(Progress)
	// Lock, when set, is the lock every server's listings are held to
	// (lockcheck.go), in Config.Bridge.LockMode. A server the lock has
	// no entry for serves no tools.
	Lock *lock.File
	// Tracer, when not nil, records the calls' and servers' spans
	// (trace.go); Shutdown flushes it, within its own bound, and shuts it
	// down. Nil: traces are off, and cost the call path nothing.
	Tracer *telemetry.Tracer

	// Reload, when set, reads the configuration again for a reload (the
	// control plane's reload, serve --watch): the files serve read, with
	// serve's overrides applied and the secret references resolved, and
	// the lock (nil: none). Nil: the bridge has no configuration to read
	// again, and a reload is refused.
	Reload func() (*config.Config, *lock.File, error)
	// Secrets, when set, is told the secrets of a reloaded configuration
	// together with those of the one it replaces (whose servers may still
	// be draining), before any server of it starts: serve's SecretWriters.
	Secrets func(map[string]string)

	// now is the clock grants and their quotas read (time.Now when
	// nil): the package's tests set it to step a rate's refill.
	now func() time.Time
}

// Bridge is the running service. New prepares it; Listen opens the
// sockets; Start (or Boot, which also waits for each server's first
// attempt) starts the servers; Serve accepts until Shutdown. Listen and
// Serve may come before the servers are ready: a call to a server that
// is not is refused server_unavailable.
//
// Concurrency: the set of servers is published whole, by New and by each
// reload, and read with one atomic load; each server guards its own
// state and table, the grant table and the connection set have their
// own.
// Shutdown may be called from any goroutine, once.
type Bridge struct {
	cfg   *config.Config
	log   zerolog.Logger
	audit zerolog.Logger
	// auditOut batches audit's lines when Options.AuditWriter is set;
	// Shutdown flushes it. Nil otherwise.
	auditOut *auditlog.Batch
	// auditClosed is audit_fail = "closed": no call while the trail
	// cannot be written or under a grant whose audit budget is spent.
	auditClosed bool
	// strangerAudit rate-limits audit's lines that no grant pays for
	// (audit.go).
	strangerAudit *auditlog.Limiter
	ver           string
	// logs rate-limits log per message (refused connections, chiefly);
	// Shutdown flushes its counts.
	logs *auditlog.Limiter

	// ctx is the service's lifetime: grants (and so connections and
	// calls) derive from it. stop cancels it with errShuttingDown.
	ctx  context.Context
	stop context.CancelCauseFunc

	// set is the servers in force; a reload replaces it whole.
	set atomic.Pointer[serverSet]
	// live is the configuration in force: its servers and the grants'
	// default quotas. cfg.Bridge is the boot's, which a reload may not
	// change (but for the lock).
	live atomic.Pointer[config.Config]
	// What a reload needs: the loader, the secrets hook, how servers are
	// built, one reload at a time, the last one's outcome; the servers
	// outside the set (booting before they join it, or taken out of it and
	// draining their calls before they retire: Shutdown retires them too),
	// and the drainers.
	reloader   func() (*config.Config, *lock.File, error)
	onSecrets  func(map[string]string)
	bootOpts   bootOptions
	progress   func(Progress)
	rawLog     zerolog.Logger
	reloadMu   sync.Mutex
	lastReload atomic.Pointer[control.Reloaded]
	outside    map[*server]bool // guarded by mu; true: taken out of the set by a reload, draining
	drainers   sync.WaitGroup
	grants     *grantTable
	started    startedCalls      // calls programs started, to collect later
	flight     *fairshare.Flight // every call admitted and not yet retired
	workers    workerPool        // runs every call connection's calls
	metrics    *metrics
	tracer     *telemetry.Tracer // nil: traces off

	callL, ctlL *unixsock.Listener
	// acceptors counts the accept loops. Serve adds to it, under mu and
	// only while the bridge is not closing, so Shutdown, which sets
	// closing under mu first, waits for exactly the loops that started.
	acceptors sync.WaitGroup

	mu      sync.Mutex
	open    map[net.Conn]struct{} // every live connection, both sockets
	ctlOpen int                   // how many of them are control connections
	calls   callConns             // the call socket's budgets (admit.go)
	closing bool
	// connsIdle is closed once closing is set and open is empty: the
	// last connection to end closes it (or Shutdown, if none is open).
	connsIdle chan struct{}
	idleOnce  sync.Once

	// partial bounds the bytes held for partial frames on every call
	// connection (max_partial_bytes).
	partial  *capserver.Budget
	refusals refusals
	// lingering counts refused connections held for their peer to read
	// why (refuseAtAccept); lingerWG waits for them.
	lingering atomic.Int64
	lingerWG  sync.WaitGroup
	// metricsOpen counts the metrics listener's open connections.
	metricsOpen atomic.Int64
	// reportStop ends the refusal reporter that Serve starts; Shutdown
	// closes it and waits on reported.
	reportStop chan struct{}
	reported   sync.WaitGroup
	// startedCalls are the goroutines of started calls (async.go): each
	// audits and traces its call after answering its collectors, so
	// Shutdown waits for them before it closes the trail and the
	// exporter. The grants' end cancels them.
	startedCalls sync.WaitGroup
}

// New prepares a bridge for cfg. It starts nothing: the census of servers
// is published (Servers) before any process exists.
func New(o Options) *Bridge {
	ctx, stop := context.WithCancelCause(context.Background())
	b := &Bridge{
		cfg: o.Config, log: o.Log, audit: o.Audit, ver: o.ClientVersion,
		ctx: ctx, stop: stop,
		grants:     newGrantTable(),
		flight:     fairshare.NewFlight(),
		open:       map[net.Conn]struct{}{},
		calls:      newCallConns(),
		connsIdle:  make(chan struct{}),
		partial:    capserver.NewBudget(o.Config.Bridge.MaxPartialBytes),
		reportStop: make(chan struct{}),
		tracer:     o.Tracer,
	}
	if o.now != nil {
		b.grants.now = o.now
	}
	b.log, b.logs = auditlog.Limit(o.Log)
	if o.Config.Bridge.AuditGrantBudget <= 0 {
		o.Config.Bridge.AuditGrantBudget = config.DefaultAuditGrantBudget
	}
	b.auditClosed = auditClosedMode(o.Config)
	if o.AuditWriter != nil {
		size := auditlog.BatchBytes
		if o.AuditWriteThrough {
			size = 0
		}
		b.auditOut = auditlog.NewBatch(o.AuditWriter, size, auditlog.BatchDelay)
		b.auditOut.OnLost = b.auditLost
		b.audit = o.Audit.Output(b.auditOut)
	}
	_, b.strangerAudit = auditlog.Limit(b.audit)
	b.strangerAudit.OnDrop = func() { b.metrics.auditLost(lostRate, 1) }
	bo := bootOptions{clientName: "capbridge", clientVersion: o.ClientVersion, surfaceBudget: o.Config.Bridge.SurfaceBudget, maxLine: o.Config.Bridge.MaxFrame, cgroups: o.Cgroups, tokenDir: o.TokenDir, tracer: o.Tracer}
	b.bootOpts, b.progress, b.rawLog = bo, o.Progress, o.Log
	b.reloader, b.onSecrets = o.Reload, o.Secrets
	b.live.Store(o.Config)
	servers := make([]*server, 0, len(o.Config.Servers))
	for _, s := range o.Config.Servers {
		var lp *lockPolicy
		if o.Lock != nil {
			lp = &lockPolicy{entry: o.Lock.Servers[s.Name], mode: o.Config.Bridge.LockMode}
		}
		servers = append(servers, b.newServer(s, lp))
	}
	b.set.Store(newServerSet(servers))
	b.metrics = newMetrics(b)
	return b
}

// Start starts every server's supervisor, in parallel, and returns at
// once: each server becomes callable when it is ready, and is restarted
// as its restart policy says. It is idempotent; after Shutdown it starts
// nothing.
func (b *Bridge) Start() {
	for _, s := range b.serverList() {
		s.begin()
	}
}

// Boot starts every server (Start) and waits until each one's first
// attempt has ended, or ctx is done, so boot takes as long as the slowest
// server rather than the sum. It returns each one's outcome in config
// order: StateReady, or StateFailed with the reason and the stderr tail,
// or, for a server still booting when ctx ended, StateStarting. A failed
// server is restarted as its restart policy says; the outcome is the
// first attempt's.
func (b *Bridge) Boot(ctx context.Context) []Outcome {
	b.Start()
	servers := b.serverList()
	out := make([]Outcome, 0, len(servers))
	for _, s := range servers {
		name := s.name()
		select {
		case <-s.firstDone:
		case <-ctx.Done():
		}
		s.mu.Lock()
		st := s.first
		if !s.firstSet {
			st = Status{State: StateStarting}
		}
		s.mu.Unlock()
		out = append(out, Outcome{Name: name, Status: st})
	}
	return out
}

// Listen opens the call socket (mode and group from the config) and the
// control socket (always 0600: it grants authority). Nothing is accepted
// until Serve; Shutdown closes the sockets whether or not Serve ran.
func (b *Bridge) Listen() error {
	gid := -1
	if g := b.cfg.Bridge.CallSocketGroup; g != "" {
		n, err := lookupGroup(g)
		if err != nil {
			return err
		}
		gid = n
	}
	call, err := unixsock.Listen(b.cfg.Bridge.CallSocket, b.cfg.Bridge.CallSocketMode, gid)
	if err != nil {
		return err
	}
	ctl, err := unixsock.Listen(b.cfg.Bridge.ControlSocket, 0o600, -1)
	if err != nil {
		call.Close()
		return err
	}
	b.callL, b.ctlL = call, ctl
	return nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("bridge: call_socket_group %q: %w", name, err)
	}
	return strconv.Atoi(g.Gid)
}

// Serve accepts connections on both sockets, which Listen opened, until
// Shutdown. It returns once both accept loops have stopped, at once if
// Shutdown came first.
func (b *Bridge) Serve() {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return
	}
	b.acceptors.Add(2)
	b.reported.Add(1)
	b.mu.Unlock()
	go b.reportRefusals(b.reportStop, &b.reported)
	go b.accept(b.callL, b.admitCall)
	go b.accept(b.ctlL, b.admitControl)
	b.acceptors.Wait()
}

// maxControlConns bounds the control socket's connections. It is a
// budget of its own: jailed programs can fill max_connections on the call
// socket, and must not thereby lock the harness out of grant and revoke.
const maxControlConns = 64

// accept hands every connection l accepts to admit until l is closed.
func (b *Bridge) accept(l *unixsock.Listener, admit func(*net.UnixConn)) {
	defer b.acceptors.Done()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: back off rather than spin, and keep
			// serving the connections we have.
			b.log.Error().Err(err).Msg("accept failed")
			select {
			case <-time.After(100 * time.Millisecond):
				continue
			case <-b.ctx.Done():
				return
			}
		}
		admit(c)
	}
}

// admitCall admits a call-socket connection: its peer's credentials are
// read now, a uid outside allowed_uids is refused before it costs
// anything, and the connection joins the strangers' budget (admit.go).
func (b *Bridge) admitCall(c *net.UnixConn) {
	peer, err := unixsock.ReadPeerCred(c)
	if err != nil {
		b.refusals.cred.Add(1)
		b.metrics.connRefused(false, "peer")
		b.refuseAtAccept(c, capwire.CodeBadToken, "capbridge could not identify this peer")
		return
	}
	if !uidAllowed(b.cfg.Bridge.AllowedUIDs, peer.UID) {
		b.refusals.uid.Add(1)
		b.metrics.connRefused(false, "peer")
		b.refuseAtAccept(c, capwire.CodeBadToken, "this user may not use capbridge's call socket")
		return
	}
	s := b.trackStranger(c, peer.UID)
	if s == nil {
		b.metrics.trackRefused(false, true)
		c.Close()
		return
	}
	b.metrics.connAccepted(false)
	// The goroutine is the connection's first worker; Shutdown waits for
	// the connection through connsIdle, which its untrack may close.
	go b.serveCallConn(c, peer, s, func() { b.untrackCall(s) })
}

// admitControl admits a control-socket connection within its own
// budget.
func (b *Bridge) admitControl(c *net.UnixConn) {
	if ok, closing := b.trackControl(c); !ok {
		if closing {
			c.Close()
			return
		}
		// The socket buffer is empty: the write does not wait.
		control.Refuse(c, &control.Error{Code: control.CodeBusy, Message: fmt.Sprintf("capbridge has %d control connections open, as many as it allows; close one (a harness may keep one for its life) and try again", maxControlConns)}, time.Second)
		return
	}
	go func() {
		defer b.untrackControl(c)
		b.serveControlConn(c)
	}()
}

// trackControl admits a control connection unless the bridge is closing
// or maxControlConns are open; it says which refused it.
func (b *Bridge) trackControl(c net.Conn) (ok, closing bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing || b.ctlOpen >= maxControlConns {
		b.metrics.trackRefused(true, b.closing)
		if !b.closing {
			b.log.Warn().Int("limit", maxControlConns).Msg("refusing a control connection: at the socket's connection limit")
		}
		return false, b.closing
	}
	b.open[c] = struct{}{}
	b.metrics.connAccepted(true)
	b.ctlOpen++
	return true, false
}

func (b *Bridge) untrackControl(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, c)
	b.ctlOpen--
	b.signalConnsIdle()
}

// signalConnsIdle closes connsIdle if the bridge is closing and no
// connection is left. The caller holds mu.
func (b *Bridge) signalConnsIdle() {
	if b.closing && len(b.open) == 0 {
		b.idleOnce.Do(func() { close(b.connsIdle) })
	}
}

// Shutdown stops the service, in this order:
//
//  1. No new call is admitted (later calls, even on open connections, are
//     refused shutting_down) and no new connection is accepted; the
//     sockets are removed.
//  2. The calls in flight get up to grace to finish: Shutdown moves on as
//     soon as the last one retires, or when grace runs out.
//  3. Whatever still runs is cancelled with cause shutting_down (which
//     reaches every call through grant, connection and call contexts),
//     every grant ends, and every connection stops reading.
//  4. Each connection closes once its remaining replies are written. A
//     client that does not read is cut off by its writer's own deadline
//     (write_timeout); should a connection still be open after grace
//     plus twice that, Shutdown closes it outright.
//  5. Every server is retired in parallel with mcpwire's bounded sequence.
//  6. The audit lines still batched are written (later ones are written
//     at once).
//
// It returns an error naming every server whose exit could not be
// confirmed. Shutdown may be called without Listen or Serve, and once.
func (b *Bridge) Shutdown(grace time.Duration) error {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	return b.shutdown(timer.C, grace+2*b.cfg.Bridge.WriteTimeout)
}

// shutdown is Shutdown with the end of the grace period given as a
// channel (which tests close when they choose) and connBound, how long
// after it the connections may take to close before they are closed
// outright.
func (b *Bridge) shutdown(graceOver <-chan time.Time, connBound time.Duration) error {
	callsIdle := b.flight.Drain()
	b.mu.Lock()
	b.closing = true
	b.signalConnsIdle()
	b.mu.Unlock()
	if b.callL != nil {
		b.callL.Close()
		b.ctlL.Close()
	}
	b.acceptors.Wait()
	close(b.reportStop)

	select {
	case <-callsIdle:
	case <-graceOver:
	}
	b.stop(errShuttingDown)
	b.grants.closeAll(errShuttingDown)
	b.eachConn(func(c net.Conn) {
		// Closing the read side unblocks each read loop; each
		// connection's own goroutine then waits for its calls' replies
		// and closes. A control connection closes on b.ctx itself.
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseRead()
		}
	})
	if !within(b.connsIdle, connBound) {
		// Every connection is bounded by its writer's deadline, so this
		// is a backstop: the replies left are lost, the goroutines end.
		b.log.Error().Msg("connections still open after the shutdown bound; closing them")
		b.eachConn(func(c net.Conn) { _ = c.Close() })
		<-b.connsIdle
	}
	// No connection is left to hand the workers a call.
	b.workers.close()

	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range b.retirees() {
		wg.Go(func() {
			if _, err := s.retire(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("server %q: %w", s.name(), err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.drainers.Wait()
	b.startedCalls.Wait()
	b.lingerWG.Wait()
	b.reported.Wait()
	if b.auditOut != nil {
		if err := b.auditOut.Close(); err != nil {
			b.log.Error().Err(err).Msg("writing the audit trail")
		}
	}
	if err := b.tracer.Shutdown(); err != nil {
		b.log.Error().Err(err).Msg("traces not sent at shutdown are lost")
	}
	b.logs.Flush()
	return errors.Join(errs...)
}

// within waits until done is closed or d has passed, and reports whether
// done was closed. It leaves nothing running behind it.
func within(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// eachConn calls f for every open connection, under mu.
func (b *Bridge) eachConn(f func(net.Conn)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.open {
		f(c)
	}
}

// Servers lists the configured servers in name order.
func (b *Bridge) Servers() []string {
	var names []string
	for _, s := range b.serverList() {
		names = append(names, s.name())
	}
	return names
}

// Grant issues a grant; it is what the control plane's grant calls.
func (b *Bridge) Grant(spec GrantSpec) (*Grant, string, error) {
	for name, tools := range spec.Servers {
		s, ok := b.lookup(name)
		if !ok {
			return nil, "", fmt.Errorf("bridge: no server is called %q", name)
		}
		t := s.current()
		for _, tool := range tools {
			if t != nil && !hasTool(t, tool) {
				return nil, "", fmt.Errorf("bridge: server %q has no tool %q", name, tool)
			}
		}
		if spec.seen == nil {
			spec.seen = map[string]*table{}
		}
		spec.seen[name] = t
	}
	// The operator's default quotas, with the request's set over them.
	spec.Quotas = b.live.Load().GrantQuotas(slices.Collect(maps.Keys(spec.Servers)), spec.Quotas)
	g, token, err := b.metrics.granted(b.grants.issue(b.ctx, spec))
	if err == nil {
		// Before the token is handed out, so before any line of the
		// grant's.
		g.auditLeft.Store(int64(b.cfg.Bridge.AuditGrantBudget))
		b.auditEnded(g)
	}
	return g, token, err
}

// Revoke ends a grant by id or token.
func (b *Bridge) Revoke(idOrToken string) bool { return b.grants.revoke(idOrToken) != nil }

// CallSocket and ControlSocket return the socket paths in use.
func (b *Bridge) CallSocket() string    { return b.cfg.Bridge.CallSocket }
func (b *Bridge) ControlSocket() string { return b.cfg.Bridge.ControlSocket }
