package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/cmd/capbridge/internal/confwatch"
	"github.com/capbridge/capbridge/cmd/capbridge/internal/demoserver"
	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/regular"
	"github.com/capbridge/capbridge/internal/telemetry"
	"github.com/capbridge/capbridge/mcpwire"
)

// Exit statuses of serve, documented in the README.
const (
	exitConfig     = 3 // the configuration could not be read or is wrong
	exitBoot       = 4 // --require-all and a server failed to boot, or the sockets could not be opened
	exitUnconfirmd = 5 // shutdown could not confirm that every server exited
)

// maxConfigFile bounds what serve reads as a config file.
const maxConfigFile = 4 << 20

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("serve", "capbridge serve [-c capbridge.toml] [--mcp-config EDITOR-CONFIG] [flags]", `
Run the service: boot the configured MCP servers, generate their façades,
and serve the call socket (for jailed programs) and the control socket (for
the operator and harnesses). With no config it serves the built-in demo
server. The sockets open first; each server boots in parallel and takes
calls once it is ready, and is restarted as its restart policy says. It
prints one JSON line once ready (by default when every server is ready or
has failed its first attempt; --ready-when=sockets: as soon as the sockets
are open) and notifies $NOTIFY_SOCKET. capbridge reload, or --watch, applies
a changed config without a restart; SIGHUP only reopens the audit file.
Exit status: 0 clean shutdown, 1 runtime error, 2 bad command line,
3 configuration error, 4 boot failure under --require-all or sockets that
cannot be opened, 5 shutdown that could not confirm every server exited.`)
	cfgPath := fs.String("c", "", "capbridge.toml to read (default: none, which serves the built-in demo server)")
	mcpConfig := fs.String("mcp-config", "", "an editor's MCP config whose stdio servers to serve: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code JSON, or Codex's config.toml")
	workspace := fs.String("workspace", "", "what ${workspaceFolder} expands to in --mcp-config (default: that file's directory)")
	strict := fs.Bool("strict", false, "make warnings errors: a tools.allow, tools.deny, destructive or restrict entry that names no tool fails that server")
	requireAll := fs.Bool("require-all", false, "exit if any server fails to boot")
	readyFile := fs.String("ready-file", "", "write the readiness line to this file, atomically, once ready")
	readyWhen := fs.String("ready-when", "all", "when to print the ready line: all (every server ready or failed) or sockets (the sockets are open; servers still booting)")
	callSocket := fs.String("call-socket", "", "override [bridge] call_socket")
	controlSocket := fs.String("control-socket", "", "override [bridge] control_socket")
	lockFlag := fs.String("lock", "", "serve only the tools this lock approves (capbridge lock), withholding any that changed; overrides [bridge] lock")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of serve (pprof format) to this file, from start to exit: for measuring capbridge")
	allocProfile := fs.String("alloc-profile", "", "write a profile of every allocation serve sampled (pprof format) to this file at exit: for measuring capbridge")
	watch := fs.Bool("watch", false, "apply the config files (and the lock) when they change, as capbridge reload does: once a change has held for a second; a config that does not validate is refused and logged, and the running one stays")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; serve takes only flags", pos[0])
	}
	switch {
	case *readyWhen != "all" && *readyWhen != "sockets":
		return fs.usageError(stderr, "--ready-when is all or sockets, not %q", *readyWhen)
	case *readyWhen == "sockets" && *requireAll:
		return fs.usageError(stderr, "--require-all waits for every server's boot; use it with --ready-when=all")
	}
	if *watch && *cfgPath == "" && *mcpConfig == "" {
		return fs.usageError(stderr, "--watch watches the config files; give -c or --mcp-config")
	}
	// load reads the configuration as given on the command line, at boot
	// and at each reload.
	load := func() (*config.Config, bool, config.ErrorList, error) {
		cfg, demo, warnings, err := loadServeConfig(*cfgPath, *mcpConfig, config.EditorOptions{Workspace: *workspace, Strict: *strict})
		if err != nil {
			return nil, false, nil, err
		}
		serveOverrides(cfg, *strict, *callSocket, *controlSocket)
		return cfg, demo, warnings, nil
	}
	// What --watch measures a change from: each file as it was when
	// serve read it, not when the watch starts after the boot (which
	// takes up to startup_timeout), so that a save during the boot is
	// applied once serve is ready. Each is read just before load (or
	// serveLock) reads it: a save between the two reads is at worst
	// applied once more, never missed.
	loaded := map[string][]byte{}
	snapshot := func(path string) {
		if !*watch || path == "" {
			return
		}
		if data, err := readBounded(path); err == nil {
			loaded[path] = data
		}
	}
	snapshot(*cfgPath)
	snapshot(*mcpConfig)
	cfg, demo, warnings, err := load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfig
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(cfg.Bridge.Procs)
	}
	stopProfiles, err := startProfiles(*cpuProfile, *allocProfile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer stopProfiles(stderr)
	// Everything serve writes goes through secrets: what the config's
	// secret references resolved to is replaced, whatever a server prints
	// and whatever an error quotes.
	tty := isTerminal(stderr)
	secrets := bridge.NewSecretWriter(stderr, cfg)
	log, console := newLoggerTTY(secrets, tty, cfg.Bridge.LogFormat, cfg.Bridge.LogLevel)
	for _, w := range warnings {
		log.Warn().Str("file", w.File).Int("line", w.Line).Str("key", w.Key).Str("fix", w.Fix).Msg(w.Msg)
	}
	snapshot(cmp.Or(*lockFlag, cfg.Bridge.Lock))
	locked, err := serveLock(cfg, *lockFlag, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfig
	}
	opts := bridge.Options{
		Config:        cfg,
		Log:           log,
		Audit:         log.With().Str("log", "audit").Logger(),
		ClientVersion: version(),
		Lock:          locked,
		TokenDir:      tokenDir(),
	}
	if !demo {
		// capbridge reload and --watch read the files again, as given
		// on the command line; the secrets of what they read are
		// redacted before any of it runs.
		opts.Reload = func() (*config.Config, *lock.File, error) {
			cfg, _, warnings, err := load()
			if err != nil {
				return nil, nil, err
			}
			for _, w := range warnings {
				log.Warn().Str("file", w.File).Int("line", w.Line).Str("key", w.Key).Str("fix", w.Fix).Msg(w.Msg)
			}
			lf, err := serveLock(cfg, *lockFlag, log)
			if err != nil {
				return nil, nil, err
			}
			return cfg, lf, nil
		}
	}
	audit := &auditFile{path: cfg.Bridge.AuditPath, secrets: bridge.Secrets(cfg)}
	if opts.Reload != nil {
		// A reload's secrets are redacted wherever serve writes: its logs
		// and its audit file (the one open, and the next SIGHUP opens).
		opts.Secrets = func(m map[string]string) {
			secrets.Set(m)
			audit.setSecrets(m)
		}
	}
	// The audit trail always has a writer of the bridge's own, which
	// knows when a write fails (audit_fail).
	opts.AuditWriter = secrets // JSON lines, batched
	if console {
		// The console writer takes one line per Write.
		opts.AuditWriter, opts.AuditWriteThrough = zerolog.ConsoleWriter{Out: secrets, TimeFormat: time.TimeOnly}, true
	}
	// SIGHUP reopens the audit file, and does nothing else: logrotate's
	// postrotate kill -HUP, and a systemd ExecReload, must not stop the
	// service. Caught from here on, before anything is started.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if audit.path != "" {
		f, err := audit.open()
		if err != nil {
			log.Error().Err(err).Msg("cannot open the audit trail")
			return exitConfig
		}
		// Closed after Shutdown, which writes the last batch.
		audit.f = f
		defer audit.close()
		// Its own JSON lines at info whatever log_level says: the
		// audit trail is a record, not a diagnostic.
		opts.Audit = zerolog.New(f).With().Timestamp().Logger()
		opts.AuditWriter, opts.AuditWriteThrough = f, false
	}
	if tty {
		opts.Progress = progressLines(secrets)
	}
	// Before any server starts: whatever a server leaves behind when its
	// parent dies (a browser that setsid() out of the process group)
	// becomes our child, for the retirement sweep to end and reap,
	// rather than init's. Only a warning if the kernel refuses: the
	// sweep still kills what it finds, and init reaps.
	if err := mcpwire.Subreap(); err != nil {
		log.Warn().Err(err).Msg("not a child subreaper; a server's orphans go to init")
	}
	// Where the unified cgroup hierarchy is writable (root, or a
	// delegated subtree), each server gets a cgroup of its own: what it
	// starts cannot leave it, and retiring the server kills it whole.
	// What a SIGKILLed predecessor left in its cgroups ends here too.
	if g, stale, err := mcpwire.OpenCgroups(); err != nil {
		log.Info().Err(err).Msg("servers run without cgroups of their own; custody rests on process groups and the custody sweep")
	} else {
		if stale > 0 {
			log.Warn().Int("cgroups", stale).Msg("killed what a previous capbridge left in its cgroups")
		}
		log.Info().Str("cgroup", g.Dir()).Msg("each server runs in a cgroup of its own")
		opts.Cgroups = g
		// Deferred before the bridge exists, so it runs after Shutdown
		// on every return: the servers are retired by then.
		defer func() {
			if err := g.Close(time.Second); err != nil {
				log.Error().Err(err).Msg("cannot remove capbridge's cgroups")
			}
		}()
	}
	// Traces, when [telemetry] or the OTEL_* environment asks for them.
	// The exporter connects lazily: an absent collector costs the spans,
	// never the service. Shutdown flushes what is queued, within
	// shutdown_timeout.
	tracer, err := telemetry.New(cfg.Telemetry, os.Getenv, version(), func(err error) {
		log.Warn().Err(err).Msg("OpenTelemetry: spans not exported")
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfig
	}
	if tracer != nil {
		log.Info().Msg("exporting traces over OTLP ([telemetry], OTEL_* environment)")
	}
	opts.Tracer = tracer
	b := bridge.New(opts)
	if err := b.ReserveDescriptors(0); err != nil {
		log.Warn().Err(err).Msg("not enough file descriptors for every budget")
	}
	hupDone := make(chan struct{})
	go func() {
		defer close(hupDone)
		for range hup {
			audit.reopen(b, log)
		}
	}()
	// Before the audit file closes: no reopen races the last batch.
	defer func() { signal.Stop(hup); close(hup); <-hupDone }()
	// The sockets first: a second capbridge on the same paths fails here
	// before it spawns anything, and calls are answered (a server not yet
	// ready: server_unavailable, "starting") while the servers boot.
	if err := b.Listen(); err != nil {
		log.Error().Err(err).Msg("cannot open the sockets")
		if err := b.Shutdown(0); err != nil {
			return exitUnconfirmd
		}
		return exitBoot
	}
	served := make(chan struct{})
	go func() { b.Serve(); close(served) }()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	bootCtx, cancelBoot := context.WithCancel(context.Background())
	go func() {
		select {
		case <-sigs:
			cancelBoot()
		case <-bootCtx.Done():
		}
	}()
	states := make(map[string]string, len(cfg.Servers))
	if *readyWhen == "sockets" {
		b.Start()
		for _, name := range b.Servers() {
			states[name] = bridge.StateStarting.String()
		}
	} else {
		outcomes := b.Boot(bootCtx)
		interrupted := bootCtx.Err() != nil
		failed := 0
		for _, o := range outcomes {
			states[o.Name] = o.State.String()
			if o.State != bridge.StateReady {
				failed++
				states[o.Name] += ": " + o.Reason
				log.Error().Str("server", o.Name).Stringer("state", o.State).Str("reason", o.Reason).Str("stderr_tail", o.StderrTail).Msg("server did not boot")
			}
		}
		if interrupted || (*requireAll && failed > 0) {
			err := b.Shutdown(0)
			<-served
			if err != nil {
				log.Error().Err(err).Msg("shutdown could not confirm every server's exit")
				return exitUnconfirmd
			}
			if interrupted {
				return exitError
			}
			return exitBoot
		}
	}
	cancelBoot()
	var metricsAddr string
	metricsDone := make(chan struct{}) // closed once the metrics listener has stopped
	if cfg.Bridge.MetricsListen != "" {
		l, addr, err := b.ListenMetrics()
		if err != nil {
			log.Error().Err(err).Str("metrics_listen", cfg.Bridge.MetricsListen).Msg("cannot listen for metrics; choose a free port in metrics_listen")
			err := b.Shutdown(0)
			<-served
			if err != nil {
				return exitUnconfirmd
			}
			return exitBoot
		}
		metricsAddr = addr
		go func() {
			defer close(metricsDone)
			if err := b.ServeMetrics(l); err != nil {
				log.Error().Err(err).Msg("the metrics listener stopped")
			}
		}()
	} else {
		close(metricsDone)
	}

	ready, _ := json.Marshal(readyLine{Ready: true, CallSocket: cfg.Bridge.CallSocket, ControlSocket: cfg.Bridge.ControlSocket, Metrics: metricsAddr, Servers: states})
	// A failed server's reason is its own words, which may quote a secret.
	ready = []byte(secrets.Text(string(ready)))
	// The file first: a harness that saw the line on stdout may look for
	// the file next, and must find it.
	if *readyFile != "" {
		if err := writeFileAtomic(*readyFile, append(ready, '\n'), 0o644); err != nil {
			log.Error().Err(err).Str("path", *readyFile).Msg("cannot write the ready file")
		}
	}
	fmt.Fprintf(stdout, "%s\n", ready)
	if err := notify(os.Getenv("NOTIFY_SOCKET"), "READY=1"); err != nil {
		log.Warn().Err(err).Msg("cannot notify the service manager")
	}
	if demo {
		log.Info().Msg(`no config given: serving the built-in demo server. Try, in another shell:  go run ./cmd/capbridge call demo echo '{"text":"hello"}'`)
	}
	log.Info().Str("call_socket", cfg.Bridge.CallSocket).Str("control_socket", cfg.Bridge.ControlSocket).Str("metrics", metricsAddr).Msg("ready")

	watchDone := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(context.Background())
	if *watch {
		paths := []string{*cfgPath, *mcpConfig, cfg.Bridge.Lock}
		paths = slices.DeleteFunc(paths, func(p string) bool { return p == "" })
		log.Info().Strs("files", paths).Msg("watching the configuration: a change is applied once it has held for a second")
		go func() {
			defer close(watchDone)
			confwatch.Watch(watchCtx, confwatch.Options{Paths: paths, Read: readBounded, Loaded: loaded}, func() {
				// Reload logs and audits what changed, or why it refused.
				_, _ = b.Reload(watchCtx, "watch")
			})
		}()
	} else {
		close(watchDone)
	}

	sig := <-sigs
	stopWatch()
	<-watchDone
	log.Info().Str("signal", sig.String()).Dur("grace", cfg.Bridge.ShutdownGrace).Msg("shutting down")
	_ = notify(os.Getenv("NOTIFY_SOCKET"), "STOPPING=1")
	err = b.Shutdown(cfg.Bridge.ShutdownGrace)
	<-served
	<-metricsDone
	if err != nil {
		log.Error().Err(err).Msg("shutdown could not confirm every server's exit")
		return exitUnconfirmd
	}
	log.Info().Msg("stopped")
	return exitOK
}

