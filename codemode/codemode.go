// Package codemode implements capbridge's code-mode front: it runs a
// model-written program (TypeScript, Python or Go) in a jail with the
// façades of the servers it asked for importable, under a grant issued
// for that run alone and revoked when it ends, and returns the program's
// output, exit, returned value and accounting. It reaches the bridge
// only through the control socket, so the bridge may run in the same
// process or be a `capbridge serve` it attached to. It also writes the
// tool descriptions `capbridge mcp` serves, which carry the surface.
package codemode

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/bridge/control"
	tsclient "github.com/capbridge/capbridge/capwire/ts"
	"github.com/capbridge/capbridge/jail"
)

// Errors callers branch on.
var (
	// ErrBadRequest: the run request is malformed (an unknown language, a
	// server not offered, code too long, a timeout out of range).
	ErrBadRequest = errors.New("codemode: bad run request")
	// ErrUnavailable: the language's runtime or client is not installed
	// here, or the bridge cannot be reached.
	ErrUnavailable = errors.New("codemode: unavailable")
)

// Languages a program may be written in, by the name a run request uses.
const (
	TypeScript = "typescript"
	Python     = "python"
	Go         = "go"
)

// Bounds of a run request.
const (
	MaxCode        = 256 << 10
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
	// grantSlack is how much longer than its wall clock a run's grant
	// lives: the grant is revoked when the run ends, and the slack only
	// covers the jail's start.
	grantSlack = 10 * time.Second
)

// Paths in the jail.
const (
	jailSocket = "/run/capbridge/call.sock"
	jailWork   = "/work"
)

//go:embed runner/runner.mjs
var runnerTS []byte

//go:embed runner/runner.py
var runnerPy []byte

// StripTypes is the jail's Transformer for TypeScript: it compiles a
// program's text to the JavaScript Node runs (capwire/ts.StripTypes,
// which compiles the client too).
var StripTypes = tsclient.StripTypes

// Config configures a Runner.
type Config struct {
	// Control is the bridge's control socket.
	Control string
	// CallSocket is the call socket's host path; empty means the one the
	// bridge's status names.
	CallSocket string
	// Jail is the jail every run uses.
	Jail *jail.Config
	// Servers are the servers a run may reach; nil means every server the
	// bridge has. A run names a subset, or gets them all.
	Servers []string
	// AllowDestructive lets a run call the tools its servers' operator
	// declared destructive, or the servers marked destructiveHint: true.
	// It is the operator's choice, never the program's: a run's grant
	// otherwise refuses them not_granted.
	AllowDestructive bool
	// Languages offered, in the order tool descriptions show them; nil
	// means TypeScript and Python, those whose runtime is present. Go is
	// offered when named: its first start here compiles the standard
	// library into a build cache kept for later starts.
	Languages []string
	// Node, Python and Go are the runtimes' binaries (default: node,
	// python3 and go on PATH, resolved to real files).
	Node, Python, Go string
	// GoCache is where Go's prepared trees (the client's source, module
	// and build caches) are kept (default: the user's cache directory's
	// capbridge/, or /var/cache/capbridge as root).
	GoCache string
	// TSClient and PyClient override the clients this binary carries
	// with a checkout's (capwire/ts, whose src/*.ts are compiled;
	// capwire/python, whose capwire package is given): for developing a
	// client. Empty means the binary's own.
	TSClient, PyClient string
	// DefaultTimeout and MaxTimeout bound a run's wall clock.
	DefaultTimeout, MaxTimeout time.Duration
	// Warm is how many prestarted jails each of TypeScript and Python
	// keeps ready (0: none, every run cold): built, the runtime started and
	// the client loaded, waiting for a program. Each runs one program. Not
	// for Go, nor under a wrapper.
	Warm int
	// NoCgroup leaves cgroup v2 limits off even where a delegated cgroup
	// is found (New looks for one unless Jail.Cgroup is set).
	NoCgroup bool
}

