package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/argcheck"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/mcpauth"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/mcpwire"
)

// table is one published listing of a server: the client it was listed
// from, the callable tools (after tools.allow and tools.deny), and the
// façade generated from them. A table is immutable once published; a
// re-listing or a restart publishes a new one, so a call keeps the table
// it started with, and a grant can compare the table it was issued
// against with the live one.
type table struct {
	client *mcpwire.Client
	tools  map[string]mcpwire.Tool
	listed []mcpwire.Tool // the same tools, in the server's order
	// unlocked is the listing after tools.allow and tools.deny, before
	// the lock: what locking the server would approve (Surface).
	unlocked []mcpwire.Tool
	gen      *codegen.Generated
	all      int // how many tools the server listed, before the filters
	// drift is each tool that differs from the lock, by its drift
	// classes: withheld (absent from tools) under enforce, served under
	// warn. Nil without a lock.
	drift map[string]string
	// checks are the input schemas the bridge checks arguments against
	// before forwarding, by tool: those argcheck can judge exactly,
	// compiled when the table is built. A table of more than eagerChecks
	// tools has lazy instead, and compiles a tool's on its first call.
	checks map[string]*argcheck.Schema
	lazy   *lazyChecks
	// destructive is every tool a grant must name, or allow destructive
	// tools, to call: the operator's destructive list, and each tool the
	// server has marked destructiveHint: true in any listing since
	// capbridge started, less not_destructive.
	destructive map[string]bool
	// raw is the listing as the server gave it, before any filter, from
	// which a reload's new policy rebuilds the table; conf and lock are
	// the policy the table was built under.
	raw  []mcpwire.Tool
	conf *config.Server
	lock *lockPolicy
}

// withheldList is each withheld tool as "name: classes", sorted.
func (t *table) withheldList() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(t.drift)) {
		if !hasTool(t, name) {
			out = append(out, name+": "+t.drift[name])
		}
	}
	return out
}

// sameSurface reports whether a grant issued when seen was the server's
// table may call tool of the live table t: the table is the same, or
// the tool was in seen with a byte-identical input schema. A grant
// issued while the server had no table (it was starting) saw no surface
// to hold it to. A tool added since, or whose schema changed, is not
// what the program's façade describes, so it is refused surface_changed
// rather than served silently.
func sameSurface(seen, t *table, tool mcpwire.Tool) bool {
	if seen == nil || seen == t {
		return true
	}
	old, ok := seen.tools[tool.Name]
	return ok && bytes.Equal(old.InputSchema, tool.InputSchema)
}

func hasTool(t *table, name string) bool {
	_, ok := t.tools[name]
	return ok
}

// backoff is the wait before each restart: restart_backoff, doubled for
// each restart after it up to restart_max, with equal jitter (a random
// wait in [d/2, d]) so that servers that died together do not all come
// back at the same instant.
type backoff struct {
	initial, max time.Duration
	n            int                               // restarts since the last reset
	jitter       func(time.Duration) time.Duration // d → a wait in [d/2, d]
}

// next returns the wait before the next attempt and counts it.
func (b *backoff) next() time.Duration {
	d := b.initial
	for i := 0; i < b.n && d < b.max; i++ {
		d *= 2
	}
	b.n++
	return b.jitter(min(d, b.max))
}

// reset starts the sequence again from restart_backoff: the server has
// served for restart_max, so whatever made it fail earlier is history.
func (b *backoff) reset() { b.n = 0 }

func equalJitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// retries reports whether policy restarts a server after an end; clean
// is an exit with status 0 on its own (a boot failure is never clean).
func retries(policy config.Restart, clean bool) bool {
	switch policy {
	case config.RestartAlways:
		return true
	case config.RestartOnFailure:
		return !clean
	}
	return false
}

