package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/internal/auditlog"
	"github.com/capbridge/capbridge/bridge/internal/fairshare"
	"github.com/capbridge/capbridge/bridge/internal/redact"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/mcpauth"
	"github.com/capbridge/capbridge/internal/telemetry"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/mcpwire"
)

// State is where a configured server is in its life. A server starts
// starting; an attempt leaves it ready or failed; a ready server that
// ends on its own is dead. When its restart policy restarts it, a failed
// or dead server waits in backoff, then is starting again. Shutdown
// leaves every server retired. Failed and dead are final only when the
// policy does not restart; retired is always final. Its text is what the
// control plane's status reports.
type State string

// The states of a server, as status reports them.
const (
	StateStarting State = "starting"
	StateReady    State = "ready"
	StateFailed   State = "failed"  // a boot attempt failed
	StateDead     State = "dead"    // served, then ended (crash, framing fault)
	StateBackoff  State = "backoff" // down, waiting to restart
	// StateNeedsLogin: a remote server that needs a person's
	// authorization has no usable login (capbridge login NAME); it is
	// tried again with the restart policy's backoff, so a login made
	// meanwhile is picked up.
	StateNeedsLogin State = "needs_login"
	StateRetired    State = "retired" // shut down by us
)

func (s State) String() string { return string(s) }

// Status is a server's state and, when it is not serving, why.
type Status struct {
	State State
	// Reason says why a failed or dead server is so; empty otherwise.
	Reason string
	// StderrTail is the end of the server's stderr (valid UTF-8): the
	// live ring for a ready server, the one captured at failure or death.
	StderrTail string
}

// Outcome is how one server's first boot attempt ended.
type Outcome struct {
	Name string
	Status
}

// server is the custody of one configured MCP server: its supervisor
// (run, in lifecycle.go), its published tool table, and its admission
// control.
//
// Concurrency: mu guards the lifecycle fields below it. A table is
// immutable once published (cur), so the call path takes it under mu and
// uses it without a lock for the rest of the call.
type server struct {
	// conf is the server's configuration. A reload that changes only its
	// policy (tools, destructive, restrict, timeouts, quotas) stores a new
	// one, and the next table is built from it (reload.go); one that
	// changes anything else replaces the server.
	conf atomic.Pointer[config.Server]
	// log is rate-limited per message (auditlog.Limit): mcpwire logs the
	// server's stderr lines, requests and notifications through it.
	log    zerolog.Logger
	logs   *auditlog.Limiter // log's limiter; flushed when the server ends
	redact *redact.Redactor  // the values of its environment (secretsOf), for what callers are told
	// redactSecrets are redact's values, kept to build withLater from.
	redactSecrets map[string]string
	// login is the authorizer of a person's saved login the last
	// connection used, for the step-up status shows and for redactor;
	// nil for others. Atomic, not under mu: redactor's callers include
	// mu's holders.
	login atomic.Pointer[mcpauth.StoredAuthorizer]
	// learned are credentials a boot read that redactSecrets lacks: a
	// header or secret file rotated, or a variable changed, since the
	// server was set up (learn). Replaced whole under learnMu, never
	// changed.
	learned atomic.Pointer[map[string]string]
	learnMu sync.Mutex
	// withLater is redact with the login's credentials and learned too,
	// for the values it was built from (redactor).
	withLater atomic.Pointer[laterRedactor]
	// secrets replaces the values its secret references resolved to
	// (config.ResolveSecrets) in what the operator is told: status's
	// reason and stderr tail, whose ring may begin or end within one,
	// and the end of a stderr line the log cut short.
	secrets *redact.Redactor
	audit   zerolog.Logger
	opts    bootOptions

	// launch makes one boot attempt (start, or a test's stand-in);
	// jitter spreads each backoff wait; onProgress, when set, hears of
	// every change of state. All are set before run starts.
	launch     func(context.Context) (*table, error)
	jitter     func(time.Duration) time.Duration
	onProgress func(Progress)

	mu     sync.Mutex
	state  State
	reason string // why it failed or died
	tail   []byte // stderr tail captured at failure or death
	// cur is the last table published: the live one while ready, kept
	// while the server is down so its façade is still served. live is
	// the client run has not shut down yet; retire closes it.
	cur  *table
	live *mcpwire.Client
	// The restart record, for status: the last exit's wait status, the
	// current backoff wait and when it ends.
	lastExit    string
	wait        time.Duration
	nextAttempt time.Time
	// first is the first attempt's outcome, settled once (firstSet),
	// when firstDone is closed.
	first     Status
	firstSet  bool
	firstDone chan struct{}
	// stop ends run, which closes runDone on return; nil until run
	// starts.
	stop    context.CancelFunc
	runDone chan struct{}

	restarts atomic.Int64

	// A reload that removes or replaces the server drains it: calls in
	// progress (enter to leave) finish, new ones go to the server in
	// force; drained is closed once draining and none is left.
	active    atomic.Int64
	draining  atomic.Bool // set under mu
	drained   chan struct{}
	drainOnce sync.Once
	// rebuild asks the supervisor, while it serves, to rebuild the live
	// table from its listing under the policy in force (a reload's), and
	// to answer on the channel given.
	rebuild chan chan error

	// Admission: max_inflight calls run at the server, max_queue wait,
	// each grant holding at most its share of both (shares). Its gauges
	// are for status; the bridge's account of the calls Shutdown waits
	// for is its flight.
	adm *fairshare.Shares[*Grant] // nil key: operator authority

	calls, errs atomic.Int64
	// abandoned counts the slots held for calls given up on that the
	// server has not answered yet (holdSlot).
	abandoned atomic.Int64

	// lock holds each listing to the lock; nil: no lock. Set by New
	// before run starts, and by a reload.
	lock atomic.Pointer[lockPolicy]
	// hinted is every tool the server has marked destructiveHint: true
	// in any listing (noteHints); guarded by mu.
	hinted map[string]bool

	metrics *serverSeries // set by newMetrics; nil records nothing
}