// serveOverrides applies serve's flags to cfg, and the default sockets
// where neither the flags nor the file set them.
func serveOverrides(cfg *config.Config, strict bool, callSocket, controlSocket string) {
	for i := range cfg.Servers {
		cfg.Servers[i].Strict = strict
	}
	if callSocket != "" {
		cfg.Bridge.CallSocket = callSocket
	}
	if controlSocket != "" {
		cfg.Bridge.ControlSocket = controlSocket
	}
	call, control := config.DefaultSockets(os.Getenv("XDG_RUNTIME_DIR"), os.Getuid())
	if cfg.Bridge.CallSocket == "" {
		cfg.Bridge.CallSocket = call
	}
	if cfg.Bridge.ControlSocket == "" {
		cfg.Bridge.ControlSocket = control
	}
}

// readyLine is what serve prints once it serves. Servers maps each
// server's name to "ready", or to its state and the reason
// ("failed: <reason>"), or, under --ready-when=sockets, "starting".
type readyLine struct {
	Ready         bool              `json:"ready"`
	CallSocket    string            `json:"call_socket"`
	ControlSocket string            `json:"control_socket"`
	Metrics       string            `json:"metrics,omitempty"` // the metrics listener's address, when metrics_listen is set
	Servers       map[string]string `json:"servers"`
}