// run supervises the server from its first boot until retire cancels
// ctx: it boots, serves (re-listing on tools/list_changed), and, as the
// restart policy says, boots again after a failed boot or a death, with
// backoff. It owns every client it starts until it publishes it; retire
// closes the live one after run has returned.
func (s *server) run(ctx context.Context) {
	defer close(s.runDone)
	bo := backoff{initial: s.cfg().RestartBackoff, max: s.cfg().RestartMax, jitter: s.jitter}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			s.setState(StateStarting, "")
		}
		began := time.Now()
		octx, op := s.startOp(ctx, bootOp(attempt))
		t, err := s.launch(octx)
		s.endOp(op, t, err)
		if err == nil {
			var perr error
			if t, perr = s.underPolicy(t); perr != nil {
				s.log.Error().Err(perr).Msg("the policy a reload set does not fit this listing; the server serves under the one it booted with")
			}
		}
		s.metrics.booted(began, t)
		now := false
		if err == nil {
			if old := s.publish(t); old != nil {
				s.reportRelist("restart", old, t)
			}
			served := time.Now()
			err = s.serve(ctx, t)
			if ctx.Err() != nil {
				return // retired: retire closes the live client
			}
			clean := s.died(t.client, err)
			if time.Since(served) >= s.cfg().RestartMax {
				bo.reset()
			}
			if !retries(s.cfg().Restart, clean) {
				s.log.Error().Str("restart", string(s.cfg().Restart)).Msg("server stays dead: its restart policy does not restart it")
				return
			}
			// A remote server that ended our session after serving a
			// while is not failing: the spec has the client start a new
			// session at once (the next call would otherwise wait out a
			// backoff). One that keeps ending them goes by the backoff.
			now = errors.Is(err, mcpwire.ErrSessionExpired) && time.Since(served) >= s.cfg().RestartBackoff
		} else {
			if ctx.Err() != nil {
				return
			}
			s.failed(err)
			// A server waiting for a person's login has not failed:
			// whatever the policy, the next attempt is what finds the
			// login that status asks for.
			if !retries(s.cfg().Restart, false) && !errors.Is(err, mcpauth.ErrNeedsLogin) {
				return
			}
		}
		wait := time.Duration(0)
		if !now {
			wait = bo.next()
		}
		if !s.sleep(ctx, wait) {
			return
		}
		s.restarts.Add(1)
		s.audit.Info().Str("event", "restart").Str("server", s.cfg().Name).Int64("restarts", s.restarts.Load()).
			Dur("waited", wait).Str("after", s.why()).Msg("server restart")
		s.log.Info().Int64("restarts", s.restarts.Load()).Dur("waited", wait).Msg("restarting server")
	}
}