func newServer(cfg config.Server, log, audit zerolog.Logger, o bootOptions, progress func(Progress)) *server {
	log, logs := auditlog.Limit(log.With().Str("server", cfg.Name).Logger())
	s := &server{
		log:           log,
		logs:          logs,
		redactSecrets: secretsOf(cfg, os.LookupEnv, config.ReadSecretFile),
		secrets:       redact.New(cfg.SecretValues()),
		audit:         audit,
		opts:          o,
		jitter:        equalJitter,
		onProgress:    progress,
		state:         StateStarting,
		firstDone:     make(chan struct{}),
		runDone:       make(chan struct{}),
		drained:       make(chan struct{}),
		rebuild:       make(chan chan error),
		adm:           fairshare.New[*Grant](fairshare.Limits{Max: cfg.MaxInflight, PerKey: cfg.InflightPerGrant(), MaxQueue: cfg.MaxQueue, QueuePerKey: cfg.QueuePerGrant()}),
	}
	s.redact = redact.New(s.redactSecrets)
	s.conf.Store(&cfg)
	s.launch = s.start
	return s
}

// laterRedactor is a server's redactor with what it learned after setup.
type laterRedactor struct {
	creds   *mcpauth.Credentials
	learned *map[string]string
	r       *redact.Redactor
}

// redactor is what the server's words are redacted with: redact, the
// credentials a boot read again and found changed (learn), and those of
// a person's login (capbridge login) when it uses one, which a server
// may quote back and which rotate with each refresh. It is built again
// when either changes, else reused. It takes no lock.
func (s *server) redactor() *redact.Redactor {
	var creds *mcpauth.Credentials
	if a := s.login.Load(); a != nil {
		creds = a.Credentials()
	}
	learned := s.learned.Load()
	if creds == nil && learned == nil {
		return s.redact
	}
	if lr := s.withLater.Load(); lr != nil && lr.creds == creds && lr.learned == learned {
		return lr.r
	}
	all := maps.Clone(s.redactSecrets)
	if learned != nil {
		maps.Copy(all, *learned)
	}
	if creds != nil {
		maps.Copy(all, creds.Values)
	}
	lr := &laterRedactor{creds: creds, learned: learned, r: redact.New(all)}
	s.withLater.Store(lr)
	return lr.r
}

