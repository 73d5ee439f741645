// Package config reads capbridge's configuration: the capbridge.toml file
// and the MCP server lists of editors (Claude Desktop, Claude Code, Cursor
// and Windsurf's "mcpServers", VS Code's "servers", Codex's
// [mcp_servers]).
//
// Reading is strict and explains itself: an unknown key, a value of the
// wrong type, a bad duration or a bad server name is an [*Error] carrying
// the file, the line, the key and the fix, and every such mistake in a file
// is reported at once (an [ErrorList]) so the operator fixes them in one
// pass. The package does no I/O beyond what its caller hands it; [Load]
// and [LoadEditor] take the file's name and bytes. [JSONSchema] describes
// the file for editors (docs/capbridge.schema.json).
//
// The file format (every key optional unless marked):
//
//	[bridge]
//	call_socket      = "/run/capbridge/call.sock"    # default: see DefaultSockets
//	control_socket   = "/run/capbridge/control.sock" # always created mode 0600
//	call_socket_mode = "0660"                        # octal string; default "0600"; world bits need allowed_uids
//	call_socket_group = "sandbox"                    # group name or numeric gid
//	allowed_uids     = [1000, 1001]                  # peers allowed on the call socket; default: any
//	max_frame        = "16MiB"                       # capwire frame cap (bytes or "NKiB"/"NMiB")
//	max_connections  = 1024                          # authenticated call-socket connections
//	max_conns_per_grant = 16                         # of which one grant's
//	max_conns_per_uid = 512                          # of which one peer uid's
//	max_unauth_connections = 64                      # connections that have not said hello
//	max_unauth_per_uid = 16                          # of which one peer uid's
//	hello_timeout    = "3s"                          # the hello must arrive within it
//	idle_timeout     = "5m"                          # an authenticated connection with no call in flight
//	frame_timeout    = "10s"                         # a frame that has started must end within it
//	max_partial_bytes = "64MiB"                      # bytes of partial frames held, all connections
//	max_conn_inflight = 64                           # calls in flight per connection
//	procs            = 1                             # threads running Go code at once (GOMAXPROCS, which wins when set)
//	max_result_text  = "1MiB"                        # text kept per result before truncation
//	max_result_data  = "1MiB"                        # image, audio and resource bytes carried per result
//	write_timeout    = "5s"                          # a reader that stalls longer is dropped
//	shutdown_grace   = "3s"
//	surface_budget   = "64KiB"
//	log_format       = "auto"                        # auto | json | console
//	log_level        = "info"                        # debug | info | warn | error
//	audit_values     = false                         # log argument and result values
//	audit_path       = "/var/log/capbridge/audit.log" # the audit trail's own file (append-only, 0600); default: with the logs
//	audit_fail       = "closed"                      # closed: refuse calls while the trail cannot be written | open: serve, count the loss
//	audit_grant_budget = "64MiB"                     # audit bytes one grant may cause; then as audit_fail says
//	metrics_listen   = "127.0.0.1:9464"              # Prometheus metrics over HTTP, loopback only; default none
//	lock             = "capbridge.lock"              # the approved surface (capbridge lock); relative to this file
//	lock_mode        = "enforce"                     # enforce: a drifted tool is withheld | warn: served, reported
//
//	[mcp.github]                                     # one table per server; name: letters, digits, _ and -
//	command          = "npx"                         # required; argv[0], never a shell string
//	args             = ["-y", "@modelcontextprotocol/server-github"]
//	env              = { GITHUB_TOKEN = "${cmd:op read op://ci/gh}" } # passed explicitly; values may reference secrets (secrets.go)
//	inherit_env      = ["PATH", "HOME", "LANG"]      # names passed through; default mcpwire's (internal/bound.InheritEnv)
//	cwd              = "/srv/github"
//	startup_timeout  = "2m"                          # spawn, handshake and tools/list, each attempt
//	restart          = "on-failure"                  # never | on-failure | always
//	restart_backoff  = "1s"                          # first wait before a restart; doubles each time
//	restart_max      = "1m"                          # the longest wait; also the healthy run that resets it
//	call_timeout     = "60s"                         # idle: progress renews it, up to max_call_timeout
//	max_call_timeout = "10m"                         # the most a caller may ask for
//	cancel_grace     = "5s"                          # a cancelled call keeps its slot until answered, this long at most
//	max_inflight     = 32                            # concurrent calls sent to this server
//	max_queue        = 64                            # calls waiting beyond that; more are "overloaded"
//	max_inflight_per_grant = 16                      # one grant's share of max_inflight; default half, at least 1
//	max_queue_per_grant = 32                         # one grant's share of max_queue; default half
//	tools.allow      = ["create_issue"]              # only these are generated and callable
//	tools.deny       = ["delete_repo"]               # these are absent
//	stderr_to_caller = false                         # show the end of its stderr (redacted, 2 KiB) in denials
//	destructive      = ["delete_repo"]               # callable only by a grant that names them or allows destructive
//	not_destructive  = ["move_file"]                 # overrides the server's destructiveHint: true (honoured by default)
//
//	[mcp.github.restrict.create_issue]              # argument guards of one tool, by JSON Pointer
//	"/repo" = { prefix = "acme/" }                  # also: values = [...], pattern = "re", min = 0, max = 10, optional = true
//
//	[mcp.github.quota]                              # each grant's quotas on this server (quota.go); [quota]: on all its calls
//	rate = 5                                        # also burst, calls, bytes_in, bytes_out, time; tools.NAME per tool
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/capbridge/capbridge/bridge/internal/quota"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/telemetry"
)

