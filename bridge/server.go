package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/mcpwire"
)

// State is where a configured server is in its life. A server starts
// starting; boot leaves it ready or failed; a ready server that dies on
// its own is dead; Shutdown leaves a ready or dead one retired. Failed,
// dead and retired are final: capbridge never restarts a server silently.
// Its text is what the control plane's status reports.
type State string

// The states of a server, as status reports them.
const (
	StateStarting State = "starting"
	StateReady    State = "ready"
	StateFailed   State = "failed"  // boot failed; never served
	StateDead     State = "dead"    // served, then died (crash, framing fault)
	StateRetired  State = "retired" // shut down by us
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

// Outcome is how one server's boot ended.
type Outcome struct {
	Name string
	Status
}

// server is the custody of one configured MCP server: its client, its
// tool table and façade (fixed at boot), and its admission control.
//
// Boot writes client, tools and gen once, before the server is published
// as ready (state is the publication point, read under mu); after that
// they are read-only, so the call path reads them without a lock.
type server struct {
	cfg config.Server
	// log is rate-limited per message (loglimit.go): mcpwire logs the
	// server's stderr lines, requests and notifications through it.
	log    zerolog.Logger
	logs   *logLimiter // log's limiter; flushed when the server ends
	redact *redactor   // the values of cfg.Env, for what callers are told

	mu     sync.Mutex
	state  State
	reason string // why it failed or died
	tail   []byte // stderr tail captured at failure or death

	client *mcpwire.Client
	tools  map[string]mcpwire.Tool // callable tools (after allow/deny)
	listed []mcpwire.Tool          // the same, in the server's order, for the listing op
	gen    *codegen.Generated
	// watched is closed when watch, started once the server is ready,
	// returns; retire waits for it, so the goroutine has an owner.
	watched chan struct{}

	// Admission: max_inflight calls run at the server, max_queue wait,
	// each grant holding at most its share of both (shares). Its gauges
	// are for status; the bridge's account of the calls Shutdown waits
	// for is its flight.
	adm *shares

	calls, errs atomic.Int64

	metrics *serverSeries // set by newMetrics; nil records nothing
}

func newServer(cfg config.Server, log zerolog.Logger) *server {
	log, logs := limitLogs(log.With().Str("server", cfg.Name).Logger())
	return &server{
		cfg:    cfg,
		log:    log,
		logs:   logs,
		redact: newRedactor(cfg.Env),
		state:  StateStarting,
		adm:    newShares(cfg.MaxInflight, cfg.InflightPerGrant(), cfg.MaxQueue, cfg.QueuePerGrant()),
	}
}

// bootOptions carry what boot needs beyond the server's own config.
type bootOptions struct {
	clientName, clientVersion string
	surfaceBudget             int
	maxLine                   int
}

// boot starts the server, handshakes, lists its tools and generates its
// façade, all within the server's startup_timeout. On failure the server
// is left failed with the reason and the stderr tail, and any process is
// already shut down.
func (s *server) boot(ctx context.Context, o bootOptions) error {
	defer s.metrics.booted(s, time.Now())
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartupTimeout)
	defer cancel()
	env := make([]string, 0, len(s.cfg.Env))
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		env = append(env, k+"="+s.cfg.Env[k])
	}
	cmd := mcpwire.Command{
		Argv:    append([]string{s.cfg.Command}, s.cfg.Args...),
		Env:     env,
		Inherit: nonNil(s.cfg.InheritEnv),
		Dir:     s.cfg.Cwd,
		Logger:  &s.log,
	}
	client, err := mcpwire.Start(ctx, cmd, mcpwire.Config{
		ClientName:      o.clientName,
		ClientVersion:   o.clientVersion,
		Logger:          &s.log,
		MaxLineBytes:    o.maxLine,
		CallIdleTimeout: s.cfg.CallTimeout,
		CallMaxTimeout:  s.cfg.MaxCallTimeout,
		// The bridge admits at most max_inflight calls plus the queue;
		// the client's own bound is a backstop above that.
		MaxInFlight: s.cfg.MaxInflight,
		// The per-server cap applies after tools.allow and tools.deny:
		// list what the generator can plan, then count what is exposed.
		MaxTools: codegen.MaxListedTools,
	})
	if err != nil {
		return s.fail(err, nil)
	}
	listed, err := client.ListTools(ctx)
	if err != nil {
		return s.fail(err, client)
	}
	tools := s.filter(listed)
	for _, e := range s.cfg.UnmatchedTools(func(name string) bool {
		return slices.ContainsFunc(listed, func(t mcpwire.Tool) bool { return t.Name == name })
	}) {
		if s.cfg.Strict {
			return s.fail(fmt.Errorf("%s names no tool of this server (an error under --strict)", e), client)
		}
		s.log.Warn().Str("entry", e).Msg("a tools.allow or tools.deny entry names no tool of this server; check its spelling")
	}
	if len(tools) > codegen.MaxTools {
		return s.fail(fmt.Errorf("%d tools are left after tools.allow and tools.deny, more than the %d a server may expose", len(tools), codegen.MaxTools), client)
	}
	gen, err := codegen.Generate(s.cfg.Name, toCodegen(tools), codegen.Options{SurfaceBudget: o.surfaceBudget})
	if err != nil {
		return s.fail(fmt.Errorf("generating its façade: %w", err), client)
	}
	table := make(map[string]mcpwire.Tool, len(tools))
	for _, t := range tools {
		table[t.Name] = t
	}
	s.mu.Lock()
	s.client, s.tools, s.listed, s.gen, s.state = client, table, tools, gen, StateReady
	s.watched = make(chan struct{})
	s.mu.Unlock()
	s.log.Info().Int("tools", len(tools)).Int("listed", len(listed)).Msg("server ready")
	go s.watch(client, s.watched)
	return nil
}