// Runner runs programs. Its methods are safe for concurrent use.
type Runner struct {
	cfg     Config
	ctx     context.Context // ends with Close: background preparations stop
	stop    context.CancelFunc
	runtime map[string]*runtimeInfo
	langs   []string
	cgroup  jail.CgroupStatus

	mu         sync.Mutex
	callSocket string
	pools      map[string]*pool // by language, once started
}

// New prepares a Runner: it resolves each language's runtime and client,
// and offers the languages that have both. Unless cfg.NoCgroup, it looks
// for a delegated cgroup v2 and, finding one, prepares it and sets it in
// cfg.Jail, so each run gets memory, pids and cpu limits of its own;
// CgroupStatus says whether it did, or why not.
func New(cfg Config) (*Runner, error) {
	if cfg.Jail == nil {
		cfg.Jail = &jail.Config{}
	}
	cgroup := jail.CgroupStatus{Reason: "turned off (NoCgroup)"}
	switch {
	case cfg.Jail.Cgroup != nil:
		cgroup = jail.CgroupStatus{Available: true, Dir: cfg.Jail.Cgroup.Dir}
	case !cfg.NoCgroup:
		cfg.Jail.Cgroup, cgroup = jail.UseCgroup()
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = MaxTimeout
	}
	r := &Runner{cfg: cfg, runtime: map[string]*runtimeInfo{}, callSocket: cfg.CallSocket, cgroup: cgroup}
	r.ctx, r.stop = context.WithCancel(context.Background())
	want := cfg.Languages
	if want == nil {
		want = []string{TypeScript, Python}
	}
	var missing []string
	for _, lang := range want {
		info, err := resolveRuntime(lang, &cfg)
		if err != nil {
			if cfg.Languages != nil {
				return nil, err
			}
			missing = append(missing, err.Error())
			continue
		}
		r.runtime[lang] = info
		r.langs = append(r.langs, lang)
	}
	if len(r.langs) == 0 {
		return nil, fmt.Errorf("%w: no language can run here: %s", ErrUnavailable, strings.Join(missing, "; "))
	}
	return r, nil
}

// Close stops what the Runner does in the background (preparing Go's
// build cache) and waits for it. Runs still going are the callers'.
func (r *Runner) Close() {
	r.stop()
	r.mu.Lock()
	pools := r.pools
	r.mu.Unlock()
	for _, p := range pools {
		<-p.done
	}
	if rt := r.runtime[Go]; rt != nil {
		rt.prep.once.Do(func() { close(rt.prep.done) })
		<-rt.prep.done
	}
}