// learn records the credentials a boot read (name and value, as
// secretsOf names them), so that the server's words are redacted of a
// value that changed since setup: a token file rotated, a variable set
// again. The value read at setup stays redacted as well, and the latest
// beside it: a server may still quote a token that was valid until
// now. It may be called from any goroutine.
func (s *server) learn(found map[string]string) {
	s.learnMu.Lock()
	defer s.learnMu.Unlock()
	prev := s.learned.Load()
	next := map[string]string{}
	if prev != nil {
		next = maps.Clone(*prev)
	}
	changed := false
	for name, v := range found {
		if v == "" || s.redactSecrets[name] == v || next[name] == v {
			continue
		}
		if _, ok := s.redactSecrets[name]; ok {
			name += " (rotated)"
			if next[name] == v {
				continue
			}
		}
		next[name], changed = v, true
	}
	if changed {
		s.learned.Store(&next)
	}
}

// cfg is the server's configuration in force.
func (s *server) cfg() *config.Server { return s.conf.Load() }

// name is the server's name, which no reload changes.
func (s *server) name() string { return s.cfg().Name }

// secretsOf is every value the server runs with that may be a
// credential, by name, looked up with lookup and read with readFile: its
// env, the values it inherits from capbridge's environment (inherit_env:
// a token exported in the shell that started capbridge and passed
// through), and a remote server's credentials: its headers, the
// password and query values of its URL, and those taken from
// capbridge's environment or from files. A server may print any of them,
// and a remote one may quote what it was sent in its errors. A file is
// read as it is when the server is set up; a remote server's boot reads
// its files again, and learn adds what changed.
func secretsOf(cfg config.Server, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) map[string]string {
	out := make(map[string]string, len(cfg.Env)+len(cfg.InheritEnv))
	for _, name := range cfg.InheritEnv {
		if v, ok := lookup(name); ok {
			out[name] = v
		}
	}
	maps.Copy(out, cfg.Env) // a value given explicitly wins, as at spawn
	// What its secret references resolved to, headers' included, whole
	// and each part ("Bearer ${cmd:…}" and the token alone).
	maps.Copy(out, cfg.SecretValues())
	rm := cfg.Remote
	if rm == nil {
		return out
	}
	value := func(name, v string) { addCredential(out, name, v) }
	env := func(name, variable string) {
		if v, ok := lookup(variable); ok && variable != "" {
			value(name, v)
		}
	}
	file := func(name, path string) {
		if path == "" {
			return
		}
		if b, err := readFile(path); err == nil {
			value(name, strings.TrimSpace(string(b)))
		}
	}
	// Values written in the file need not be secrets ("X-Client:
	// capbridge", "?format=json"): only those long enough to be one are
	// taken, so that ordinary words are not redacted everywhere.
	const written = 8
	for h, v := range rm.Headers {
		if len(v) >= written {
			value("headers."+h, v)
		}
	}
	for h, variable := range rm.HeaderEnv {
		env("headers."+h, variable)
	}
	for h, path := range rm.HeaderFile {
		file("headers."+h, path)
	}
	env("bearer_token", rm.BearerTokenEnv)
	file("bearer_token", rm.BearerTokenFile)
	if u, err := url.Parse(rm.URL); err == nil {
		if p, ok := u.User.Password(); ok {
			out["url password"] = p
		}
		maps.Copy(out, pathKeys(u))
		for k, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= written {
					out["url query "+k] = v
				}
			}
		}
	}
	if o := rm.OAuth; o != nil {
		env("client_secret", o.ClientSecretEnv)
		file("client_secret", o.ClientSecretFile)
		env("idp_client_secret", o.IDPClientSecretEnv)
		file("idp_client_secret", o.IDPClientSecretFile)
		env("id_token", o.IDTokenEnv)
		file("id_token", o.IDTokenFile)
	}
	return out
}