// openAudit opens the audit trail's file for appending, creating it
// mode 0600. An existing file must be a regular file (not a symlink:
// whoever controls one could send the trail elsewhere) owned by us and
// readable by nobody else, since the trail names every grant and call.
//
// It opens without waiting: a FIFO at the path (planted after a
// logrotate rename) would otherwise hold the open until something reads
// it, and with it the SIGHUP that asked for it and serve's exit. A FIFO
// no one reads is refused by the open (ENXIO), one someone reads by the
// regular-file check.
func openAudit(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
			return nil, fmt.Errorf("capbridge serve: audit_path %s is a symlink; give the file's own path", path)
		case errors.Is(err, unix.ENXIO):
			// What the open refuses without waiting: a FIFO with no
			// reader, a socket, a device with nothing behind it.
			if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("capbridge serve: audit_path %s is not a regular file (%s)", path, fi.Mode().Type())
			}
		}
		return nil, fmt.Errorf("capbridge serve: audit_path: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("capbridge serve: audit_path: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("capbridge serve: audit_path %s is not a regular file (%s)", path, fi.Mode().Type())
	case st == nil || int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("capbridge serve: audit_path %s does not belong to capbridge's user (uid %d); chown it or remove it", path, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		err = fmt.Errorf("capbridge serve: audit_path %s has mode %04o: others could read the audit trail; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	if err == nil {
		// Writes to a regular file never wait whatever the flag says,
		// but the trail's must block rather than fail with EAGAIN on a
		// file system that honours it.
		err = setBlocking(f)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// setBlocking clears O_NONBLOCK on f's descriptor.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("capbridge serve: audit_path: %w", serr)
	}
	return nil
}

// auditFile is serve's audit file, which SIGHUP reopens.
type auditFile struct {
	path    string // "" when the audit trail goes with the logs
	mu      sync.Mutex
	secrets map[string]string    // the configuration's, the last reload's once there is one
	f       *bridge.SecretWriter // the file
}

// open opens the audit file's path (openAudit) behind a SecretWriter of
// the configuration's secrets.
func (a *auditFile) open() (*bridge.SecretWriter, error) {
	f, err := openAudit(a.path)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return bridge.NewSecretWriterOf(f, a.secrets), nil
}

// setSecrets makes secrets, a reload's, the ones the audit file's writer
// replaces, now and after the next reopen.
func (a *auditFile) setSecrets(secrets map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.secrets = secrets
	if a.f != nil {
		a.f.Set(secrets)
	}
}

// reopen opens the audit file's path afresh, with openAudit's checks, and
// moves the trail to it: what is batched goes to the old file, then the
// old file is closed. A rename by logrotate leaves the old file under its
// new name; whatever stops the new one opening leaves the trail where it
// was, and says so.
func (a *auditFile) reopen(b *bridge.Bridge, log zerolog.Logger) {
	if a.path == "" {
		log.Info().Msg("SIGHUP: the audit trail goes with the logs, to stderr; there is no file to reopen")
		return
	}
	f, err := a.open()
	if err != nil {
		log.Error().Err(err).Msg("SIGHUP: cannot reopen the audit trail; it stays in the file it was in")
		return
	}
	// Under mu, so a reload's secrets (setSecrets) reach whichever file
	// the trail is in.
	a.mu.Lock()
	f.Set(a.secrets) // a reload's, should one have come since open
	old, err := b.SwapAuditWriter(f)
	a.f = f
	a.mu.Unlock()
	if err != nil {
		log.Error().Err(err).Msg("SIGHUP: writing the audit lines waiting for the old file")
	}
	if c, ok := old.(io.Closer); ok {
		_ = c.Close()
	}
	log.Info().Str("audit_path", a.path).Msg("SIGHUP: reopened the audit trail")
}

func (a *auditFile) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		_ = a.f.Close()
	}
}