// Prewarm starts the pools of warm jails (Config.Warm), which Run would
// otherwise start at the first run. It needs the call socket's path.
func (r *Runner) Prewarm(ctx context.Context) error {
	if r.cfg.Warm <= 0 || len(r.cfg.Jail.Wrap) > 0 {
		return nil
	}
	sock, err := r.socket(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pools != nil || r.ctx.Err() != nil {
		return nil
	}
	r.pools = map[string]*pool{}
	for _, lang := range r.langs {
		if lang == Go {
			continue
		}
		r.pools[lang] = startPool(r.ctx, r.runtime[lang], r.cfg.Jail, sock, r.cfg.Warm)
	}
	return nil
}

// Ready is how many warm jails of lang wait now (0 before Prewarm or the
// first run).
func (r *Runner) Ready(lang string) int {
	r.mu.Lock()
	p := r.pools[lang]
	r.mu.Unlock()
	if p == nil {
		return 0
	}
	return len(p.ready)
}

// warm is a warm jail for lang, or nil.
func (r *Runner) warm(ctx context.Context, lang string) *jail.Warm {
	if r.cfg.Warm <= 0 {
		return nil
	}
	if err := r.Prewarm(ctx); err != nil {
		return nil
	}
	r.mu.Lock()
	p := r.pools[lang]
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.take()
}

// PrepareGo starts preparing Go's build cache now, rather than at the
// first Go run, and waits for it while ctx lasts.
func (r *Runner) PrepareGo(ctx context.Context) error {
	rt := r.runtime[Go]
	if rt == nil {
		return fmt.Errorf("%w: go is not offered", ErrUnavailable)
	}
	return rt.prep.wait(ctx, r)
}

// CgroupStatus says whether runs get cgroup v2 limits, and why not.
func (r *Runner) CgroupStatus() jail.CgroupStatus { return r.cgroup }

// Languages lists the languages offered.
func (r *Runner) Languages() []string { return slices.Clone(r.langs) }

// Request is one run.
type Request struct {
	Language string
	Code     string
	// Servers the program may call; nil means every server offered.
	Servers []string
	// Timeout is the run's wall clock; 0 means the default. What comes
	// before the program starts (the bridge's status, façades and grant)
	// has that long and grantSlack more; a first Go run's wait for its
	// build cache comes before that, bounded by the preparation's own
	// limit (goPrepWall), as the first run is documented to wait.
	Timeout time.Duration
}

// Result is what a run produced.
type Result struct {
	Run      string   `json:"run"`      // the run's id, as the audit trail names it
	Language string   `json:"language"` //
	Servers  []string `json:"servers"`  // the servers it could reach
	// Ended says how it ended: exit, wall_clock, output_limit, cancelled.
	Ended    string `json:"ended"`
	ExitCode int    `json:"exit_code"`        // -1 when a signal ended it
	Signal   string `json:"signal,omitempty"` //
	Stdout   string `json:"stdout"`           // its head
	Stderr   string `json:"stderr"`           // its tail
	// StdoutBytes and StderrBytes count everything written.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// Value is what the program returned, as JSON (TypeScript: its
	// default export; Python: its last expression, or a variable named
	// result); absent when it returned nothing.
	Value json.RawMessage `json:"result,omitempty"`
	// Accounting: calls made (denied ones included), denials, argument
	// and result bytes, and the run's time.
	Calls       int64 `json:"calls"`
	Denied      int64 `json:"denied"`
	ArgBytes    int64 `json:"arg_bytes"`
	ResultBytes int64 `json:"result_bytes"`
	TookMS      int64 `json:"took_ms"`
	// Warm is set when the run took a prestarted jail (Config.Warm).
	Warm bool `json:"warm"`
	// Cgroup says whether the run as a whole was bounded by a cgroup v2
	// of its own (memory, pids, cpu), or why not.
	Cgroup jail.CgroupStatus `json:"cgroup"`
}

// OK reports whether the program exited 0.
func (r *Result) OK() bool { return r.Ended == string(jail.EndedExit) && r.ExitCode == 0 }

// Run runs one program to its end. An error means it could not run (a bad
// request, an unavailable runtime, a jail that could not be built); every
// way the program itself ends is a Result.
func (r *Runner) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	rt, ok := r.runtime[req.Language]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: language %q is not offered here (offered: %s)", ErrBadRequest, req.Language, strings.Join(r.langs, ", "))
	case req.Code == "":
		return nil, fmt.Errorf("%w: the code is empty", ErrBadRequest)
	case len(req.Code) > MaxCode:
		return nil, fmt.Errorf("%w: the code is %d bytes, more than %d", ErrBadRequest, len(req.Code), MaxCode)
	case req.Timeout < 0 || req.Timeout > r.cfg.MaxTimeout:
		return nil, fmt.Errorf("%w: timeout %s is not within (0, %s]", ErrBadRequest, req.Timeout, r.cfg.MaxTimeout)
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = r.cfg.DefaultTimeout
	}
	if rt.prep != nil {
		if err := rt.prep.wait(ctx, r); err != nil {
			return nil, err
		}
	}
	// The setup is bounded by the run's own time: a bridge that does not
	// answer cannot hold a caller whose context has no deadline (a stdio
	// host's) past what it asked for.
	setup, endSetup := context.WithTimeout(ctx, timeout+grantSlack)
	defer endSetup()
	setupEnds, _ := setup.Deadline()
	late := func(err error) error {
		switch {
		// By the clock, not setup.Err(): a read given the deadline can
		// time out an instant before the context's own timer fires.
		case ctx.Err() != nil || time.Now().Before(setupEnds):
			return err
		case errors.Is(err, ErrUnavailable):
			return fmt.Errorf("%w (the run's setup took longer than its timeout and %s more)", err, grantSlack)
		}
		return fmt.Errorf("%w: the run's setup took longer than its timeout and %s more: %v", ErrUnavailable, grantSlack, err)
	}
	// One control connection carries the whole run, setup to revocation:
	// the bridge admits a bounded number, which its operator and harness
	// share with every run.
	cc, err := control.Dial(setup, r.cfg.Control)
	if err != nil {
		return nil, late(fmt.Errorf("%w: %v", ErrUnavailable, err))
	}
	defer cc.Close()
	st, err := cc.Status(setup)
	if err != nil {
		return nil, late(fmt.Errorf("%w: %v", ErrUnavailable, err))
	}
	servers, err := r.serversFrom(st, req.Servers)
	if err != nil {
		return nil, late(err)
	}
	callSocket, err := r.socketFrom(st)
	if err != nil {
		return nil, late(err)
	}
	files, err := r.facades(setup, cc, rt, servers)
	if err != nil {
		return nil, late(err)
	}
	sum := sha256.Sum256([]byte(req.Code))
	runID := newRunID()
	grantServers := map[string][]string{}
	for _, s := range servers {
		grantServers[s] = nil
	}
	ttl := uint64((timeout + grantSlack) / time.Millisecond)
	g, err := cc.Grant(setup, &control.GrantRequest{Servers: grantServers, TTLMS: &ttl, AllowDestructive: r.cfg.AllowDestructive,
		Run: &control.Run{ID: runID, Language: req.Language, CodeSHA256: hex.EncodeToString(sum[:])}})
	if err != nil {
		return nil, late(fmt.Errorf("codemode: granting the run: %w", err))
	}
	var out *jail.Outcome
	var runErr error
	warm := false
	if w := r.warm(ctx, req.Language); w != nil {
		d := rt.delivery(req.Code, files, g.Token)
		d.WallClock = timeout
		out, runErr = w.Run(ctx, d)
		// A warm jail that died while it waited (its runtime killed by a
		// limit, say) costs the run nothing: it runs cold. ErrSetup says
		// the program never had its token; once it had, the jail reports
		// an outcome, since running it again would repeat its calls.
		if errors.Is(runErr, jail.ErrSetup) && ctx.Err() == nil {
			out, runErr = nil, nil
		}
		warm = out != nil
	}
	if out == nil && runErr == nil {
		prog := rt.program(req.Code, files, g.Token, callSocket)
		prog.WallClock = timeout
		out, runErr = r.cfg.Jail.Run(ctx, prog)
	}

	end := &control.RunEnd{Ended: "setup_failed", ExitCode: -1, TookMS: time.Since(start).Milliseconds()}
	if out != nil {
		end.Ended, end.ExitCode = string(out.Ended), out.ExitCode
	}
	// Revoked whatever happened to the run, and with a context of its own:
	// the caller's may be what ended it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rv, revErr := cc.Revoke(rctx, &control.RevokeRequest{Grant: g.Grant, Run: end})
	if runErr != nil {
		return nil, fmt.Errorf("codemode: %w", runErr)
	}
	res := &Result{Run: runID, Language: req.Language, Servers: servers, Ended: string(out.Ended), ExitCode: out.ExitCode,
		Signal: out.Signal, Stdout: string(out.Stdout), Stderr: string(out.Stderr), StdoutBytes: out.StdoutBytes,
		StderrBytes: out.StderrBytes, TookMS: time.Since(start).Milliseconds(), Cgroup: r.cgroup, Warm: warm}
	// JSON must be UTF-8 (RFC 8259, 8.1), which json.Valid does not
	// check: the program's bytes would reach the host's reply raw.
	if len(out.Result) > 0 && !out.ResultTruncated && json.Valid(out.Result) && utf8.Valid(out.Result) {
		res.Value = out.Result
	} else if len(out.Result) > 0 {
		res.Stderr += fmt.Sprintf("\n[capbridge: the returned value was not valid JSON (UTF-8) or passed %d bytes, and is left out]", jail.MaxResult)
	}
	if revErr == nil {
		res.Calls, res.Denied, res.ArgBytes, res.ResultBytes = rv.Calls, rv.Denied, rv.ArgBytes, rv.ResultBytes
	}
	return res, nil
}