// addCredential puts v into out under name, and, for a value with an
// auth scheme ("Bearer TOKEN"), the token alone too.
func addCredential(out map[string]string, name, v string) {
	out[name] = v
	if scheme, rest, ok := strings.Cut(v, " "); ok && len(scheme) < len(v)/2 {
		out[name+" credential"] = strings.TrimSpace(rest)
	}
}

// bootOptions carry what boot needs beyond the server's own config.
type bootOptions struct {
	clientName, clientVersion string
	surfaceBudget             int
	maxLine                   int
	cgroups                   *mcpwire.Cgroups
	// tokenDir is where capbridge login saved remote servers' logins;
	// "" uses none.
	tokenDir string
	tracer   *telemetry.Tracer // nil: traces off
}

// withoutTail is err's message without the stderr tail a
// *mcpwire.DeadError quotes in it. The tail is kept apart (status's
// stderr_tail), so the reason can be shown where stderr must not be, and
// the tail is never said twice.
func withoutTail(err error) string {
	var dead *mcpwire.DeadError
	if !errors.As(err, &dead) || len(dead.Stderr) == 0 {
		return err.Error()
	}
	return strings.Replace(err.Error(), dead.Error(), (&mcpwire.DeadError{Reason: dead.Reason}).Error(), 1)
}

// begin starts the supervisor, once; retire stops it. A server retired
// before it began never starts.
func (s *server) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil || s.state == StateRetired {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	st := s.statusLocked()
	s.log.Info().Msg("server starting")
	go s.run(ctx)
	s.progress(st)
}