// Config is a whole, validated configuration with every default applied.
type Config struct {
	Bridge  Bridge
	Servers []Server // sorted by name; names are unique
	// Quota is the [quota] table: every grant's default quotas on all
	// its calls (quota.go).
	Quota quota.Limits
	// Telemetry is the [telemetry] table: OpenTelemetry traces
	// (telemetry.go).
	Telemetry telemetry.Config
}

// Bridge holds the [bridge] table.
type Bridge struct {
	CallSocket       string // "" until the caller applies DefaultSockets
	ControlSocket    string
	CallSocketMode   os.FileMode
	CallSocketGroup  string // "" keeps the process's group
	AllowedUIDs      []uint32
	MaxFrame         int
	MaxConnections   int // authenticated connections on the call socket
	MaxConnsPerGrant int
	MaxConnsPerUID   int
	// Connections that have not yet said hello have a budget of their
	// own, so strangers cannot crowd out programs holding a token.
	MaxUnauthConnections int
	MaxUnauthPerUID      int
	HelloTimeout         time.Duration
	IdleTimeout          time.Duration
	FrameTimeout         time.Duration
	MaxPartialBytes      int
	MaxConnInflight      int
	// Procs is how many threads run the bridge's Go code at once
	// (runtime.GOMAXPROCS); the GOMAXPROCS environment variable, when
	// set, wins over it.
	Procs         int
	MaxResultText int
	MaxResultData int
	WriteTimeout  time.Duration
	ShutdownGrace time.Duration
	SurfaceBudget int
	LogFormat     string
	LogLevel      string
	AuditValues   bool
	// AuditPath, when set, is the file the audit trail goes to, apart
	// from the operational logs: opened for appending, created 0600.
	AuditPath string
	// AuditFail is what happens to calls while the audit trail cannot
	// be written (a full disk, a closed pipe): AuditFailClosed refuses
	// them, AuditFailOpen serves them and counts the lines lost.
	AuditFail string
	// AuditGrantBudget bounds the bytes of audit lines one grant's
	// connections and calls may write, so that no program can fill the
	// disk through the trail. Once spent, the grant's calls are refused
	// (AuditFailClosed) or served unaudited and counted (AuditFailOpen).
	AuditGrantBudget int
	// MetricsListen is where serve offers /metrics: a loopback
	// host:port, or "unix:" and the absolute path of a socket (mode
	// 0600); "" serves none (capbridge metrics still reads them).
	MetricsListen string
	// Lock is the lock file serve holds the servers' tools to (absolute:
	// a relative path in the file is resolved against its directory);
	// "" holds them to none. LockMode is LockEnforce or LockWarn.
	Lock     string
	LockMode string
}

// Server holds one [mcp.<name>] table, or one entry of an editor's config.
type Server struct {
	Name           string
	Command        string
	Args           []string
	Env            map[string]string
	InheritEnv     []string
	Cwd            string
	StartupTimeout time.Duration
	Restart        Restart
	RestartBackoff time.Duration
	RestartMax     time.Duration
	CallTimeout    time.Duration
	MaxCallTimeout time.Duration
	// CancelGrace is how long a call given up on (cancelled or timed
	// out) keeps its max_inflight slot while the server has not
	// answered it: MCP cancellation is advisory, so the server may
	// still be running it.
	CancelGrace time.Duration
	MaxInflight int
	MaxQueue    int
	// One grant's share of MaxInflight and MaxQueue, so one program
	// cannot take a server's every slot: by default half of each
	// (MaxInflightPerGrant at least 1). InflightPerGrant and
	// QueuePerGrant give the values in force.
	MaxInflightPerGrant int
	MaxQueuePerGrant    int
	ToolsAllow          []string // nil: every tool not denied
	ToolsDeny           []string
	// StderrToCaller lets the end of the server's stderr, with the values
	// of Env redacted and capped at 2 KiB, reach callers in the denials
	// that report its failure. By default it reaches only the operator
	// (status, logs): a server may print anything there, secrets
	// included, and callers are jailed programs and the models that
	// read their output.
	StderrToCaller bool
	// Destructive names the tools the operator declares destructive: a
	// grant calls one only if it names it or allows destructive tools.
	// A tool the server marks destructiveHint: true is destructive too
	// (a hint that asks for more care is honoured), unless it is named
	// in NotDestructive; a server's claim that a tool is not destructive
	// is never trusted.
	Destructive []string
	// NotDestructive names tools the operator overrides a server's
	// destructiveHint for: they are not destructive whatever the server
	// says.
	NotDestructive []string
	// Restrict is every argument guard, sorted by tool then pointer.
	Restrict []Guard
	// Strict makes a tools.allow, tools.deny, destructive or restrict
	// entry that names no tool of the server fail its boot, rather than
	// be logged as a warning.
	// No file sets it; serve's --strict does.
	Strict bool

	// Remote is set for a server reached over HTTP (url instead of
	// command); nil for one capbridge starts.
	Remote *Remote

	// Quota is every grant's default quotas on this server's calls, and
	// ToolQuotas on each tool's, by wire name ([mcp.X.quota], quota.go).
	Quota      quota.Limits
	ToolQuotas map[string]quota.Limits

	// Refs are the env and header values that hold placeholders, as
	// written; ResolveSecrets expands them into Env and Remote.Headers
	// and records what it resolved in Secrets (secrets.go), beside what
	// an editor's file expanded at load (editorLoader.expandSecret).
	Refs            []Ref
	Secrets         map[string]string
	secretsResolved bool

	// Where the server was defined, for messages that come later (a
	// failed boot names the file and line the operator must look at).
	File string
	Line int
}