// sleep waits d in the backoff state, reporting false if ctx ended
// first.
func (s *server) sleep(ctx context.Context, d time.Duration) bool {
	s.mu.Lock()
	if s.state != StateNeedsLogin {
		// needs_login stays what status shows: the next attempt finds a
		// login made meanwhile.
		s.state = StateBackoff
	}
	s.wait, s.nextAttempt = d, time.Now().Add(d)
	st := s.statusLocked()
	s.mu.Unlock()
	s.progress(st)
	s.log.Warn().Str("reason", st.Reason).Dur("backoff", d).Msg("server down; next attempt after the backoff")
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// launch makes one boot attempt within startup_timeout: spawn,
// handshake, tools/list, façade. On failure no process is left.
func (s *server) start(ctx context.Context) (*table, error) {
	if s.cfg().Unresolved() {
		// Started so, it would get "${cmd:…}" in its environment.
		return nil, errors.New("its secret references were not resolved (config.ResolveSecrets), so it is not started")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg().StartupTimeout)
	defer cancel()
	if s.cfg().Remote != nil {
		client, err := s.dial(ctx)
		if err != nil {
			return nil, s.bounded(ctx, err)
		}
		return s.listBooted(ctx, client)
	}
	env := make([]string, 0, len(s.cfg().Env))
	for _, k := range slices.Sorted(maps.Keys(s.cfg().Env)) {
		env = append(env, k+"="+s.cfg().Env[k])
	}
	cmd := mcpwire.Command{
		Argv:    append([]string{s.cfg().Command}, s.cfg().Args...),
		Env:     env,
		Inherit: nonNil(s.cfg().InheritEnv),
		Dir:     s.cfg().Cwd,
		Logger:  &s.log,
		// The log's writer replaces whole secrets; a line cut short may
		// end with a secret's start, which only the server knows.
		CutLine: s.secrets.CutEnd,
		// Retiring a server ends all it started, browsers that setsid()
		// out of its process group included.
		SweepDescendants: true,
		Cgroups:          s.opts.cgroups,
	}
	client, err := mcpwire.Start(ctx, cmd, s.clientConfig())
	if err != nil {
		return nil, s.bounded(ctx, err)
	}
	return s.listBooted(ctx, client)
}

// clientConfig is the mcpwire configuration of the server, whatever its
// transport.
func (s *server) clientConfig() mcpwire.Config {
	return mcpwire.Config{
		ClientName:    s.opts.clientName,
		ClientVersion: s.opts.clientVersion,
		Logger:        &s.log,
		MaxLineBytes:  s.opts.maxLine,
		// startup_timeout bounds the whole boot through ctx; the
		// handshake gets no shorter bound of its own, so a first npx -y
		// download that takes a minute is not cut off at mcpwire's 60 s.
		HandshakeTimeout: s.cfg().StartupTimeout,
		CallIdleTimeout:  s.cfg().CallTimeout,
		CallMaxTimeout:   s.cfg().MaxCallTimeout,
		// The bridge admits at most max_inflight calls plus the queue;
		// the client's own bound is a backstop above that.
		MaxInFlight: s.cfg().MaxInflight,
	}
}

// dial connects to a remote server: its headers and credentials are
// resolved at each attempt (a rotated token file is read again, once,
// and what it holds is redacted from then on: learn), and its
// HTTP client keeps a connection for each of max_inflight calls and a
// few more for the long-lived streams (the GET or listen stream) and the
// notifications posted beside the calls.
func (s *server) dial(ctx context.Context) (*mcpwire.Client, error) {
	rm := s.cfg().Remote
	read := readOnce(config.ReadSecretFile)
	headers, err := rm.Secrets(s.cfg().Name, os.LookupEnv, read)
	if err != nil {
		return nil, err
	}
	hc, err := mcpwire.HTTPClient(mcpwire.HTTPOptions{CAFile: rm.CAFile, CertFile: rm.ClientCert, KeyFile: rm.ClientKey, MaxConnsPerHost: s.cfg().MaxInflight + 4})
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	r := mcpwire.Remote{URL: rm.URL, Transport: transportOf(rm.Transport), Header: h, Client: hc}
	switch {
	case rm.OAuth != nil && rm.OAuth.Grant != config.GrantAuthorizationCode:
		if r.Auth, err = s.authorizer(rm, hc, read); err != nil {
			return nil, err
		}
	case headers["Authorization"] == "" && s.opts.tokenDir != "":
		// A person's login (capbridge login), if one was saved; none is
		// needed until the server answers 401, which then says
		// needs_login.
		login := mcpauth.NewStoredAuthorizer(mcpauth.Store{Dir: s.opts.tokenDir}, s.cfg().Name, rm.URL, hc)
		login.Warn = func(err error) { s.log.Warn().Err(err).Msg("the login's token store") }
		r.Auth = login
		s.login.Store(login)
	}
	s.learn(secretsOf(*s.cfg(), os.LookupEnv, read))
	return mcpwire.Dial(ctx, r, s.clientConfig())
}

// readOnce returns read remembering each path's answer: one boot reads a
// secret file once, so the value it sends is the value it redacts. It is
// for one goroutine.
func readOnce(read func(string) ([]byte, error)) func(string) ([]byte, error) {
	type answer struct {
		b   []byte
		err error
	}
	seen := map[string]answer{}
	return func(path string) ([]byte, error) {
		if a, ok := seen[path]; ok {
			return a.b, a.err
		}
		b, err := read(path)
		seen[path] = answer{b, err}
		return b, err
	}
}

// authorizer builds the OAuth client of a remote server from its
// [mcp.<name>.oauth] table; the secret or key is read at each boot, with
// read, and the ID token at each exchange (and learnt then).
func (s *server) authorizer(rm *config.Remote, hc *http.Client, read func(string) ([]byte, error)) (*mcpauth.Authorizer, error) {
	o := rm.OAuth
	creds := mcpauth.ClientCredentials{ClientID: o.ClientID, KeyID: o.KeyID, Scopes: o.Scopes, Issuer: o.Issuer}
	secret, err := o.ClientSecret(s.cfg().Name, os.LookupEnv, read)
	if err != nil {
		return nil, err
	}
	creds.Secret = secret
	if o.PrivateKeyFile != "" {
		pem, err := read(o.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("[mcp.%s] oauth.private_key_file: %w", s.cfg().Name, err)
		}
		if creds.Key, err = mcpauth.ParsePrivateKey(pem); err != nil {
			return nil, fmt.Errorf("[mcp.%s] oauth.private_key_file %s: %w", s.cfg().Name, o.PrivateKeyFile, err)
		}
	}
	if o.Grant == config.GrantIDJAG {
		idpSecret, err := o.IDPClientSecret(s.cfg().Name, os.LookupEnv, read)
		if err != nil {
			return nil, err
		}
		name := s.cfg().Name
		creds.IdentityAssertion = &mcpauth.IdentityAssertion{IDPIssuer: o.IDPIssuer, IDPClientID: o.IDPClientID, IDPClientSecret: idpSecret,
			IDToken: func() (string, error) {
				v, err := o.IDToken(name, os.LookupEnv, config.ReadSecretFile)
				if err == nil {
					s.learn(map[string]string{"id_token": v})
				}
				return v, err
			}}
	}
	return mcpauth.NewAuthorizer(rm.URL, creds, hc)
}

func transportOf(t string) mcpwire.Transport {
	switch t {
	case config.TransportStreamable:
		return mcpwire.TransportStreamable
	case config.TransportSSE:
		return mcpwire.TransportSSE
	}
	return mcpwire.TransportAuto
}

// listBooted lists a connected client's tools into the table to publish;
// on failure the client is shut down.
func (s *server) listBooted(ctx context.Context, client *mcpwire.Client) (*table, error) {
	t, err := s.list(ctx, client)
	if err != nil {
		if _, cerr := client.Close(); cerr != nil {
			s.log.Error().Err(cerr).Msg("shutting down a server that failed to boot")
		}
		return nil, s.bounded(ctx, err)
	}
	return t, nil
}

// bounded names startup_timeout in an error that its deadline caused,
// so the operator knows which setting to raise.
func (s *server) bounded(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &bootTimeoutError{server: s.cfg().Name, limit: s.cfg().StartupTimeout, err: err}
	}
	return err
}