// progressLines returns a Progress hook that writes one short line per
// change of a server's state to w (a terminal), so an operator watching
// a slow boot (a first npx -y download) sees which server it waits for.
func progressLines(w io.Writer) func(bridge.Progress) {
	var mu sync.Mutex
	return func(p bridge.Progress) {
		line := fmt.Sprintf("capbridge: %s: %s", p.Server, p.State)
		switch p.State {
		case bridge.StateReady:
			line += fmt.Sprintf(", %d tools", p.Tools)
		case bridge.StateBackoff:
			line += fmt.Sprintf(" (%s), next attempt in %s", inert.Line(p.Reason), p.Backoff)
		case bridge.StateFailed, bridge.StateDead, bridge.StateNeedsLogin:
			line += ": " + inert.Line(p.Reason)
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, line)
	}
}

// loadServeConfig reads the config file and the editor config, or, when
// neither is given, returns the defaults with the built-in demo server,
// and resolves their secret references (config.ResolveSecrets). The
// editor config's warnings (servers it skipped) are returned for the log.
func loadServeConfig(cfgPath, mcpConfig string, opts config.EditorOptions) (cfg *config.Config, demo bool, warnings config.ErrorList, err error) {
	cfg, demo, warnings, err = loadConfigFiles(cfgPath, mcpConfig, opts)
	if err != nil {
		return nil, false, nil, err
	}
	if err := config.ResolveSecrets(cfg, systemSecrets()); err != nil {
		return nil, false, nil, err
	}
	return cfg, demo, warnings, nil
}