// Restart says when capbridge starts a server again: after it failed to
// boot or exited on its own. A server capbridge shut down is never
// restarted.
type Restart string

const (
	// RestartNever leaves a server that failed to boot failed, and one
	// that died dead, until capbridge restarts. A remote server waiting
	// for a person's login is no failure: it is tried again under every
	// policy, so that it finds the login when it is made.
	RestartNever Restart = "never"
	// RestartOnFailure restarts after a failed boot or any death except a
	// clean exit (status 0, the connection intact until then).
	RestartOnFailure Restart = "on-failure"
	// RestartAlways restarts after any end, a clean exit included.
	RestartAlways Restart = "always"
)

var restartPolicies = []string{string(RestartNever), string(RestartOnFailure), string(RestartAlways)}

// Defaults. Each is documented where an operator would look for it: the
// package doc and docs/.
//
// The call-path limits were chosen by measurement (bridge's
// BenchmarkBridgeMaxInflight and bench/cmd/peers, 64-byte echo calls
// against the raw server, audit on, 2 CPUs). With 32 calls in flight on
// one connection, max_inflight 32 took 32-34 µs a call against 36-45 µs
// at 8 and 34-43 µs at 16: a call that waits in admission's queue costs a
// timer, a park and a wake-up more than one sent at once, and lines sent
// together reach the server's stdin in fewer writes. A server that runs
// calls one at a time loses nothing by having them queued at its stdin
// rather than in the bridge, and the deadline covers both. max_queue
// stays 64: it only bounds the calls beyond max_inflight, which are then
// refused "overloaded" rather than held. max_conn_inflight stays 64, at
// or above max_inflight, so one connection can use a server's slots; it
// also bounds a connection's workers (at most max_conn_inflight+1) and,
// with capserver's queue of 256 frames, no reply waits for queue room
// unless the client stops reading.
//
// procs is 1. The bridge's own work per call is a few microseconds; the
// rest is waking and sleeping, and with a second P idle the runtime wakes
// another thread to look for work each time a goroutine becomes runnable
// (a handed-over connection role, a reply), only for it to find none and
// sleep again: on 2 CPUs, 64-byte calls one at a time, bench/cmd/peers
// measured 56 µs of bridge CPU a call at procs 1 against 84 at 2, p50 95
// µs against 126, 2.4 context switches a call against 4.7, and with 32 in
// flight 21.5 µs a call against 27.5 at about the same calls/s. One
// thread running Go code still leaves the kernel work of every read and
// write on its own thread, as a blocked syscall gives its P up.
const (
	DefaultMaxFrame         = 16 << 20
	DefaultMaxConnections   = 1024
	DefaultMaxConnInflight  = 64
	DefaultProcs            = 1
	DefaultMaxConnsPerGrant = 16
	DefaultMaxConnsPerUID   = 512
	DefaultMaxUnauth        = 64
	DefaultMaxUnauthPerUID  = 16
	DefaultHelloTimeout     = 3 * time.Second
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultFrameTimeout     = 10 * time.Second
	DefaultMaxPartialBytes  = 64 << 20
	DefaultMaxResultText    = 1 << 20
	DefaultMaxResultData    = 1 << 20
	DefaultWriteTimeout     = 5 * time.Second
	DefaultShutdownGrace    = 3 * time.Second
	DefaultSurfaceBudget    = 64 << 10
	// DefaultStartupTimeout covers a first `npx -y` or `uvx`, which
	// downloads the package before the server can answer initialize
	// (52-69 s measured on a cold cache).
	DefaultStartupTimeout = 2 * time.Minute
	DefaultRestart        = RestartOnFailure
	DefaultRestartBackoff = time.Second
	DefaultRestartMax     = time.Minute
	DefaultCallTimeout    = 60 * time.Second
	DefaultMaxCallTimeout = 10 * time.Minute
	DefaultCancelGrace    = 5 * time.Second
	DefaultMaxInflight    = 32
	DefaultMaxQueue       = 64

	// Upper bounds on what an operator may configure, so a typo cannot
	// turn a bound into no bound.
	maxFrameLimit   = 256 << 20
	minPartialBytes = 64 << 10
	maxPartialLimit = 16 << 30
	maxServers      = 64
	maxCountSetting = 1 << 20
)

