package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/jail"
	"github.com/capbridge/capbridge/mcpwire"
)

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("doctor", "capbridge doctor [-c capbridge.toml | --mcp-config EDITOR-CONFIG [--workspace DIR]] [--strict] [--json]", `
Check a configuration the way serve would use it, without serving: read the
config, check both socket paths (their directory, what is there now), start
every server exactly as serve does and time its spawn, initialize and
tools/list, then stop them all and confirm every process exited. Each
problem says what to do next. With no config it checks the built-in demo
server, as serve runs it.
Exit status: 0 when everything is fine, 1 on any problem, 2 on a bad
command line. Warnings (a disabled editor entry, which is skipped; a
tools.allow, tools.deny, destructive or restrict entry that names no tool)
do not change it; --strict makes the second kind problems, as serve
--strict fails such a server.`)
	cfgPath := fs.String("c", "", "capbridge.toml to check (default: none, which checks the built-in demo server)")
	mcpConfig := fs.String("mcp-config", "", "an editor's MCP config to check, as serve --mcp-config reads it")
	workspace := fs.String("workspace", "", "what ${workspaceFolder} expands to in --mcp-config (default: that file's directory)")
	strict := fs.Bool("strict", false, "check as serve --strict runs: a tools.allow, tools.deny, destructive or restrict entry that names no tool is a problem")
	asJSON := fs.Bool("json", false, "print the report as JSON, for scripts")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; doctor takes only flags", pos[0])
	}
	r := doctor(*cfgPath, *mcpConfig, config.EditorOptions{Workspace: *workspace, Strict: *strict}, stderr)
	// What a server printed (its stderr tail, a reason) is shown with the
	// config's resolved secrets replaced, as serve's logs show it.
	stdout = bridge.NewSecretWriter(stdout, r.cfg)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(stderr, "capbridge doctor:", err)
			return exitError
		}
	} else {
		r.print(stdout)
	}
	if !r.OK {
		return exitError
	}
	return exitOK
}

// doctorReport is what doctor found. Problems make it fail; warnings do
// not (--strict has already turned the ones serve --strict refuses into
// problems).
type doctorReport struct {
	OK       bool           `json:"ok"`
	Config   configReport   `json:"config"`
	Sockets  []socketReport `json:"sockets,omitempty"`
	Servers  []serverReport `json:"servers,omitempty"`
	Shutdown *shutdownCheck `json:"shutdown,omitempty"`
	// Jail is what the jail of capbridge mcp and capbridge run would get
	// here; what it lacks is a note, neither a problem nor a warning.
	Jail jailReport `json:"jail"`
	// Secrets are the config's secret references, each resolved or not,
	// with the size of what it resolved to, never the value.
	Secrets  []secretReport `json:"secrets,omitempty"`
	Problems []finding      `json:"problems"`
	Warnings []finding      `json:"warnings"`

	cfg *config.Config // the configuration checked, for the secrets to redact; empty when it did not load
}

// secretReport is one env or header value that references secrets.
type secretReport struct {
	Server    string `json:"server"`
	Key       string `json:"key"`       // env.NAME or headers.NAME
	Reference string `json:"reference"` // the value as written
	Resolved  bool   `json:"resolved"`
	Bytes     int    `json:"bytes,omitempty"` // the length of what it resolved to
	Error     string `json:"error,omitempty"`
}