// servers resolves a request's servers against those offered.
func (r *Runner) servers(ctx context.Context, asked []string) ([]string, error) {
	st, err := r.status(ctx)
	if err != nil {
		return nil, err
	}
	return r.serversFrom(st, asked)
}

// serversFrom resolves asked against the servers st offers.
func (r *Runner) serversFrom(st *control.Status, asked []string) ([]string, error) {
	offered := r.offeredFrom(st)
	if len(asked) == 0 {
		if len(offered) == 0 {
			return nil, fmt.Errorf("%w: no server is ready", ErrUnavailable)
		}
		return offered, nil
	}
	var out []string
	for _, s := range asked {
		if !slices.Contains(offered, s) {
			return nil, fmt.Errorf("%w: server %q is not offered (offered: %s)", ErrBadRequest, s, strings.Join(offered, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Offered lists the servers a run may reach now: the configured ones (or
// all the bridge has) that are ready, in the bridge's order.
func (r *Runner) Offered(ctx context.Context) ([]string, error) {
	st, err := r.status(ctx)
	if err != nil {
		return nil, err
	}
	return r.offeredFrom(st), nil
}

// offeredFrom is Offered's list, from a status.
func (r *Runner) offeredFrom(st *control.Status) []string {
	var out []string
	for _, s := range st.Servers {
		if s.State != "ready" || (r.cfg.Servers != nil && !slices.Contains(r.cfg.Servers, s.Name)) {
			continue
		}
		out = append(out, s.Name)
	}
	return out
}

func (r *Runner) status(ctx context.Context) (*control.Status, error) {
	cc, err := control.Dial(ctx, r.cfg.Control)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer cc.Close()
	st, err := cc.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return st, nil
}

// socket is the call socket's host path: configured, or the bridge's.
func (r *Runner) socket(ctx context.Context) (string, error) {
	r.mu.Lock()
	s := r.callSocket
	r.mu.Unlock()
	if s != "" {
		return s, nil
	}
	st, err := r.status(ctx)
	if err != nil {
		return "", err
	}
	return r.socketFrom(st)
}

// socketFrom is socket's answer given a status: configured, else the one
// st names.
func (r *Runner) socketFrom(st *control.Status) (string, error) {
	r.mu.Lock()
	s := r.callSocket
	r.mu.Unlock()
	if s != "" {
		return s, nil
	}
	if st.CallSocket == "" {
		return "", fmt.Errorf("%w: the bridge does not name its call socket; give it (--call-socket)", ErrUnavailable)
	}
	r.mu.Lock()
	r.callSocket = st.CallSocket
	r.mu.Unlock()
	return st.CallSocket, nil
}

// facades fetches the façades of servers in rt's language over cc, as
// the files a program imports.
func (r *Runner) facades(ctx context.Context, cc *control.Client, rt *runtimeInfo, servers []string) ([]jail.File, error) {
	var files []jail.File
	for _, s := range servers {
		f, err := cc.Facade(ctx, &control.FacadeRequest{Server: s, Lang: rt.codegenLang})
		if err != nil {
			return nil, fmt.Errorf("codemode: the façade of %q: %w", s, err)
		}
		files = append(files, jail.File{Path: rt.facadePath(f.Module), Data: []byte(f.Source)})
	}
	return files, nil
}

// newRunID is a run's id: 16 hex characters of randomness.
func newRunID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("codemode: reading randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