// The audit trail's failure modes (audit_fail) and its budget per grant.
const (
	AuditFailClosed = "closed"
	AuditFailOpen   = "open"
	// DefaultAuditGrantBudget is about 200 000 call lines (about 320
	// bytes each without audit_values): more than a code-mode execution
	// makes, far less than a disk.
	DefaultAuditGrantBudget = 64 << 20
	minAuditGrantBudget     = 64 << 10
	maxAuditGrantBudget     = 64 << 30
)

var auditFails = []string{AuditFailClosed, AuditFailOpen}

// MetricsUnixPrefix marks a metrics_listen that is a Unix socket's path.
const MetricsUnixPrefix = "unix:"

// maxSocketPath is the longest path a Unix socket address holds (108
// bytes with its NUL, on Linux).
const maxSocketPath = 107

// MaxDuration bounds every duration setting, so a typo cannot turn a
// bound into no bound; a client waiting on a server's call_timeout or
// max_call_timeout, which it cannot read, knows the call ends by then.
const MaxDuration = 24 * time.Hour

// DefaultSockets returns where the sockets go when the config names no
// path: under $XDG_RUNTIME_DIR when the session has one (a per-user,
// mode-0700 directory), else under a per-user directory in /tmp.
func DefaultSockets(xdgRuntimeDir string, uid int) (call, control string) {
	dir := fmt.Sprintf("/tmp/capbridge-%d", uid)
	if xdgRuntimeDir != "" {
		dir = strings.TrimRight(xdgRuntimeDir, "/") + "/capbridge"
	}
	return dir + "/call.sock", dir + "/control.sock"
}

// Defaults returns the configuration used when no file is given: every
// bridge default and no servers.
func Defaults() *Config {
	return &Config{Bridge: Bridge{
		CallSocketMode:       0o600,
		MaxFrame:             DefaultMaxFrame,
		MaxConnections:       DefaultMaxConnections,
		MaxConnInflight:      DefaultMaxConnInflight,
		Procs:                DefaultProcs,
		MaxConnsPerGrant:     DefaultMaxConnsPerGrant,
		MaxConnsPerUID:       DefaultMaxConnsPerUID,
		MaxUnauthConnections: DefaultMaxUnauth,
		MaxUnauthPerUID:      DefaultMaxUnauthPerUID,
		HelloTimeout:         DefaultHelloTimeout,
		IdleTimeout:          DefaultIdleTimeout,
		FrameTimeout:         DefaultFrameTimeout,
		MaxPartialBytes:      DefaultMaxPartialBytes,
		MaxResultText:        DefaultMaxResultText,
		MaxResultData:        DefaultMaxResultData,
		WriteTimeout:         DefaultWriteTimeout,
		ShutdownGrace:        DefaultShutdownGrace,
		SurfaceBudget:        DefaultSurfaceBudget,
		LogFormat:            "auto",
		LogLevel:             "info",
		LockMode:             LockEnforce,
		AuditFail:            AuditFailClosed,
		AuditGrantBudget:     DefaultAuditGrantBudget,
	}}
}

// NewServer returns a server entry with every default applied.
func NewServer(name, command string) Server {
	return Server{
		Name:    name,
		Command: command,
		// The names mcpwire passes through when told none: one list,
		// declared where the child is spawned.
		InheritEnv:     bound.InheritEnv(),
		StartupTimeout: DefaultStartupTimeout,
		Restart:        DefaultRestart,
		RestartBackoff: DefaultRestartBackoff,
		RestartMax:     DefaultRestartMax,
		CallTimeout:    DefaultCallTimeout,
		MaxCallTimeout: DefaultMaxCallTimeout,
		CancelGrace:    DefaultCancelGrace,
		MaxInflight:    DefaultMaxInflight,
		MaxQueue:       DefaultMaxQueue,
		// Half of each, as in a file that leaves them out.
		MaxInflightPerGrant: DefaultMaxInflight / 2,
		MaxQueuePerGrant:    DefaultMaxQueue / 2,
	}
}

// Error is one mistake in a configuration file.
type Error struct {
	File string
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, e.g. "mcp.github.call_timeout"
	Msg  string // what is wrong
	Fix  string // what to write instead; may be empty
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString("; " + e.Fix)
	}
	return b.String()
}

// ErrorList is every mistake found in one file, in line order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes each *Error to errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// maxFileSize bounds what Load and LoadEditor accept: a configuration is
// small, and a huge file is a mistake (or a device) rather than a config.
const maxFileSize = 4 << 20

// ErrTooLarge is returned for a file over maxFileSize.
var ErrTooLarge = errors.New("config: file is larger than 4 MiB")

// Load parses and validates a capbridge.toml. name is used in messages.
func Load(name string, data []byte) (*Config, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: %w", name, ErrTooLarge)
	}
	data = bytes.TrimPrefix(data, utf8BOM) // as a Windows editor saves it
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, _ := de.Position()
			return nil, ErrorList{{File: name, Line: line, Msg: "TOML syntax: " + de.Error(), Fix: "see https://toml.io for the syntax"}}
		}
		return nil, ErrorList{{File: name, Msg: "TOML: " + err.Error()}}
	}
	r := &reader{file: name, pos: indexPositions(data)}
	cfg := Defaults()
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		switch k {
		case "bridge":
			if t, ok := r.table(k, doc[k]); ok {
				r.bridge(t, &cfg.Bridge)
			}
		case "mcp":
			if t, ok := r.table(k, doc[k]); ok {
				cfg.Servers = r.servers(t)
			}
		case "quota":
			r.quota(k, doc[k], &cfg.Quota, nil)
		case "telemetry":
			r.telemetry(k, doc[k], &cfg.Telemetry)
		default:
			r.unknown(k, k, topKeys)
		}
	}
	if len(r.errs) > 0 {
		return nil, r.sorted()
	}
	return cfg, nil
}