// loadConfigFiles is loadServeConfig without resolving the secret
// references: doctor reports them one by one.
func loadConfigFiles(cfgPath, mcpConfig string, opts config.EditorOptions) (cfg *config.Config, demo bool, warnings config.ErrorList, err error) {
	cfg = config.Defaults()
	if cfgPath != "" {
		data, err := readTrusted(cfgPath, "config file")
		if err != nil {
			return nil, false, nil, err
		}
		if cfg, err = config.Load(cfgPath, data); err != nil {
			return nil, false, nil, err
		}
	}
	if mcpConfig != "" {
		data, err := readTrusted(mcpConfig, "MCP config")
		if err != nil {
			return nil, false, nil, err
		}
		if opts.Workspace == "" {
			// Editors expand ${workspaceFolder} to the project the file
			// belongs to, which is where such files live.
			if opts.Workspace, err = filepath.Abs(filepath.Dir(mcpConfig)); err != nil {
				return nil, false, nil, fmt.Errorf("capbridge serve: %v; give --workspace DIR", err)
			}
		}
		var servers []config.Server
		servers, warnings, err = config.LoadEditor(mcpConfig, data, opts)
		if err != nil {
			return nil, false, nil, err
		}
		if err := config.Merge(cfg, servers); err != nil {
			return nil, false, nil, err
		}
	}
	if cfgPath == "" && mcpConfig == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, false, nil, fmt.Errorf("capbridge serve: cannot find this executable to run the demo server: %v", err)
		}
		s := config.NewServer(demoserver.Name, exe)
		s.Args = []string{"demo-server"}
		s.File = "(built in)"
		cfg.Servers = []config.Server{s}
		demo = true
	}
	return cfg, demo, warnings, nil
}