// bootTimeoutError is a boot that startup_timeout cut off.
type bootTimeoutError struct {
	server string
	limit  time.Duration
	err    error
}

func (e *bootTimeoutError) Error() string {
	return fmt.Sprintf("did not finish starting within startup_timeout (%s; raise it in [mcp.%s]): %v", e.limit, e.server, e.err)
}

func (e *bootTimeoutError) Unwrap() error { return e.err }

// list lists client's tools, applies tools.allow and tools.deny, and
// generates the façade: the table to publish.
func (s *server) list(ctx context.Context, client *mcpwire.Client) (*table, error) {
	listed, err := client.ListTools(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.build(ctx, client, listed, s.cfg(), s.lock.Load(), false)
	if err == nil && len(listed) > eagerChecks {
		// Reading and planning a big listing allocates some 30 KiB per
		// tool, nearly all garbage once the table is built, and the
		// runtime keeps the heap's high-water mark mapped, returning it
		// to the system only slowly: a bridge that booted 10 000 tools
		// would sit at three times the memory it uses. Return it now,
		// before the table is published: on the server's own goroutine,
		// not on any call's path, and only after a listing this big,
		// whose collection costs little beside its planning.
		debug.FreeOSMemory()
	}
	return t, err
}

// build makes the table of a listing under a policy: conf's tools.allow,
// tools.deny, destructive and restrict, and the lock lp (nil: none). It
// needs no request to the server, so a reload that changes only the
// policy rebuilds the live table from the listing it kept (raw). A dry
// build reports and records nothing: a reload checks a new policy with
// it before applying anything.
func (s *server) build(ctx context.Context, client *mcpwire.Client, listed []mcpwire.Tool, conf *config.Server, lp *lockPolicy, dry bool) (*table, error) {
	if name := duplicateTool(listed); name != "" {
		// Which of the two the server runs cannot be told from here, so
		// neither is served: not even the copy a lock approves.
		return nil, fmt.Errorf("the server lists tool %s twice, with no way to tell which definition it runs; none of its tools is served until it lists each once", quote(name))
	}
	hinted := s.noteHints(listed, conf, dry)
	tools := filter(listed, conf)
	unlocked := tools
	for _, e := range conf.UnmatchedTools(func(name string) bool {
		return slices.ContainsFunc(listed, func(t mcpwire.Tool) bool { return t.Name == name })
	}) {
		if conf.Strict {
			return nil, fmt.Errorf("%s names no tool of this server (an error under --strict)", e)
		}
		if !dry {
			s.log.Warn().Str("entry", e).Msg("a tools.allow, tools.deny, destructive, restrict or quota.tools entry names no tool of this server; check its spelling")
		}
	}
	tools, drift, absent, err := lp.held(conf.Name, tools)
	if err != nil {
		return nil, err
	}
	if !dry {
		s.reportDrift(ctx, lp, drift, absent)
	}
	if err := checkPolicy(tools, conf); err != nil {
		return nil, err
	}
	// The surface, names and descriptions now; the source when a façade
	// is asked for (control's facade): writing and verifying it is most
	// of a big listing's cost, and calls do not wait on it.
	gen, err := codegen.Generate(conf.Name, toCodegen(tools), codegen.Options{SurfaceBudget: s.opts.surfaceBudget, SurfaceOnly: true})
	if err != nil {
		return nil, fmt.Errorf("generating its façade: %w", err)
	}
	t := &table{client: client, tools: make(map[string]mcpwire.Tool, len(tools)), listed: tools, unlocked: unlocked, gen: gen, all: len(listed),
		destructive: destructiveSet(hinted, conf), raw: listed, conf: conf, lock: lp}
	for name, d := range drift {
		if t.drift == nil {
			t.drift = map[string]string{}
		}
		t.drift[name] = driftClasses(d)
	}
	if len(tools) > eagerChecks {
		t.lazy = &lazyChecks{}
	}
	for _, tool := range tools {
		t.tools[tool.Name] = tool
		if t.lazy != nil {
			continue
		}
		// A schema argcheck cannot judge exactly leaves its tool
		// unchecked: the server judges the arguments, as it always did.
		if c, err := argcheck.Compile(tool.InputSchema); err == nil {
			if t.checks == nil {
				t.checks = map[string]*argcheck.Schema{}
			}
			t.checks[tool.Name] = c
		}
	}
	return t, nil
}

// eagerChecks is the most tools a table compiles the input schemas of
// when it is built. Compiling takes some 17 µs and 1 KiB of heap per
// tool of a kilobyte: for 10 000 tools a sixth of a second before the
// server is ready, and 10 MB kept for tools most programs never call.
const eagerChecks = 1024

// check is the compiled input schema of the table's tool name, or nil
// when argcheck cannot judge it exactly (or there is no such tool).
func (t *table) check(name string) *argcheck.Schema {
	if t.lazy == nil {
		return t.checks[name]
	}
	return t.lazy.get(name, t.tools)
}

// lazyChecks are the compiled input schemas of a big table's tools,
// compiled on a tool's first call and kept for the next, at most
// maxLazyChecks of them: past that, keeping one more drops another, so
// a program that calls every tool of a huge listing cannot make the
// table hold them all. Safe for concurrent use; a hit takes no lock.
type lazyChecks struct {
	m sync.Map     // tool name → *argcheck.Schema, nil when not judged
	n atomic.Int64 // entries in m, give or take the calls storing one
}

// maxLazyChecks bounds a lazyChecks.
const maxLazyChecks = 1024

func (l *lazyChecks) get(name string, tools map[string]mcpwire.Tool) *argcheck.Schema {
	if v, ok := l.m.Load(name); ok {
		return v.(*argcheck.Schema)
	}
	tool, ok := tools[name]
	if !ok {
		return nil
	}
	c, err := argcheck.Compile(tool.InputSchema)
	if err != nil {
		c = nil // as at build: a schema argcheck cannot judge is not checked
	}
	if l.n.Add(1) > maxLazyChecks {
		// Drop one entry: the first this call itself removes, since a
		// concurrent call may take the first one it sees, and stopping
		// there would keep one more than the bound.
		l.m.Range(func(k, _ any) bool {
			_, gone := l.m.LoadAndDelete(k)
			if gone {
				l.n.Add(-1)
			}
			return !gone
		})
	}
	if v, loaded := l.m.LoadOrStore(name, c); loaded {
		l.n.Add(-1)
		return v.(*argcheck.Schema)
	}
	return c
}

// serve waits while the server is ready: it re-lists on each
// tools/list_changed and publishes the new table, and returns the
// client's death, or nil once ctx ends. A re-listing that fails leaves
// the old table in place (the server still answers its calls).
//
// A server announces changes as often as it likes, and each re-listing
// costs a listing's planning and an audit line: announcements are
// honoured at most once per gap, those that come sooner coalescing into
// one re-listing when the gap has passed. The gap starts at relistGap,
// doubles while announcements keep coming early, up to maxRelistGap, and
// halves again after each quiet stretch.
func (s *server) serve(ctx context.Context, t *table) error {
	var (
		last    time.Time                  // when the last re-listing began
		gap     = relistGap                // the least time from one to the next
		changed = t.client.ToolsChanged()  // nil while one waits for due
		due     <-chan time.Time           // the waiting re-listing's time
		timer   = time.NewTimer(relistGap) // armed for due
	)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.client.Done():
			return t.client.Err()
		case done := <-s.rebuild:
			// A reload changed the policy: the same listing, filtered,
			// locked and guarded anew, for the next call.
			var err error
			t, err = s.repolicied(t)
			done <- err
		case <-changed:
			since := time.Since(last)
			if since < gap {
				timer.Reset(gap - since)
				changed, due = nil, timer.C
				gap = min(2*gap, maxRelistGap)
				continue
			}
			if since >= 2*gap {
				gap = max(gap/2, relistGap)
			}
			last = time.Now()
			t = s.relist(ctx, t)
		case <-due:
			changed, due = t.client.ToolsChanged(), nil
			last = time.Now()
			t = s.relist(ctx, t)
		}
	}
}