// filter applies tools.allow and tools.deny, so that what is absent from
// the façade is also not callable. (A tool whose x-mcp-header
// declarations are invalid never gets here over Streamable HTTP: mcpwire
// drops and names it at listing; stdio may ignore them, 2026-07-28.) A
// tool that requires MCP tasks is served: the call path follows its task
// (mcpwire.CallToolTask).
func filter(listed []mcpwire.Tool, conf *config.Server) []mcpwire.Tool {
	var out []mcpwire.Tool
	for _, t := range listed {
		if conf.ToolsAllow != nil && !slices.Contains(conf.ToolsAllow, t.Name) || slices.Contains(conf.ToolsDeny, t.Name) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func toCodegen(tools []mcpwire.Tool) []codegen.Tool {
	out := make([]codegen.Tool, len(tools))
	for i, t := range tools {
		out[i] = codegen.ToolOf(t)
	}
	return out
}

// ready returns the live table, or why there is none.
func (s *server) ready() (*table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateReady {
		return nil, s.unavailableLocked()
	}
	return s.cur, nil
}

// errDraining is enter's refusal by a server a reload took out of the
// set: the caller looks the name up again.
var errDraining = errors.New("bridge: the server is being replaced")

// enter is ready for a call, which it counts until leave, so that a
// server a reload removes or replaces retires once its calls are done.
// It costs the call path an atomic add under the lock ready takes anyway.
func (s *server) enter() (*table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return nil, errDraining
	}
	if s.state != StateReady {
		return nil, s.unavailableLocked()
	}
	s.active.Add(1)
	return s.cur, nil
}

// still reports whether t and conf are still the server's table and
// policy, and the server still takes calls: nothing a reload does has
// happened since a call was checked against them.
func (s *server) still(t *table, conf *config.Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.draining.Load() && s.cur == t && s.conf.Load() == conf
}

// leave ends a call enter counted.
func (s *server) leave() {
	if s.active.Add(-1) == 0 && s.draining.Load() {
		s.drainOnce.Do(func() { close(s.drained) })
	}
}

// drain refuses further calls (enter says errDraining) and returns a
// channel closed once the calls entered are done. Whichever of drain and
// the last leave comes second closes it.
func (s *server) drain() <-chan struct{} {
	s.mu.Lock()
	s.draining.Store(true)
	s.mu.Unlock()
	if s.active.Load() == 0 {
		s.drainOnce.Do(func() { close(s.drained) })
	}
	return s.drained
}

// current returns the last published table, nil before the first; a
// grant records it as the surface it was issued against.
func (s *server) current() *table {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// facade returns the server's generated façade, from its last table. A
// server that is down keeps its façade (programs compiled against it get
// server_unavailable at call time); one that never booted has none.
func (s *server) facade() (*codegen.Generated, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, s.unavailableLocked()
	}
	return s.cur.gen, nil
}

// unavailableLocked says why the server takes no calls. The caller
// holds mu.
func (s *server) unavailableLocked() *unavailableError {
	e := &unavailableError{server: s.cfg().Name, state: s.state, reason: s.reason, tail: s.tail}
	if s.state == StateBackoff {
		e.next = s.nextAttempt
	}
	return e
}

// unavailableError says why a server cannot take calls, and, while it
// waits to restart, when the next attempt is. Its message names the
// server, its state and the reason; the stderr tail is carried apart, for
// unavailableMessage to show or not.
type unavailableError struct {
	server, reason string
	state          State
	tail           []byte
	next           time.Time
}

func (e *unavailableError) Error() string {
	msg := fmt.Sprintf("server %q is %s", e.server, e.state)
	if e.reason != "" {
		msg += ": " + e.reason
	}
	if !e.next.IsZero() {
		msg += fmt.Sprintf("; next attempt in %s (at %s)", time.Until(e.next).Round(time.Millisecond), e.next.UTC().Format(time.RFC3339))
	}
	return msg
}

// unavailableMessage is what a caller (or the operator's control plane)
// is told when the server cannot serve: err's message with the values
// of the server's env redacted, and the end of its stderr only when
// stderr_to_caller is set.
func (s *server) unavailableMessage(err error) string {
	msg := s.redactor().Text(err.Error())
	var u *unavailableError
	if errors.As(err, &u) {
		msg += s.callerStderr(u.tail)
	}
	return msg
}

// callerStderr renders the end of the server's stderr for a denial, or
// says where it is: callers see it only when stderr_to_caller is set,
// and then redacted and capped (redact.Redactor.Tail).
func (s *server) callerStderr(tail []byte) string {
	if len(tail) == 0 {
		return ""
	}
	if !s.cfg().StderrToCaller {
		return " (its stderr is in capbridge's status and logs)"
	}
	return "; stderr tail: " + s.redactor().Tail(tail)
}

// admit waits for a call slot for grant g (nil: operator authority) in
// the server's fair queue, for at most d. A wait that runs out is
// errCallTimeout; a full queue, an *overloadError naming the server.
func (s *server) admit(ctx context.Context, g *Grant, d time.Duration) (func(), time.Duration, error) {
	release, waited, err := s.adm.Admit(ctx, g, d)
	if err != nil {
		err = s.admitErr(err)
	}
	return release, waited, err
}

// admitErr translates fairshare's refusals into the bridge's. It is apart
// from admit so that admitted calls do not pay for errors.As's target
// escaping to the heap.
func (s *server) admitErr(err error) error {
	var ov *fairshare.Overload
	switch {
	case errors.Is(err, fairshare.ErrTimeout):
		return errCallTimeout
	case errors.As(err, &ov):
		return &overloadError{server: s.cfg().Name, Overload: ov}
	}
	return err
}

// overloadError is a call refused because the server's queue, or the
// grant's share of it, was full.
type overloadError struct {
	server string
	*fairshare.Overload
}

func (e *overloadError) Error() string { return "bridge: " + e.message() }

// message is the denial's text: whose budget was exceeded, and by what.
func (e *overloadError) message() string {
	if e.OfKey {
		return fmt.Sprintf("this grant has %d calls running and %d waiting at server %q, its share (max_inflight_per_grant %d, max_queue_per_grant %d); other grants are unaffected; try again later",
			e.Running, e.Queued, e.server, e.LimRun, e.LimQ)
	}
	return fmt.Sprintf("server %q has %d calls running and %d waiting (max_inflight %d, max_queue %d); try again later",
		e.server, e.Running, e.Queued, e.LimRun, e.LimQ)
}

// holdSlot keeps an abandoned call's admission slot until the server
// answers it (answered closes: its late reply, or the client's death or
// close) or cancel_grace passes, whichever is first; then release. MCP
// cancellation is advisory, so without this a caller that cancels and
// retries could keep any number of operations running at a server that
// max_inflight says runs a few. One goroutine per abandoned call (the
// rare case), ending by cancel_grace at the latest.
func (s *server) holdSlot(answered <-chan struct{}, release func()) {
	s.abandoned.Add(1)
	t := time.NewTimer(s.cfg().CancelGrace)
	go func() {
		defer t.Stop()
		select {
		case <-answered:
		case <-t.C:
		}
		s.abandoned.Add(-1)
		release()
	}()
}

// retire stops the supervisor (an attempt in progress is abandoned, a
// backoff wait ends) and shuts the live client down with mcpwire's
// bounded sequence, returning its evidence. It is idempotent.
func (s *server) retire() (mcpwire.Exit, error) {
	defer s.logs.Flush()
	s.mu.Lock()
	was, stop := s.state, s.stop
	s.state = StateRetired
	s.mu.Unlock()
	if was == StateRetired {
		return mcpwire.Exit{}, nil
	}
	if stop != nil {
		stop()
		<-s.runDone
	}
	// run may have moved the state on its way out (into backoff, after
	// a death it was shutting down); it has returned, so retired holds.
	// A Boot still waiting for the first attempt hears it was retired.
	s.mu.Lock()
	s.state = StateRetired
	client := s.live
	s.live = nil
	first := s.settleFirst()
	s.mu.Unlock()
	if first != nil {
		close(first)
	}
	if client == nil {
		return mcpwire.Exit{}, nil
	}
	start := time.Now()
	exit, err := client.Close()
	ev := s.log.Info()
	if err != nil {
		ev = s.log.Error().Err(err)
	}
	ev.Str("exit", exit.Status).Dur("took", time.Since(start)).Msg("server retired")
	return exit, err
}

// serverStatus is one server's line in status.
type serverStatus struct {
	Name          string `msgpack:"name"`
	State         string `msgpack:"state"`
	PID           int    `msgpack:"pid,omitempty"`
	Reason        string `msgpack:"reason,omitempty"`
	Tools         int    `msgpack:"tools"`
	Inflight      int64  `msgpack:"inflight"`
	Abandoned     int64  `msgpack:"abandoned"`
	Queued        int64  `msgpack:"queued"`
	Calls         int64  `msgpack:"calls"`
	Errors        int64  `msgpack:"errors"`
	StderrTail    string `msgpack:"stderr_tail,omitempty"`
	Restart       string `msgpack:"restart"`
	Restarts      int64  `msgpack:"restarts"`
	LastExit      string `msgpack:"last_exit,omitempty"`
	BackoffMS     int64  `msgpack:"backoff_ms,omitempty"`
	NextAttemptMS int64  `msgpack:"next_attempt_ms,omitempty"`
	// Withheld is each tool the lock withholds, as "name: drift".
	Withheld []string `msgpack:"withheld,omitempty"`
	// Transport is how the server is reached (stdio, streamable-http,
	// sse); URL, for a remote server, its address without query or
	// credentials.
	Transport string `msgpack:"transport,omitempty"`
	URL       string `msgpack:"url,omitempty"`
	// The era and revision the server speaks, and who it says it is.
	Era           string `msgpack:"era,omitempty"`
	Protocol      string `msgpack:"protocol,omitempty"`
	ServerName    string `msgpack:"server_name,omitempty"`
	ServerVersion string `msgpack:"server_version,omitempty"`
	// Login, when set, says that a person's login must be renewed and
	// how: a remote server wants scopes the login's token lacks.
	Login string `msgpack:"login,omitempty"`
}

func (s *server) status() serverStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

// statusLocked is status; the caller holds mu. What it says of the
// server's own words (the reason, the stderr tail) has the server's
// resolved secrets redacted.
func (s *server) statusLocked() (st serverStatus) {
	defer func() {
		st.Reason, st.StderrTail = s.secrets.Ring(st.Reason), s.secrets.Ring(st.StderrTail)
	}()
	st = serverStatus{
		Name: s.cfg().Name, State: string(s.state), Reason: s.reason,
		Inflight: s.adm.Running(), Abandoned: s.abandoned.Load(), Queued: s.adm.Queued(), Calls: s.calls.Load(), Errors: s.errs.Load(),
		StderrTail: truncate.Tail(s.tail, -1),
		Restart:    string(s.cfg().Restart), Restarts: s.restarts.Load(), LastExit: s.lastExit,
	}
	if s.cur != nil {
		st.Tools = len(s.cur.tools)
		st.Withheld = s.cur.withheldList()
	}
	st.Transport = "stdio"
	if rm := s.cfg().Remote; rm != nil {
		st.Transport, st.URL = rm.Transport, shownURL(rm.URL)
	}
	if login := s.login.Load(); login != nil {
		if want := login.StepUp(); len(want) > 0 {
			st.Login = fmt.Sprintf("calls need the scopes %q, which the login's token lacks: run `capbridge login %s`", strings.Join(want, " "), s.cfg().Name)
		}
	}
	switch s.state {
	case StateReady:
		st.StderrTail = truncate.Tail(s.cur.client.StderrTail(), -1)
		info := s.cur.client.ServerInfo()
		st.Era, st.Protocol = s.cur.client.Era().String(), s.cur.client.ProtocolVersion()
		st.Transport = s.cur.client.Transport()
		st.ServerName, st.ServerVersion = strings.ToValidUTF8(info.Name, "\uFFFD"), strings.ToValidUTF8(info.Version, "\uFFFD")
		select {
		case <-s.cur.client.Done():
			// Dead, and the supervisor has yet to act on it: ready
			// would be a lie, with the pid of a process that is gone.
			st.State, st.Reason = string(StateDead), "died: "+s.redactor().Text(withoutTail(s.cur.client.Err()))
		default:
			st.PID = s.cur.client.Pid()
		}
	case StateBackoff, StateNeedsLogin:
		st.BackoffMS, st.NextAttemptMS = s.wait.Milliseconds(), s.nextAttempt.UnixMilli()
	}
	return st
}

// transportNow is how the server is reached: stdio for a process; for a
// remote server the transport its last connection spoke, or the
// configured one before the first.
func (s *server) transportNow() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.cfg().Remote == nil:
		return "stdio"
	case s.cur != nil && s.cur.client != nil:
		return s.cur.client.Transport()
	}
	return s.cfg().Remote.Transport
}

// snapshot returns the server's state, and why it is not serving.
func (s *server) snapshot() Status {
	st := s.status()
	return Status{State: State(st.State), Reason: st.Reason, StderrTail: st.StderrTail}
}

// shownURL is a configured URL as status may show it: without
// credentials, query or fragment (a query may hold an API key), and
// with a path segment that looks like a key (pathKeys) replaced.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	for name, key := range pathKeys(u) {
		shown = strings.ReplaceAll(shown, key, "[redacted:"+name+"]")
	}
	return shown
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