// topKeys are the tables a capbridge.toml may have.
var topKeys = []string{"bridge", "mcp", "quota", "telemetry"}

// reader accumulates errors while walking a decoded document.
type reader struct {
	file string
	pos  positions
	errs ErrorList
}

func (r *reader) fail(key, fix, format string, args ...any) {
	r.errs = append(r.errs, &Error{File: r.file, Line: r.pos.line(key), Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix})
}

func (r *reader) sorted() ErrorList {
	slices.SortStableFunc(r.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return r.errs
}

func (r *reader) unknown(key, name string, known []string) {
	fix := "known keys here: " + strings.Join(known, ", ")
	if s := suggest(name, known); s != "" {
		fix = fmt.Sprintf("did you mean %q?", s)
	}
	r.fail(key, fix, "unknown key %q", name)
}

func (r *reader) table(key string, v any) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		r.fail(key, "write it as a table: ["+key+"]", "must be a table, not %s", describe(v))
	}
	return t, ok
}

func (r *reader) bridge(t map[string]any, b *Bridge) {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		v, key := t[k], "bridge."+k
		switch k {
		case "call_socket":
			r.path(key, v, &b.CallSocket)
		case "control_socket":
			r.path(key, v, &b.ControlSocket)
		case "call_socket_mode":
			r.mode(key, v, &b.CallSocketMode)
		case "call_socket_group":
			r.str(key, v, &b.CallSocketGroup)
		case "allowed_uids":
			r.uids(key, v, &b.AllowedUIDs)
		case "max_frame":
			r.size(key, v, 1, maxFrameLimit, &b.MaxFrame)
		case "max_connections":
			r.count(key, v, &b.MaxConnections)
		case "max_conn_inflight":
			r.count(key, v, &b.MaxConnInflight)
		case "procs":
			r.count(key, v, &b.Procs)
		case "max_conns_per_grant":
			r.count(key, v, &b.MaxConnsPerGrant)
		case "max_conns_per_uid":
			r.count(key, v, &b.MaxConnsPerUID)
		case "max_unauth_connections":
			r.count(key, v, &b.MaxUnauthConnections)
		case "max_unauth_per_uid":
			r.count(key, v, &b.MaxUnauthPerUID)
		case "hello_timeout":
			r.duration(key, v, &b.HelloTimeout)
		case "idle_timeout":
			r.duration(key, v, &b.IdleTimeout)
		case "frame_timeout":
			r.duration(key, v, &b.FrameTimeout)
		case "max_partial_bytes":
			r.size(key, v, minPartialBytes, maxPartialLimit, &b.MaxPartialBytes)
		case "max_result_text":
			r.size(key, v, 1, maxFrameLimit, &b.MaxResultText)
		case "max_result_data":
			r.size(key, v, 0, maxFrameLimit, &b.MaxResultData)
		case "write_timeout":
			r.duration(key, v, &b.WriteTimeout)
		case "shutdown_grace":
			r.duration(key, v, &b.ShutdownGrace)
		case "surface_budget":
			r.size(key, v, 1024, maxFrameLimit, &b.SurfaceBudget)
		case "log_format":
			r.enum(key, v, []string{"auto", "json", "console"}, &b.LogFormat)
		case "log_level":
			r.enum(key, v, []string{"debug", "info", "warn", "error"}, &b.LogLevel)
		case "audit_values":
			r.boolean(key, v, &b.AuditValues)
		case "audit_path":
			r.path(key, v, &b.AuditPath)
		case "audit_fail":
			r.enum(key, v, auditFails, &b.AuditFail)
		case "audit_grant_budget":
			r.size(key, v, minAuditGrantBudget, maxAuditGrantBudget, &b.AuditGrantBudget)
		case "metrics_listen":
			r.loopback(key, v, &b.MetricsListen)
		case "lock":
			r.lockPath(key, v, &b.Lock)
		case "lock_mode":
			r.enum(key, v, lockModes, &b.LockMode)
		default:
			r.unknown(key, k, bridgeKeys)
		}
	}
	if b.CallSocketMode&0o007 != 0 && len(b.AllowedUIDs) == 0 {
		// Grant tokens still guard every call, but a socket any local
		// user can reach should at least be a deliberate choice.
		r.fail("bridge.call_socket_mode", `use "0660" with call_socket_group, or list allowed_uids`, "mode %04o lets every user on the host connect, and allowed_uids is empty", b.CallSocketMode)
	}
	if b.CallSocket != "" && b.CallSocket == b.ControlSocket {
		r.fail("bridge.control_socket", "give the two sockets different paths", "is the same path as call_socket: the control socket grants authority and must not be the socket handed into jails")
	}
}

// validName is what a server may be called: it becomes the capability
// "mcp.<name>", a TOML table name and (mangled) a Go package name, so it is
// kept to characters that survive all three unquoted.
var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