// Bounds of how often a server's announcements are re-listed.
const (
	relistGap    = time.Second
	maxRelistGap = time.Minute
)

// relist lists the server's tools again and publishes them, returning
// the live table: t's rebuilt under a reload's policy when the listing
// fails.
func (s *server) relist(ctx context.Context, t *table) *table {
	ctxL, cancel := context.WithTimeout(ctx, s.cfg().StartupTimeout)
	defer cancel()
	ctxL, op := s.startOp(ctxL, relistOp)
	nt, err := s.list(ctxL, t.client)
	err = s.bounded(ctxL, err)
	s.endOp(op, nt, err)
	if err != nil {
		if ctx.Err() == nil && t.client.Err() == nil {
			s.log.Error().Err(err).Msg("re-listing after tools/list_changed failed; the previous tools stay")
		}
		// A reload that came meanwhile found this loop busy and gave up
		// waiting: the tools that stay take its policy now (until then
		// the call path refuses their calls).
		if t, err = s.repolicied(t); err != nil {
			s.log.Error().Err(err).Msg("the policy a reload set does not fit the listing; calls wait for one it fits")
		}
		return t
	}
	if nt, err = s.underPolicy(nt); err != nil {
		s.log.Error().Err(err).Msg("the policy a reload set does not fit the new listing; it keeps the one it was listed under")
	}
	s.publish(nt)
	s.reportRelist("list_changed", t, nt)
	s.metrics.listed(nt)
	return nt
}