// fail records a boot failure. A client that did start is shut down
// first, so a failed server leaves no process behind.
func (s *server) fail(err error, client *mcpwire.Client) error {
	var tail []byte
	var dead *mcpwire.DeadError
	if errors.As(err, &dead) {
		tail = dead.Stderr
	}
	if client != nil {
		if _, cerr := client.Close(); cerr != nil {
			s.log.Error().Err(cerr).Msg("shutting down a server that failed to boot")
		}
	}
	reason := withoutTail(err)
	s.mu.Lock()
	s.state, s.reason, s.tail = StateFailed, reason, tail
	s.mu.Unlock()
	s.log.Error().Str("error", reason).Bytes("stderr_tail", tail).Msg("server failed to boot")
	s.logs.flush()
	return err
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

// watch marks the server dead when its client dies on its own. Servers
// are never restarted silently: a dead server answers server_unavailable
// until the operator restarts capbridge.
func (s *server) watch(client *mcpwire.Client, watched chan<- struct{}) {
	defer close(watched)
	<-client.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateReady {
		return // retired by us
	}
	err := client.Err()
	var dead *mcpwire.DeadError
	if errors.As(err, &dead) {
		s.tail = dead.Stderr
	}
	s.state, s.reason = StateDead, withoutTail(err)
	s.log.Error().Str("error", s.reason).Bytes("stderr_tail", s.tail).Msg("server died")
	s.logs.flush()
}

// filter applies tools.allow and tools.deny, and drops tools that
// require MCP tasks (2025-11-25: such a tool cannot be called without a
// task, which this client does not speak, and the server must answer
// -32601), so that what is absent from the façade is also not callable.
func (s *server) filter(listed []mcpwire.Tool) []mcpwire.Tool {
	var out []mcpwire.Tool
	for _, t := range listed {
		switch {
		case s.cfg.ToolsAllow != nil && !slices.Contains(s.cfg.ToolsAllow, t.Name),
			slices.Contains(s.cfg.ToolsDeny, t.Name):
			continue
		case t.NeedsTasks():
			s.log.Warn().Str("tool", t.Name).Msg("tool requires MCP tasks, which capbridge does not speak; leaving it out")
			continue
		}
		out = append(out, t)
	}
	return out
}

func toCodegen(tools []mcpwire.Tool) []codegen.Tool {
	out := make([]codegen.Tool, len(tools))
	for i, t := range tools {
		ct := codegen.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
		if a := t.Annotations; a != nil {
			if ct.Title == "" {
				ct.Title = a.Title
			}
			ct.Hints = codegen.Hints{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint, Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint}
		}
		out[i] = ct
	}
	return out
}

// ready returns the live client and tool table, or why there is none.
func (s *server) ready() (*mcpwire.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateReady {
		return nil, &unavailableError{server: s.cfg.Name, state: s.state, reason: s.reason, tail: s.tail}
	}
	return s.client, nil
}

// facade returns the server's generated façade. A server that died
// after boot keeps its façade (programs compiled against it get
// server_unavailable at call time); one that never booted has none.
func (s *server) facade() (*codegen.Generated, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil {
		return nil, &unavailableError{server: s.cfg.Name, state: s.state, reason: s.reason, tail: s.tail}
	}
	return s.gen, nil
}

// unavailableError says why a server cannot take calls. Its message
// names the server, its state and the reason; the stderr tail is carried
// apart, for unavailableMessage to show or not.
type unavailableError struct {
	server, reason string
	state          State
	tail           []byte
}

func (e *unavailableError) Error() string {
	msg := fmt.Sprintf("server %q is %s", e.server, e.state)
	if e.reason != "" {
		msg += ": " + e.reason
	}
	return msg
}

// unavailableMessage is what a caller (or the operator's control plane)
// is told when the server cannot serve: err's message with the values
// of the server's env redacted, and the end of its stderr only when
// stderr_to_caller is set.
func (s *server) unavailableMessage(err error) string {
	msg := s.redact.text(err.Error())
	var u *unavailableError
	if errors.As(err, &u) {
		msg += s.callerStderr(u.tail)
	}
	return msg
}

// callerStderr renders the end of the server's stderr for a denial, or
// says where it is: callers see it only when stderr_to_caller is set,
// and then redacted and capped (redactor.tail).
func (s *server) callerStderr(tail []byte) string {
	if len(tail) == 0 {
		return ""
	}
	if !s.cfg.StderrToCaller {
		return " (its stderr is in capbridge's status and logs)"
	}
	return "; stderr tail: " + s.redact.tail(tail)
}

// admit waits for a call slot for grant g (nil: operator authority) in
// the server's fair queue (shares.admit).
func (s *server) admit(ctx context.Context, g *Grant, d time.Duration) (func(), time.Duration, error) {
	return s.adm.admit(ctx, s.cfg.Name, g, d)
}

// retire shuts the server down with mcpwire's bounded sequence and
// returns its evidence. It is idempotent.
func (s *server) retire() (mcpwire.Exit, error) {
	defer s.logs.flush()
	s.mu.Lock()
	client, watched := s.client, s.watched
	was := s.state
	if was == StateReady || was == StateDead {
		s.state = StateRetired
	}
	s.mu.Unlock()
	if client == nil || was == StateRetired {
		return mcpwire.Exit{}, nil
	}
	start := time.Now()
	exit, err := client.Close()
	<-watched // Close has ended the client, so watch returns
	ev := s.log.Info()
	if err != nil {
		ev = s.log.Error().Err(err)
	}
	ev.Str("exit", exit.Status).Dur("took", time.Since(start)).Msg("server retired")
	return exit, err
}

// serverStatus is one server's line in status.
type serverStatus struct {
	Name       string `msgpack:"name"`
	State      string `msgpack:"state"`
	PID        int    `msgpack:"pid,omitempty"`
	Reason     string `msgpack:"reason,omitempty"`
	Tools      int    `msgpack:"tools"`
	Inflight   int64  `msgpack:"inflight"`
	Queued     int64  `msgpack:"queued"`
	Calls      int64  `msgpack:"calls"`
	Errors     int64  `msgpack:"errors"`
	StderrTail string `msgpack:"stderr_tail,omitempty"`
}

func (s *server) status() serverStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := serverStatus{
		Name: s.cfg.Name, State: string(s.state), Reason: s.reason, Tools: len(s.tools),
		Inflight: s.adm.inflight.Load(), Queued: s.adm.waiting.Load(), Calls: s.calls.Load(), Errors: s.errs.Load(),
		StderrTail: validTail(s.tail),
	}
	if s.state == StateReady {
		st.PID = s.client.Pid()
		st.StderrTail = validTail(s.client.StderrTail())
	}
	return st
}

// snapshot returns the server's state, and why it is not serving.
func (s *server) snapshot() Status {
	st := s.status()
	return Status{State: State(st.State), Reason: st.Reason, StderrTail: st.StderrTail}
}

// validTail renders a stderr tail as valid UTF-8: the ring cuts at any
// byte, so its first character may be split, and a server may print
// anything; status replies must decode everywhere.
func validTail(b []byte) string {
	for n := 0; n < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); n++ {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