const nameFix = "a server name starts with a letter and has at most 64 letters, digits, '_' or '-'"

func (r *reader) servers(t map[string]any) []Server {
	var out []Server
	names := slices.Sorted(maps.Keys(t))
	if len(names) > maxServers {
		r.fail("mcp", fmt.Sprintf("run at most %d servers per capbridge", maxServers), "%d servers configured", len(names))
		return nil
	}
	for _, name := range names {
		key := "mcp." + name
		if !validName.MatchString(name) {
			r.fail(key, nameFix, "bad server name %q", name)
			continue
		}
		st, ok := r.table(key, t[name])
		if !ok {
			continue
		}
		s := NewServer(name, "")
		s.File, s.Line = r.file, r.pos.line(key)
		for _, k := range slices.Sorted(maps.Keys(st)) {
			v, k2 := st[k], key+"."+k
			switch k {
			case "command":
				r.str(k2, v, &s.Command)
			case "args":
				r.strs(k2, v, &s.Args)
			case "env":
				r.env(k2, v, &s.Env)
				for _, k := range slices.Sorted(maps.Keys(s.Env)) {
					r.template(k2+"."+k, "env."+k, s.Env[k], &s.Refs)
				}
			case "inherit_env":
				r.envNames(k2, v, &s.InheritEnv)
			case "cwd":
				r.path(k2, v, &s.Cwd)
			case "startup_timeout":
				r.duration(k2, v, &s.StartupTimeout)
			case "restart":
				var p string
				r.enum(k2, v, restartPolicies, &p)
				s.Restart = cmp.Or(Restart(p), s.Restart)
			case "restart_backoff":
				r.duration(k2, v, &s.RestartBackoff)
			case "restart_max":
				r.duration(k2, v, &s.RestartMax)
			case "call_timeout":
				r.duration(k2, v, &s.CallTimeout)
			case "max_call_timeout":
				r.duration(k2, v, &s.MaxCallTimeout)
			case "cancel_grace":
				r.duration(k2, v, &s.CancelGrace)
			case "max_inflight":
				r.count(k2, v, &s.MaxInflight)
			case "max_queue":
				r.countOrZero(k2, v, &s.MaxQueue)
			case "max_inflight_per_grant":
				r.count(k2, v, &s.MaxInflightPerGrant)
			case "max_queue_per_grant":
				r.countOrZero(k2, v, &s.MaxQueuePerGrant)
			case "tools":
				r.tools(k2, v, &s)
			case "stderr_to_caller":
				r.boolean(k2, v, &s.StderrToCaller)
			case "destructive":
				r.strs(k2, v, &s.Destructive)
			case "not_destructive":
				r.strs(k2, v, &s.NotDestructive)
			case "restrict":
				r.restrict(k2, v, &s)
			case "quota":
				r.quota(k2, v, &s.Quota, &s.ToolQuotas)
			default:
				if !r.remoteKey(k2, k, v, &s) {
					r.unknown(k2, k, serverKeys)
				}
			}
		}
		if s.Remote != nil && s.Remote.URL == "" {
			s.Remote = nil // remote keys without url: the command check says what is missing
		}
		r.checkServer(key, st, &s)
		out = append(out, s)
	}
	return out
}

// checkServer holds the rules that relate one key to another.
func (r *reader) checkServer(key string, st map[string]any, s *Server) {
	if _, remote := st["url"]; remote {
		r.checkRemote(key, st, s)
	} else if _, given := st["command"]; !given {
		r.fail(key, `add command = "/path/to/server" (argv[0]; arguments go in args = [...]), or url = "https://…" for a remote server`, "no command and no url")
	} else if st["command"] == "" {
		r.fail(key+".command", `give the program to run, such as "/usr/local/bin/server" or "npx"`, "is empty")
	} else if strings.ContainsAny(s.Command, " \t") && !strings.HasPrefix(s.Command, "/") {
		// "npx -y pkg" in command is the commonest mistake: we never run
		// a shell, so it would look for a binary named "npx -y pkg".
		fields := strings.Fields(s.Command)
		r.fail(key+".command", fmt.Sprintf("write command = %q and args = [%s]", fields[0], quoteAll(fields[1:])), "%q looks like a shell command line; capbridge runs argv directly, never a shell", s.Command)
	}
	if s.CallTimeout > s.MaxCallTimeout {
		r.fail(key+".call_timeout", fmt.Sprintf("raise max_call_timeout to at least %s or lower call_timeout", s.CallTimeout), "call_timeout %s is longer than max_call_timeout %s", s.CallTimeout, s.MaxCallTimeout)
	}
	// The shares default to half of what the file says for the server.
	if _, given := st["max_inflight_per_grant"]; !given {
		s.MaxInflightPerGrant = max(1, s.MaxInflight/2)
	}
	if _, given := st["max_queue_per_grant"]; !given {
		s.MaxQueuePerGrant = s.MaxQueue / 2
	}
	if s.MaxInflightPerGrant > s.MaxInflight {
		r.fail(key+".max_inflight_per_grant", fmt.Sprintf("write at most max_inflight (%d)", s.MaxInflight), "%d is more than max_inflight", s.MaxInflightPerGrant)
	}
	if s.MaxQueuePerGrant > s.MaxQueue {
		r.fail(key+".max_queue_per_grant", fmt.Sprintf("write at most max_queue (%d)", s.MaxQueue), "%d is more than max_queue", s.MaxQueuePerGrant)
	}
	if s.RestartBackoff > s.RestartMax {
		r.fail(key+".restart_backoff", fmt.Sprintf("raise restart_max to at least %s or lower restart_backoff", s.RestartBackoff), "restart_backoff %s is longer than restart_max %s", s.RestartBackoff, s.RestartMax)
	}
	for _, d := range s.ToolsDeny {
		if slices.Contains(s.ToolsAllow, d) {
			r.fail(key+".tools", "name each tool in allow or deny, not both", "tool %q is both allowed and denied", d)
		}
	}
	for _, d := range s.NotDestructive {
		if slices.Contains(s.Destructive, d) {
			r.fail(key+".not_destructive", "name each tool in destructive or not_destructive, not both", "tool %q is declared destructive and not destructive", d)
		}
	}
}