// repolicied publishes t rebuilt under the policy in force, when a
// reload changed it since t was built, and returns the live table.
func (s *server) repolicied(t *table) (*table, error) {
	nt, err := s.underPolicy(t)
	if err == nil && nt != t {
		s.publish(nt)
		s.reportRelist("reload", t, nt)
		s.metrics.listed(nt)
		return nt, nil
	}
	return t, err
}

// underPolicy returns t, rebuilt from its listing if a reload changed the
// server's policy (its conf or its lock) since t was built, until it is
// built under the policy in force.
func (s *server) underPolicy(t *table) (*table, error) {
	for {
		conf, lp := s.cfg(), s.lock.Load()
		if t.conf == conf && t.lock == lp {
			return t, nil
		}
		nt, err := s.build(context.Background(), t.client, t.raw, conf, lp, false)
		if err != nil {
			return t, err
		}
		t = nt
	}
}

// repolicy makes conf (whose process-level settings are the server's
// own) and lp the server's policy. A server that is serving has its live
// table rebuilt under it by its supervisor before repolicy returns, so
// the next call is held to it; one that is not builds its next table
// under it.
func (s *server) repolicy(conf *config.Server, lp *lockPolicy) error {
	s.mu.Lock()
	s.conf.Store(conf)
	s.lock.Store(lp)
	ready, t := s.state == StateReady, s.cur
	s.mu.Unlock()
	if !ready || t == nil {
		return nil
	}
	done := make(chan error, 1)
	timer := time.NewTimer(conf.StartupTimeout)
	defer timer.Stop()
	late := fmt.Errorf("server %s did not take its new policy within startup_timeout (%s); it will at its next listing", quote(conf.Name), conf.StartupTimeout)
	select {
	case s.rebuild <- done:
	case <-t.client.Done():
		return nil // dying: its next boot is under the new policy
	case <-s.runDone:
		return nil
	case <-timer.C:
		return late
	}
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return late
	}
}