// readBounded reads a config file: a regular file (a FIFO or a device
// named by mistake is refused, not waited on), bounded.
func readBounded(path string) ([]byte, error) { return readConfig(path, "") }

// readTrusted is readBounded for a config serve runs (and a reload or
// --watch reads again): it names the commands capbridge runs, so it is
// refused when anyone but capbridge's user or root could have written it
// or its directory (trustedFile); what names it in that refusal.
func readTrusted(path, what string) ([]byte, error) { return readConfig(path, what) }

// readConfig reads the config file at path, held to trustedFile unless
// what is "".
func readConfig(path, what string) ([]byte, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, fmt.Errorf("capbridge: %v; check the path", err)
	}
	defer f.Close()
	if what != "" {
		if err := trustedFile(f, path, what, "decides which commands capbridge runs"); err != nil {
			return nil, fmt.Errorf("capbridge: %w", err)
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("%s: larger than %d bytes; is it really a config file?", path, maxConfigFile)
	}
	return data, nil
}

// newLogger writes human-readable lines to a terminal and JSON lines
// otherwise (log_format "auto"), at the configured level.
// newLogger returns the logger writing to w, and whether it writes the
// console format rather than JSON lines.
func newLogger(w io.Writer, format, level string) (zerolog.Logger, bool) {
	return newLoggerTTY(w, isTerminal(w), format, level)
}

// newLoggerTTY is newLogger for a writer that is not itself the terminal
// (a SecretWriter over it): tty says whether what it writes to is one.
func newLoggerTTY(w io.Writer, tty bool, format, level string) (zerolog.Logger, bool) {
	console := format == "console" || (format == "auto" && tty)
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), console
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}

// runDemoServer serves the built-in demo MCP server on stdio: what serve
// spawns, as a child of this same binary, when it has no config.
func runDemoServer(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("demo-server", "capbridge demo-server", "Serve the built-in demo MCP server on stdin and stdout.")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "takes no arguments")
	}
	if err := demoserver.Serve(os.Stdin, stdout, time.Now); err != nil {
		fmt.Fprintln(stderr, "capbridge demo-server:", err)
		return exitError
	}
	return exitOK
}