// InflightPerGrant is the most calls of one grant that run at the server
// at once: max_inflight_per_grant, by default half of max_inflight and at
// least 1, so one program cannot take every slot.
func (s *Server) InflightPerGrant() int {
	return max(1, min(s.MaxInflightPerGrant, s.MaxInflight))
}

// QueuePerGrant is the most calls of one grant that wait for a slot:
// max_queue_per_grant, by default half of max_queue.
func (s *Server) QueuePerGrant() int {
	return max(0, min(s.MaxQueuePerGrant, s.MaxQueue))
}

// UnmatchedTools returns the tools.allow, tools.deny, destructive,
// restrict and quota.tools entries that name no tool the server lists (has reports
// whether it lists one), each as `tools.allow "name"`: a typo there
// silently exposes, hides or leaves unguarded a tool.
func (s *Server) UnmatchedTools(has func(name string) bool) []string {
	var guarded []string
	for _, g := range s.Restrict {
		if !slices.Contains(guarded, g.Tool) {
			guarded = append(guarded, g.Tool)
		}
	}
	quotaed := slices.Sorted(maps.Keys(s.ToolQuotas))
	var out []string
	for _, l := range []struct {
		key   string
		names []string
	}{{"tools.allow", s.ToolsAllow}, {"tools.deny", s.ToolsDeny}, {"destructive", s.Destructive}, {"not_destructive", s.NotDestructive}, {"restrict", guarded}, {"quota.tools", quotaed}} {
		for _, n := range l.names {
			if !has(n) {
				out = append(out, fmt.Sprintf("%s %q", l.key, n))
			}
		}
	}
	return out
}

func (r *reader) tools(key string, v any, s *Server) {
	t, ok := r.table(key, v)
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		switch k {
		case "allow":
			r.strs(key+".allow", t[k], &s.ToolsAllow)
			if s.ToolsAllow == nil {
				s.ToolsAllow = []string{} // an empty allow list allows nothing
			}
		case "deny":
			r.strs(key+".deny", t[k], &s.ToolsDeny)
		default:
			r.unknown(key+"."+k, k, []string{"allow", "deny"})
		}
	}
}

func (r *reader) str(key string, v any, dst *string) bool {
	s, ok := v.(string)
	if !ok {
		r.fail(key, `write it as a quoted string: "…"`, "must be a string, not %s", describe(v))
		return false
	}
	if strings.IndexByte(s, 0) >= 0 {
		r.fail(key, "remove the NUL character", "contains a NUL character")
		return false
	}
	*dst = s
	return true
}

func (r *reader) path(key string, v any, dst *string) {
	var s string
	if !r.str(key, v, &s) {
		return
	}
	if s == "" || !strings.HasPrefix(s, "/") {
		r.fail(key, "give an absolute path, starting with /", "%q is not an absolute path", s)
		return
	}
	*dst = s
}

// loopback reads a listen address that must be a loopback IP and a
// port, or a Unix socket's path after "unix:": metrics name servers,
// tools and call rates, which are the host's business, so they are never
// offered to the network directly. A loopback port is open to every local
// user; the socket, mode 0600, to capbridge's user alone.
func (r *reader) loopback(key string, v any, dst *string) {
	var s string
	if !r.str(key, v, &s) {
		return
	}
	const fix = `write "127.0.0.1:9464" (or "[::1]:9464"), or "unix:/run/capbridge/metrics.sock" to keep them from other local users; to scrape from elsewhere, run a local agent or a tunnel that forwards it`
	if path, ok := strings.CutPrefix(s, MetricsUnixPrefix); ok {
		if !strings.HasPrefix(path, "/") || len(path) > maxSocketPath {
			r.fail(key, fix, "%q is not an absolute socket path of at most %d bytes", path, maxSocketPath)
			return
		}
		*dst = s
		return
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		r.fail(key, fix, "%q is not host:port", s)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		r.fail(key, fix, "bad port %q", port)
		return
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		r.fail(key, fix, "%q is not a loopback IP address (a name may resolve to anything)", host)
		return
	}
	if !ip.IsLoopback() {
		r.fail(key, fix, "%s is not a loopback address: the metrics would be served to the network", host)
		return
	}
	*dst = s
}