// missing lists the tools of a that b lacks, sorted.
func missing(a, b *table) []string {
	var out []string
	for name := range a.tools {
		if _, ok := b.tools[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// changes returns each tool in both tables that differs in any part a
// lock records (schemas, description, annotations, icons, execution,
// _meta), by its classes ("description_changed,annotations_changed").
// A new description or a flipped destructiveHint changes what a model
// is told and what a tool does as surely as a new schema does.
func changes(a, b *table) map[string]string {
	out := map[string]string{}
	for name, t := range a.tools {
		u, ok := b.tools[name]
		if !ok {
			continue
		}
		lt, err1 := lockedTool(t)
		lu, err2 := lockedTool(u)
		switch {
		case err1 != nil || err2 != nil:
			out[name] = "unreadable"
		case lt.Digest != lu.Digest:
			out[name] = driftClasses(lock.CompareTool("", lt, lu))
		}
	}
	return out
}

// reportRelist records what a new listing (after tools/list_changed, or
// the first after a restart) changed from the one before: an audit line
// naming the tools added, removed and changed with each change's
// classes, and a warning per changed tool, so that a tool that changes
// its meaning under a running grant is seen even without a lock. A
// restart that changed nothing is not reported; a list_changed always
// is.
func (s *server) reportRelist(cause string, old, nt *table) {
	added, removed, changed := missing(nt, old), missing(old, nt), changes(old, nt)
	if cause != "list_changed" && len(added)+len(removed)+len(changed) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(changed))
	classes := make([]string, len(names))
	for i, name := range names {
		classes[i] = clip(name) + ": " + changed[name]
		ev := s.log.Warn().Str("tool", clip(name)).Str("changes", changed[name]).Str("cause", cause)
		if before, after := destructiveHint(old.tools[name]), destructiveHint(nt.tools[name]); before != after {
			ev = ev.Str("destructive_hint", before+" → "+after)
		}
		ev.Msg("a tool changed since the server last listed it; review it (capbridge describe), and lock the surface to withhold such changes")
	}
	s.audit.Info().Str("event", "relist").Str("server", s.cfg().Name).Str("cause", cause).Int("tools", len(nt.tools)).
		Strs("added", auditNames(added)).Strs("removed", auditNames(removed)).Strs("changed", auditNames(names)).Strs("changes", auditFirst(classes)).Msg("server tools changed")
}

func destructiveHint(t mcpwire.Tool) string {
	if t.Annotations == nil || t.Annotations.DestructiveHint == nil {
		return "absent"
	}
	return strconv.FormatBool(*t.Annotations.DestructiveHint)
}

// publish makes t the live table: the server is ready. It returns the
// table t replaces, nil at the first boot.
func (s *server) publish(t *table) *table {
	s.mu.Lock()
	old := s.cur
	s.cur, s.live = t, t.client
	s.state, s.reason, s.tail = StateReady, "", nil
	first := s.settleFirst()
	st := s.statusLocked()
	s.mu.Unlock()
	s.log.Info().Int("tools", len(t.tools)).Int("listed", t.all).Msg("server ready")
	s.progress(st)
	if first != nil {
		close(first)
	}
	return old
}

// failed records a failed boot attempt. A remote server that needs a
// person's login is needs_login, and its reason names the command. The
// reason is redacted as it is kept: it goes on to status, logs and the
// restart's audit line, and a server's words may carry a credential (an
// error page that echoes the request's Authorization).
func (s *server) failed(err error) {
	var tail []byte
	var dead *mcpwire.DeadError
	if errors.As(err, &dead) {
		tail = dead.Stderr
	}
	state, reason := StateFailed, s.redactor().Text(withoutTail(err))
	if errors.Is(err, mcpauth.ErrNeedsLogin) {
		state, reason = StateNeedsLogin, fmt.Sprintf("it needs a person's authorization: run `capbridge login %s` (%s)", s.cfg().Name, reason)
	}
	s.mu.Lock()
	s.state, s.reason, s.tail = state, reason, tail
	first := s.settleFirst()
	st := s.statusLocked()
	s.mu.Unlock()
	s.log.Error().Str("error", st.Reason).Str("stderr_tail", st.StderrTail).Msg("server failed to boot")
	s.logs.Flush()
	s.progress(st)
	if first != nil {
		close(first)
	}
}

// died records the death of the live client and shuts it down, and
// reports whether it was a clean exit (status 0, on its own, with the
// connection intact until then). The state leaves ready before the
// shutdown sequence runs, so calls are refused at once. Its reason is
// redacted as failed's is.
func (s *server) died(client *mcpwire.Client, err error) (clean bool) {
	var tail []byte
	var dead *mcpwire.DeadError
	if errors.As(err, &dead) {
		tail = dead.Stderr
	}
	s.mu.Lock()
	s.state, s.reason, s.tail = StateDead, "died: "+s.redactor().Text(withoutTail(err)), tail
	st := s.statusLocked()
	s.mu.Unlock()
	s.log.Error().Str("error", st.Reason).Str("stderr_tail", st.StderrTail).Msg("server died")
	s.logs.Flush()
	s.progress(st)
	exit, cerr := client.Close()
	if cerr != nil {
		s.log.Error().Err(cerr).Msg("shutting down a server that died")
	}
	s.mu.Lock()
	s.live, s.lastExit = nil, exit.Status
	s.mu.Unlock()
	return exit.How == mcpwire.ExitedBefore && exit.Code == 0 && errors.Is(err, mcpwire.ErrExited)
}

// setState moves the server to st (starting for a new attempt), keeping
// the last reason when given none, for status.
func (s *server) setState(st State, reason string) {
	s.mu.Lock()
	s.state = st
	if reason != "" {
		s.reason = reason
	}
	out := s.statusLocked()
	s.mu.Unlock()
	s.progress(out)
}

// why is the reason the server last stopped serving.
func (s *server) why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// settleFirst records the first attempt's outcome, once, and returns the
// channel the caller must close after unlocking (nil after the first).
// The caller holds mu.
func (s *server) settleFirst() chan struct{} {
	if s.firstSet {
		return nil
	}
	s.firstSet = true
	s.first = Status{State: s.state, Reason: s.reason, StderrTail: s.secrets.Ring(truncate.Tail(s.tail, -1))}
	return s.firstDone
}

// progress reports a change of state to the Options.Progress hook.
func (s *server) progress(st serverStatus) {
	if s.onProgress != nil {
		s.onProgress(Progress{Server: s.cfg().Name, State: State(st.State), Reason: st.Reason, Tools: st.Tools, Restarts: int(st.Restarts), Backoff: time.Duration(st.BackoffMS) * time.Millisecond})
	}
}

// Progress is one change of a server's state, for a boot display.
type Progress struct {
	Server   string
	State    State
	Reason   string        // why it is not serving, if it is not
	Tools    int           // tools in its table
	Restarts int           // restarts so far
	Backoff  time.Duration // the wait before the next attempt, in the backoff state
}