// finding is one problem or warning: where, what, and what to do.
type finding struct {
	Where   string `json:"where"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

type jailReport struct {
	Cgroup jail.CgroupStatus `json:"cgroup"`
	Fix    string            `json:"fix,omitempty"`
}

// cgroupFix is what to do where runs get no cgroup v2 limits.
const cgroupFix = "for limits on a run as a whole, run capbridge on a cgroup v2 host (systemd.unified_cgroup_hierarchy=1) " +
	"in a delegated cgroup: systemd-run --user -p Delegate=yes capbridge mcp …, or a service with Delegate=yes"

type configReport struct {
	Source  string   `json:"source"` // the file(s) read, or "built-in demo"
	Loaded  bool     `json:"loaded"`
	Servers []string `json:"servers"`
}

type socketReport struct {
	Key       string `json:"key"`
	Path      string `json:"path"`
	CreateDir bool   `json:"create_dir,omitempty"`
	Stale     bool   `json:"stale,omitempty"`
	Error     string `json:"error,omitempty"`
}

// serverReport is one server's boot. The phases are measured from the
// bridge's own boot events: spawn ends when the process has started,
// initialize when the handshake is done, tools_list when the tools are
// listed and the façade generated (the server is ready). A phase the boot
// did not reach is absent.
type serverReport struct {
	Name    string `json:"name"`
	Defined string `json:"defined"` // file:line
	// URL and Transport, for a remote server: where it is (without
	// query or credentials) and how it was reached.
	URL           string   `json:"url,omitempty"`
	Transport     string   `json:"transport,omitempty"`
	State         string   `json:"state"`
	Reason        string   `json:"reason,omitempty"`
	PID           int      `json:"pid,omitempty"`
	SpawnMS       *float64 `json:"spawn_ms,omitempty"`
	InitializeMS  *float64 `json:"initialize_ms,omitempty"`
	ToolsListMS   *float64 `json:"tools_list_ms,omitempty"`
	TotalMS       float64  `json:"total_ms"`
	Protocol      string   `json:"protocol_version,omitempty"`
	ServerName    string   `json:"server_name,omitempty"`
	ServerVersion string   `json:"server_version,omitempty"`
	Tools         int      `json:"tools"`  // exposed, after tools.allow and tools.deny
	Listed        int      `json:"listed"` // as the server listed them
	Unmatched     []string `json:"unmatched,omitempty"`
	StderrTail    string   `json:"stderr_tail,omitempty"`
	Exited        bool     `json:"exited"` // its process was seen to exit (or never started)
	ExitStatus    string   `json:"exit_status,omitempty"`
	// Probe is a remote server's check step by step: name, connection,
	// TLS, HTTP answer, era, authorization.
	Probe *remoteProbe `json:"probe,omitempty"`
}

type shutdownCheck struct {
	Started   int    `json:"started"`   // processes started
	Confirmed int    `json:"confirmed"` // of those, seen to exit
	Error     string `json:"error,omitempty"`
}

func (r *doctorReport) problem(where, problem, fix string) {
	r.Problems = append(r.Problems, finding{where, problem, fix})
}

func (r *doctorReport) warn(where, problem, fix string) {
	r.Warnings = append(r.Warnings, finding{where, problem, fix})
}

// doctor runs the checks. It never listens and never serves. While the
// servers boot it writes to progress which of them are still starting,
// with the config's resolved secrets replaced.
func doctor(cfgPath, mcpConfig string, opts config.EditorOptions, progress io.Writer) *doctorReport {
	r := &doctorReport{Problems: []finding{}, Warnings: []finding{}, cfg: &config.Config{}}
	if _, r.Jail.Cgroup = jail.DetectCgroup(); !r.Jail.Cgroup.Available {
		r.Jail.Fix = cgroupFix
	}
	cfg, _, warnings, err := loadConfigFiles(cfgPath, mcpConfig, opts)
	r.Config.Source = cmp.Or(strings.TrimSpace(cfgPath+" "+mcpConfig), "built-in demo")
	if err != nil {
		r.configProblems(err)
		return r
	}
	r.cfg = cfg
	if err := r.resolveSecrets(cfg); err != nil {
		// serve would refuse the config: nothing is started.
		r.configProblems(err)
		return r
	}
	r.Config.Loaded = true
	for _, w := range warnings {
		r.warn(location(w.File, w.Line), w.Msg, w.Fix)
	}
	for _, s := range cfg.Servers {
		r.Config.Servers = append(r.Config.Servers, s.Name)
	}
	if len(cfg.Servers) == 0 {
		r.problem(r.Config.Source, "no servers are configured: serve would serve nothing",
			"add an [mcp.NAME] table with its command (`capbridge init --from EDITOR-CONFIG` converts an editor's servers)")
	}
	call, control := config.DefaultSockets(os.Getenv("XDG_RUNTIME_DIR"), os.Getuid())
	if cfg.Bridge.CallSocket == "" {
		cfg.Bridge.CallSocket = call
	}
	if cfg.Bridge.ControlSocket == "" {
		cfg.Bridge.ControlSocket = control
	}

	// Each remote server is looked at step by step before the boot, so
	// that a failure is named where it happens.
	probes := map[string]*remoteProbe{}
	for _, s := range cfg.Servers {
		if s.Remote != nil {
			probes[s.Name] = probeRemote(s)
		}
	}

	events := &bootEvents{byServer: map[string]*serverEvents{}}
	b := bridge.New(bridge.Options{
		TokenDir: tokenDir(),
		Config:   cfg,
		// Info, whatever log_level says: the boot's events are what
		// doctor measures.
		Log:           zerolog.New(events).Level(zerolog.InfoLevel),
		Audit:         zerolog.Nop(),
		ClientVersion: version(),
	})
	r.sockets(b.Preflight())

	// Ctrl-C during boot stops it, as it does serve's; the shutdown that
	// follows is bounded.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	start := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		events.watch(watchCtx, bridge.NewSecretWriter(progress, cfg), r.Config.Servers, start)
	}()
	outcomes := b.Boot(ctx)
	stopWatch()
	<-watched
	interrupted := ctx.Err() != nil
	shutErr := b.Shutdown(0)

	byName := make(map[string]config.Server, len(cfg.Servers))
	for _, s := range cfg.Servers {
		byName[s.Name] = s
	}
	for _, o := range outcomes {
		r.server(byName[o.Name], o, start, events.of(o.Name), probes[o.Name], opts.Strict)
	}
	r.shutdown(shutErr)
	if interrupted {
		r.problem("doctor", "interrupted while the servers booted", "run it again and let it finish")
	}
	r.OK = len(r.Problems) == 0
	return r
}

// resolveSecrets resolves the config's secret references as serve does,
// and reports each: whether it resolved, to how many bytes.
func (r *doctorReport) resolveSecrets(cfg *config.Config) error {
	err := config.ResolveSecrets(cfg, systemSecrets())
	var failed config.ErrorList
	errors.As(err, &failed)
	for _, s := range cfg.Servers {
		for _, ref := range s.Refs {
			sr := secretReport{Server: s.Name, Key: ref.Key, Reference: ref.Template}
			for _, e := range failed {
				if e.Key == "mcp."+s.Name+"."+ref.Key {
					sr.Error = e.Msg
				}
			}
			if sr.Error == "" {
				sr.Resolved = true
				if name, ok := strings.CutPrefix(ref.Key, "env."); ok {
					sr.Bytes = len(s.Env[name])
				} else if s.Remote != nil {
					sr.Bytes = len(s.Remote.Headers[strings.TrimPrefix(ref.Key, "headers.")])
				}
			}
			r.Secrets = append(r.Secrets, sr)
		}
	}
	return err
}

// configProblems turns a load error into findings, one per mistake when
// the config reader listed them.
func (r *doctorReport) configProblems(err error) {
	var list config.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			where := location(e.File, e.Line)
			if e.Key != "" {
				where += ": " + e.Key
			}
			r.problem(where, e.Msg, cmp.Or(e.Fix, "correct it and run doctor again"))
		}
		return
	}
	r.problem(r.Config.Source, err.Error(), "correct the file or its path and run doctor again")
}

func (r *doctorReport) sockets(checks []bridge.SocketCheck) {
	for _, c := range checks {
		s := socketReport{Key: c.Key, Path: c.Path, CreateDir: c.CreateDir, Stale: c.Stale}
		if c.Err != nil {
			s.Error = c.Err.Error()
			flag := "--" + strings.ReplaceAll(c.Key, "_", "-")
			fix := "set [bridge] " + c.Key + " (or serve's " + flag + ") to a path in a directory that belongs to capbridge's user, mode 0700"
			var unknownGroup user.UnknownGroupError
			switch {
			case errors.Is(c.Err, bridge.ErrSocketInUse):
				fix = "a process (another capbridge?) listens there: stop it, or give this one another " + c.Key
			case errors.Is(c.Err, bridge.ErrSocketUnreachable):
				fix = "as the error says: a harness that jails programs under another uid must be able to search every directory on the path and write the socket"
			case errors.As(c.Err, &unknownGroup):
				fix = "create the group, or set [bridge] call_socket_group to one that exists"
			}
			r.problem(c.Key+" "+c.Path, s.Error, fix)
		}
		r.Sockets = append(r.Sockets, s)
	}
}

// The messages of the boot events doctor reads, as the bridge and mcpwire
// log them. Doctor's tests check that every phase is seen, so a renamed
// event fails there rather than going unmeasured.
const (
	evStarted     = "mcpwire: server started"
	evInitialized = "mcpwire: initialized"
	evModern      = "mcpwire: speaking the modern era"
	evFallback    = "mcpwire: Streamable HTTP refused initialize; trying the legacy HTTP+SSE transport"
	evReady       = "server ready"
	evDied        = "mcpwire: server connection died"
	evFailed      = "server failed to boot"
	evStderr      = "mcpwire: server stderr"
	evExited      = "mcpwire: server exited"
)

func (r *doctorReport) server(s config.Server, o bridge.Outcome, start time.Time, rec serverEvents, probe *remoteProbe, strict bool) {
	sr := serverReport{Name: o.Name, Defined: location(s.File, s.Line), State: o.State.String(), Reason: o.Reason}
	if rm := s.Remote; rm != nil {
		sr.URL, sr.Transport = shownURL(rm.URL), rm.Transport
	}
	last := start
	phase := func(at time.Time) *float64 {
		ms := millis(at.Sub(last))
		last = at
		return &ms
	}
	started, end, fellBack := false, time.Time{}, false
	for _, e := range rec.events {
		switch {
		case e.Message == evFallback:
			fellBack = true
		case e.Message == evStarted:
			sr.PID, sr.SpawnMS, started = e.PID, phase(e.at), true
		case e.Message == evInitialized || e.Message == evModern:
			sr.InitializeMS = phase(e.at)
			sr.Protocol, sr.ServerName, sr.ServerVersion = e.Version, e.ServerName, e.ServerVersion
		case e.Message == evReady:
			sr.ToolsListMS = phase(e.at)
			sr.Tools, sr.Listed = e.Tools, e.Listed
		case e.Message == evDied || e.Message == evFailed:
			// The first of these is when the boot failed; the
			// failed server's shutdown comes after it.
			if end.IsZero() {
				end = e.at
			}
		case e.Message == evExited:
			sr.Exited, sr.ExitStatus = true, e.Status
		case e.Entry != "":
			sr.Unmatched = append(sr.Unmatched, e.Entry)
		case e.Level == "warn" && e.Tool != "":
			r.warn("server "+o.Name, "tool "+strconv.Quote(e.Tool)+": "+e.Message, "nothing to do: capbridge leaves it out")
		}
	}
	// A failed boot ends when it is declared failed, which may be long
	// after its last phase (a handshake that timed out).
	sr.TotalMS = millis(cmp.Or(end, last).Sub(start))
	if !started {
		sr.Exited = true // nothing was started, so nothing can outlive doctor
	}
	if s.Remote != nil && sr.Transport == config.TransportAuto && o.State == bridge.StateReady {
		sr.Transport = map[bool]string{false: config.TransportStreamable, true: config.TransportSSE}[fellBack]
	}
	if probe != nil {
		sr.Probe = probe
		if failedStep(probe) == nil && o.State != bridge.StateNeedsLogin {
			probe.Steps = append(probe.Steps, eraStep(sr, o.Reason))
		}
	}
	where := "server " + o.Name + " (" + sr.Defined + ")"
	if o.State != bridge.StateReady {
		// The tail captured at the failure may miss what the server
		// wrote as it died; the logged lines are complete once its
		// process has been shut down.
		sr.StderrTail = o.StderrTail
		if strings.TrimSpace(sr.StderrTail) == "" && len(rec.stderr) > 0 {
			sr.StderrTail = strings.Join(rec.stderr, "\n") + "\n"
		}
		r.problem(where, "failed to boot: "+o.Reason, bootFix(s, sr))
	}
	for _, u := range sr.Unmatched {
		msg := u + " names no tool of this server"
		fix := "correct its spelling, or remove it, where " + o.Name + " is defined (" + sr.Defined + ")"
		if strict {
			r.problem(where, msg+": serve --strict fails this server's boot", fix)
		} else {
			r.warn(where, msg, fix)
		}
	}
	r.Servers = append(r.Servers, sr)
}

// bootFix says what to do about a failed boot, by how far it got.
func bootFix(s config.Server, sr serverReport) string {
	timeout := strings.Contains(sr.Reason, context.DeadlineExceeded.Error()) || strings.Contains(sr.Reason, mcpwire.ErrTimeout.Error())
	if s.Remote != nil {
		return remoteFix(s, sr, timeout)
	}
	switch {
	case sr.SpawnMS == nil:
		return fmt.Sprintf("check the command at %s: %q must be an executable, by absolute path or on the PATH the server gets (capbridge's, unless its env sets one)", sr.Defined, s.Command)
	case timeout:
		return fmt.Sprintf("it did not finish starting within startup_timeout (%s): raise startup_timeout in its [mcp.%s] table, or check that `%s` is an MCP server on stdio", s.StartupTimeout, s.Name, shellJoin(s))
	case sr.InitializeMS == nil:
		return fmt.Sprintf("it did not complete the MCP handshake: run `%s` by hand and read its stderr (the tail is below); check its arguments and env at %s", shellJoin(s), sr.Defined)
	}
	return fmt.Sprintf("its tools could not be served (the reason above); tools.allow or tools.deny in its [mcp.%s] table can leave tools out", s.Name)
}

// remoteFix says what to do about a remote server that failed to boot,
// by what the reason shows: the name, the connection, TLS, the answer's
// status, authorization, the handshake.
func remoteFix(s config.Server, sr serverReport, timeout bool) string {
	if st := failedStep(sr.Probe); st != nil && st.Fix != "" {
		return st.Step + " failed (" + st.Detail + "): " + st.Fix
	}
	at := fmt.Sprintf("[mcp.%s] (%s)", s.Name, sr.Defined)
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(sr.Reason, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("capbridge login"):
		return fmt.Sprintf("the server needs authorization: run `capbridge login %s` (with -c and this config) for a person's login, or give it a token with bearer_token_env or bearer_token_file (or oauth client credentials) in %s; docs/remote.md", s.Name, at)
	case has("HTTP 401", "HTTP 403"):
		return "the server requires authorization: give it a token with bearer_token_env or bearer_token_file (or the header it wants, with header_env) in " + at + "; docs/remote.md"
	case has("no such host", "server misbehaving"):
		return "the host name in url does not resolve: check url in " + at + " and this machine's DNS"
	case has("x509:", "tls:"):
		return "TLS failed: a server whose certificate a private CA issued needs ca_file, one that asks for a client certificate needs client_cert and client_key, in " + at
	case has("connection refused", "connect:", "i/o timeout", "network is unreachable"):
		return "nothing accepts connections at the url's host and port: check url in " + at + " and that the server runs (HTTPS_PROXY and NO_PROXY apply)"
	case has("HTTP 404", "HTTP 405", "text/html"):
		return "the url answers, but not as an MCP endpoint: check its path in " + at + " (often /mcp, or /sse for the legacy transport)"
	case has("HTTP "):
		return "the server answered the handshake with an error status (above): check url in " + at + " and the server's own logs"
	case timeout:
		return fmt.Sprintf("it did not finish the MCP handshake within startup_timeout (%s): check that url in %s is an MCP endpoint, or raise startup_timeout", s.StartupTimeout, at)
	case sr.InitializeMS == nil:
		return "it did not complete the MCP handshake: check that url in " + at + " is an MCP endpoint and transport suits it (auto finds Streamable HTTP and the legacy HTTP+SSE transport)"
	}
	return fmt.Sprintf("its tools could not be served (the reason above); tools.allow or tools.deny in [mcp.%s] can leave tools out", s.Name)
}

// shownURL is a URL as doctor may print it: no credentials, query or
// fragment.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func (r *doctorReport) shutdown(err error) {
	c := &shutdownCheck{}
	for _, s := range r.Servers {
		if s.PID != 0 {
			c.Started++
			if s.Exited {
				c.Confirmed++
			} else {
				r.problem("server "+s.Name, fmt.Sprintf("its process (pid %d) was not seen to exit", s.PID),
					fmt.Sprintf("check with `ps -g %d` and stop it with `kill -KILL -%d`", s.PID, s.PID))
			}
		}
	}
	if err != nil {
		c.Error = err.Error()
		r.problem("shutdown", err.Error(), "a server ignored SIGTERM and SIGKILL within their bounds: find it with `ps` and stop it")
	}
	r.Shutdown = c
}

func (r *doctorReport) print(w io.Writer) {
	// What the servers said (a failure's reason, the end of its stderr)
	// is in the texts: each is shown inert.
	line := func(section, status, text string) {
		fmt.Fprintf(w, "%-9s %-5s %s\n", section, status, inert.Line(text))
	}
	more := func(text string) { fmt.Fprintf(w, "%16s%s\n", "", inert.Line(text)) }
	status := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAIL"
	}
	src := r.Config.Source
	if r.Config.Loaded {
		line("config", "ok", fmt.Sprintf("%s: %d server(s): %s", src, len(r.Config.Servers), strings.Join(r.Config.Servers, ", ")))
	} else {
		line("config", "FAIL", src)
	}
	if r.Jail.Cgroup.Available {
		line("jail", "ok", r.Jail.Cgroup.String())
	} else {
		line("jail", "note", r.Jail.Cgroup.String())
		more("fix: " + r.Jail.Fix)
	}
	for _, s := range r.Secrets {
		text := fmt.Sprintf("%s %s = %q", s.Server, s.Key, s.Reference)
		if s.Resolved {
			line("secret", "ok", fmt.Sprintf("%s resolves (%d bytes)", text, s.Bytes))
		} else {
			line("secret", "FAIL", text+": "+s.Error)
		}
	}
	for _, s := range r.Sockets {
		text := s.Key + " " + s.Path
		switch {
		case s.Error != "":
			text += ": " + s.Error
		case s.CreateDir:
			text += " (serve creates its directory, mode 0700)"
		case s.Stale:
			text += " (a stale socket from an earlier run; serve replaces it)"
		}
		line("socket", status(s.Error == ""), text)
	}
	for _, s := range r.Servers {
		if s.State == bridge.StateReady.String() {
			if s.URL != "" {
				line("server", "ok", fmt.Sprintf("%s ready in %s: connect and handshake %s, tools/list %s",
					s.Name, fmtMS(&s.TotalMS), fmtMS(s.InitializeMS), fmtMS(s.ToolsListMS)))
			} else {
				line("server", "ok", fmt.Sprintf("%s ready in %s: spawn %s, initialize %s, tools/list %s",
					s.Name, fmtMS(&s.TotalMS), fmtMS(s.SpawnMS), fmtMS(s.InitializeMS), fmtMS(s.ToolsListMS)))
			}
			info := "protocol " + s.Protocol
			if s.URL != "" {
				info = s.URL + " over " + s.Transport + ", " + info
			}
			if s.ServerName != "" {
				info += ", server " + strings.TrimSpace(s.ServerName+" "+s.ServerVersion)
			}
			info += fmt.Sprintf(", %d tool(s)", s.Tools)
			if s.Listed != s.Tools {
				info += fmt.Sprintf(" of %d listed", s.Listed)
			}
			more(info)
			printProbe(s.Probe, more)
		} else {
			line("server", "FAIL", fmt.Sprintf("%s %s after %s: %s", s.Name, s.State, fmtMS(&s.TotalMS), s.Reason))
			if s.ExitStatus != "" {
				more("its process: " + s.ExitStatus)
			}
			for _, l := range tailLines(s.StderrTail, 10) {
				more("stderr: " + l)
			}
			printProbe(s.Probe, more)
		}
		for _, u := range s.Unmatched {
			more(u + " names no tool")
		}
	}
	if c := r.Shutdown; c != nil {
		line("shutdown", status(c.Error == "" && c.Confirmed == c.Started), fmt.Sprintf("%d of %d server process(es) confirmed exited", c.Confirmed, c.Started))
	}
	list := func(title string, fs []finding) {
		if len(fs) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range fs {
			fmt.Fprintf(w, "  %s: %s\n    fix: %s\n", inert.Line(f.Where), inert.Line(f.Problem), inert.Line(f.Fix))
		}
	}
	list("warnings", r.Warnings)
	list("problems", r.Problems)
	if r.OK {
		fmt.Fprintln(w, "\nall checks passed")
	} else {
		fmt.Fprintf(w, "\n%d problem(s)\n", len(r.Problems))
	}
}

// bootEvents records the bridge's log events of each server with the
// time each was written, and the last lines of each server's stderr.
// zerolog hands every event to Write whole, and synchronously, so the time
// of the Write is the time of the event. Servers boot in parallel: Write
// may be called concurrently.
type bootEvents struct {
	mu       sync.Mutex
	byServer map[string]*serverEvents
}

type serverEvents struct {
	events []bootEvent
	stderr []string // the last maxStderrLines lines
}

// bootEvent holds the fields of the events doctor reads.
type bootEvent struct {
	at            time.Time
	Server        string `json:"server"`
	Level         string `json:"level"`
	Message       string `json:"message"`
	PID           int    `json:"pid"`
	Version       string `json:"version"`
	ServerName    string `json:"server_name"`
	ServerVersion string `json:"server_version"`
	Tools         int    `json:"tools"`
	Listed        int    `json:"listed"`
	Entry         string `json:"entry"`
	Tool          string `json:"tool"`
	Status        string `json:"status"`
	Stderr        string `json:"stderr"`
}

// Bounds on what is kept per server: a server may log without end, and
// doctor needs the few lifecycle events and the end of stderr.
const (
	maxBootEvents  = 1024
	maxStderrLines = 20
)

func (l *bootEvents) Write(p []byte) (int, error) {
	at := time.Now()
	var e bootEvent
	if json.Unmarshal(p, &e) != nil || e.Server == "" {
		return len(p), nil
	}
	e.at = at
	l.mu.Lock()
	defer l.mu.Unlock()
	se := l.byServer[e.Server]
	if se == nil {
		se = &serverEvents{}
		l.byServer[e.Server] = se
	}
	switch {
	case e.Message == evStderr:
		se.stderr = append(se.stderr, e.Stderr)
		if len(se.stderr) > maxStderrLines {
			se.stderr = slices.Delete(se.stderr, 0, 1)
		}
	case len(se.events) < maxBootEvents:
		se.events = append(se.events, e)
	}
	return len(p), nil
}

// progressEvery is how often doctor says which servers are still
// starting. A cold npx or uvx fetches a package before the server
// answers, which can take a minute: without a word, that looks like a
// hang.
const progressEvery = 5 * time.Second

// maxProgressStderr bounds the stderr line a progress line quotes.
const maxProgressStderr = 160

// watch writes to w, every progressEvery until ctx is done, one line per
// server of servers that is neither ready nor failed: how long it has been
// starting, how far it got, and the last line it wrote to stderr (npx and
// uvx say there what they are fetching).
func (l *bootEvents) watch(ctx context.Context, w io.Writer, servers []string, start time.Time) {
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, name := range servers {
				if line, ok := l.progress(name, now.Sub(start)); ok {
					fmt.Fprintln(w, inert.Line(line)) // it quotes the server's stderr
				}
			}
		}
	}
}

// progress is server's progress line after elapsed, or ok=false once its
// boot has ended.
func (l *bootEvents) progress(server string, elapsed time.Duration) (line string, ok bool) {
	rec := l.of(server)
	phase := "starting"
	for _, e := range rec.events {
		switch e.Message {
		case evReady, evFailed, evDied:
			return "", false
		case evStarted:
			phase = "started (pid " + strconv.Itoa(e.PID) + "), waiting for its answer to initialize"
		case evInitialized, evModern:
			phase = "initialized, listing its tools"
		}
	}
	line = fmt.Sprintf("capbridge doctor: %s still starting after %s: %s", server, elapsed.Round(time.Second), phase)
	if n := len(rec.stderr); n > 0 {
		line += "; its last stderr line: " + strconv.Quote(truncate.Ellipsis(rec.stderr[n-1], maxProgressStderr))
	}
	return line, true
}

// of returns what was recorded for server.
func (l *bootEvents) of(server string) serverEvents {
	l.mu.Lock()
	defer l.mu.Unlock()
	if se := l.byServer[server]; se != nil {
		return serverEvents{events: slices.Clone(se.events), stderr: slices.Clone(se.stderr)}
	}
	return serverEvents{}
}

func location(file string, line int) string {
	if line > 0 {
		return file + ":" + strconv.Itoa(line)
	}
	return file
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fmtMS(ms *float64) string {
	if ms == nil {
		return "-"
	}
	return strconv.FormatFloat(*ms, 'f', 1, 64) + "ms"
}

// tailLines returns the last n non-empty lines of s.
func tailLines(s string, n int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out[max(0, len(out)-n):]
}

// shellJoin renders a server's argv for a shell, for the operator to run
// by hand (its env is not shown: it may hold secrets).
func shellJoin(s config.Server) string {
	words := append([]string{s.Command}, s.Args...)
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
			words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// failedStep is the probe's step that failed, nil when none did.
func failedStep(p *remoteProbe) *probeStep {
	if p == nil {
		return nil
	}
	for i := range p.Steps {
		if !p.Steps[i].OK {
			return &p.Steps[i]
		}
	}
	return nil
}

// printProbe prints a remote server's steps, one line each.
func printProbe(p *remoteProbe, more func(string)) {
	if p == nil {
		return
	}
	if p.Proxy != "" {
		more("through the proxy " + p.Proxy)
	}
	for _, st := range p.Steps {
		status := "ok"
		if !st.OK {
			status = "FAIL"
		}
		line := fmt.Sprintf("%-7s %-4s %s", st.Step, status, st.Detail)
		if st.MS != nil {
			line += " (" + fmtMS(st.MS) + ")"
		}
		more(line)
		if st.Fix != "" {
			more("        fix: " + st.Fix)
		}
	}
}