func (r *reader) strs(key string, v any, dst *[]string) {
	a, ok := v.([]any)
	if !ok {
		r.fail(key, `write it as an array of strings: ["a", "b"]`, "must be an array of strings, not %s", describe(v))
		return
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		var s string
		if !r.str(fmt.Sprintf("%s[%d]", key, i), e, &s) {
			return
		}
		out = append(out, s)
	}
	*dst = out
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (r *reader) env(key string, v any, dst *map[string]string) {
	t, ok := v.(map[string]any)
	if !ok {
		r.fail(key, `write it as a table: env = { NAME = "value" }`, "must be a table of strings, not %s", describe(v))
		return
	}
	out := make(map[string]string, len(t))
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if !envName.MatchString(k) {
			r.fail(key+"."+k, "an environment variable name has letters, digits and '_' and does not start with a digit", "bad variable name %q", k)
			continue
		}
		var s string
		if r.str(key+"."+k, t[k], &s) {
			out[k] = s
		}
	}
	*dst = out
}

func (r *reader) envNames(key string, v any, dst *[]string) {
	var names []string
	r.strs(key, v, &names)
	for _, n := range names {
		if !envName.MatchString(n) {
			r.fail(key, "list variable names only, such as \"PATH\"", "bad variable name %q", n)
			return
		}
	}
	if names != nil {
		*dst = names
	}
}

func (r *reader) duration(key string, v any, dst *time.Duration) {
	s, ok := v.(string)
	if !ok {
		r.fail(key, `write a quoted Go duration such as "30s" or "2m"`, "must be a duration string, not %s", describe(v))
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > MaxDuration {
		r.fail(key, `write a Go duration between "1ms" and "24h", such as "30s" or "2m"`, "bad duration %q", s)
		return
	}
	*dst = d
}

func (r *reader) count(key string, v any, dst *int) {
	n, ok := v.(int64)
	if !ok || n < 1 || n > maxCountSetting {
		r.fail(key, fmt.Sprintf("write a whole number from 1 to %d", maxCountSetting), "bad count %s", describe(v))
		return
	}
	*dst = int(n)
}

func (r *reader) countOrZero(key string, v any, dst *int) {
	if n, ok := v.(int64); ok && n == 0 {
		*dst = 0
		return
	}
	r.count(key, v, dst)
}

var sizeUnits = []struct {
	suffix string
	mul    int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseSize reads a byte count as capbridge.toml writes one: a number,
// with a B, KiB, MiB or GiB suffix or none; at most hi bytes.
func ParseSize(s string, hi int64) (int64, bool) {
	num, mul := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mul = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mul
			break
		}
	}
	m, err := strconv.ParseInt(num, 10, 64)
	if err != nil || m < 0 || m > hi/mul {
		return 0, false
	}
	return m * mul, true
}

func (r *reader) size(key string, v any, lo, hi int64, dst *int) {
	fix := fmt.Sprintf(`write a byte count from %d to %d, or a string such as "64KiB" or "16MiB"`, lo, hi)
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case string:
		var ok bool
		if n, ok = ParseSize(x, hi); !ok {
			r.fail(key, fix, "bad size %q", x)
			return
		}
	default:
		r.fail(key, fix, "bad size %s", describe(v))
		return
	}
	if n < lo || n > hi {
		r.fail(key, fix, "size %d is out of range", n)
		return
	}
	*dst = int(n)
}

func (r *reader) mode(key string, v any, dst *os.FileMode) {
	s, ok := v.(string)
	m, err := strconv.ParseUint(s, 8, 32)
	if !ok || err != nil || m > 0o777 || m&0o600 != 0o600 {
		r.fail(key, `write an octal string such as "0660" that keeps the owner's read and write bits`, "bad socket mode %s", describe(v))
		return
	}
	*dst = os.FileMode(m)
}

func (r *reader) uids(key string, v any, dst *[]uint32) {
	a, ok := v.([]any)
	if !ok {
		r.fail(key, "write an array of numeric uids: [1000, 1001]", "must be an array, not %s", describe(v))
		return
	}
	out := make([]uint32, 0, len(a))
	for _, e := range a {
		n, ok := e.(int64)
		if !ok || n < 0 || n > 1<<32-2 {
			r.fail(key, "write numeric uids, such as 1000", "bad uid %s", describe(e))
			return
		}
		out = append(out, uint32(n))
	}
	*dst = out
}

func (r *reader) enum(key string, v any, allowed []string, dst *string) {
	s, ok := v.(string)
	if !ok || !slices.Contains(allowed, s) {
		r.fail(key, "use one of: "+strings.Join(allowed, ", "), "bad value %s", describe(v))
		return
	}
	*dst = s
}

func (r *reader) boolean(key string, v any, dst *bool) {
	b, ok := v.(bool)
	if !ok {
		r.fail(key, "write true or false, unquoted", "must be a boolean, not %s", describe(v))
		return
	}
	*dst = b
}

// describe names a decoded TOML value for a message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case int64:
		return "the number " + strconv.FormatInt(x, 10)
	case float64:
		return "the number " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// suggest returns the known key closest to name when it is close enough
// to be a typo (edit distance at most 2), else "".
func suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64 // not a typo worth suggesting for; keeps the cost bounded
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
