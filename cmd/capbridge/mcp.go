package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/codemode"
	"github.com/capbridge/capbridge/internal/mcpserver"
	"github.com/capbridge/capbridge/jail"
)

func runMCP(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("mcp", "capbridge mcp [-c capbridge.toml | --mcp-config EDITOR-CONFIG | --attach CONTROL] [flags]", `
Serve MCP on stdin and stdout for an MCP host (Claude Code, Claude Desktop,
VS Code, Cursor, any agent): code mode over every configured server. Its
tools are search and describe (over the servers' tools) and run, which runs
a TypeScript, Python (or, with --languages, Go) program in a jail with the servers' façades
importable, under a grant for that run alone. The run tool's description
carries the servers' typed surface.

It boots its own bridge from the usual configuration (or an editor's, as
serve does), on sockets of its own, or attaches to a running serve through
its control socket (--attach), so one bridge serves a harness and a host.
With --listen it serves Streamable HTTP at http://ADDR/mcp instead (both
eras: sessions for 2025-03-26..2025-11-25 clients, stateless 2026-07-28);
on the loopback it refuses other Host and Origin names (DNS rebinding),
and off it a bearer token (--token-file) is required.

Logs go to stderr. Add it to Claude Code with:
  claude mcp add capbridge -- capbridge mcp --mcp-config ~/.cursor/mcp.json`)
	ff := addFrontFlags(fs)
	budget := fs.Int("description-budget", codemode.DefaultDescriptionBudget, "bytes of the run tool's description that may carry the servers' surfaces")
	listen := fs.String("listen", "", "serve Streamable HTTP on this address (host:port; 127.0.0.1:0 picks a port) at /mcp, instead of stdio")
	tokenFile := fs.String("token-file", "", "a file holding the bearer token HTTP clients must send (required off the loopback; default $CAPBRIDGE_MCP_TOKEN)")
	origins := fs.String("allow-origin", "", "comma-separated Origin values (https://app.example) allowed besides the loopback's")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q", pos[0])
	}
	var web *httpFront
	if *listen != "" {
		var err error
		if web, err = newHTTPFront(*listen, *tokenFile, *origins); err != nil {
			fmt.Fprintln(stderr, "capbridge mcp:", err)
			return exitConfig
		}
		defer web.ln.Close()
		ff.reserve = maxFrontConns
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	f, code := ff.start(ctx, stderr)
	if f == nil {
		return code
	}
	defer f.close()
	tools, err := f.runner.Tools(ctx, *budget)
	if err != nil {
		f.log.Error().Err(err).Msg("cannot describe the tools")
		return exitError
	}
	srv := &mcpserver.Server{Name: "capbridge", Version: version(), Tools: tools,
		Instructions: "Code mode over MCP servers: write a program that calls their tools as typed functions and run it with the run tool; search and describe show what it can call."}
	if web != nil {
		return web.serve(ctx, srv, f.log)
	}
	f.log.Info().Strs("languages", f.runner.Languages()).Msg("serving MCP on stdio")
	if err := srv.Serve(ctx, os.Stdin, stdout); err != nil {
		f.log.Error().Err(err).Msg("the MCP session ended")
		return exitError
	}
	return exitOK
}

// frontFlags are what mcp and run share: where the bridge comes from, and
// how programs run.
type frontFlags struct {
	cfgPath, mcpConfig, workspace, attach string
	strict, allowDestructive              bool
	servers, languages                    string
	tsClient, pyClient, node, python, gob string
	timeout, maxTimeout                   time.Duration
	wrap                                  string
	warm                                  int
	// reserve is the descriptors the front's own listener may hold
	// beside the bridge's budgets (the HTTP front's connections).
	reserve int
}

func addFrontFlags(fs *cmdFlags) *frontFlags {
	f := &frontFlags{}
	fs.StringVar(&f.cfgPath, "c", "", "capbridge.toml whose servers to serve (default: none, which serves the built-in demo server)")
	fs.StringVar(&f.mcpConfig, "mcp-config", "", "an editor's MCP config whose stdio servers to serve (as serve takes it)")
	fs.StringVar(&f.workspace, "workspace", "", "what ${workspaceFolder} expands to in --mcp-config")
	fs.BoolVar(&f.strict, "strict", false, "make warnings errors, as serve --strict does: a tools.allow, tools.deny, destructive or restrict entry that names no tool fails that server (without --attach)")
	fs.StringVar(&f.attach, "attach", "", "use the running capbridge serve whose control socket this is, instead of booting a bridge")
	fs.StringVar(&f.servers, "servers", "", "comma-separated servers a program may reach (default: all)")
	fs.BoolVar(&f.allowDestructive, "allow-destructive", false, "let programs call destructive tools (the config's destructive lists, and tools their servers mark destructiveHint: true); refused by default")
	fs.StringVar(&f.languages, "languages", "", "comma-separated languages offered (typescript, python, go), the first being the surface's (default: typescript,python, those that can run here; go's first start compiles its build cache)")
	fs.StringVar(&f.tsClient, "ts-client", os.Getenv("CAPBRIDGE_TS_CLIENT"), "a checkout's TypeScript client (capwire/ts) to use instead of the one built in, for developing it (default $CAPBRIDGE_TS_CLIENT)")
	fs.StringVar(&f.pyClient, "py-client", os.Getenv("CAPBRIDGE_PY_CLIENT"), "a checkout's Python client (capwire/python) to use instead of the one built in, for developing it (default $CAPBRIDGE_PY_CLIENT)")
	fs.StringVar(&f.node, "node", "", "the node binary (default: node on PATH)")
	fs.StringVar(&f.python, "python", "", "the python3 binary (default: /usr/bin/python3, else python3 on PATH)")
	fs.StringVar(&f.gob, "go", "", "the go binary, for --languages …,go (default: go on PATH)")
	fs.DurationVar(&f.timeout, "timeout", codemode.DefaultTimeout, "a run's default wall clock")
	fs.DurationVar(&f.maxTimeout, "max-timeout", codemode.MaxTimeout, "the longest wall clock a run may ask for")
	fs.StringVar(&f.wrap, "wrap", "", "run programs under this jail command instead of the built-in jail (space-separated; see docs/jail.md)")
	fs.IntVar(&f.warm, "warm", 1, "prestarted jails kept ready per language (typescript, python), each for one run; 0 runs every program cold")
	return f
}

// front is a running code-mode front: its bridge (unless attached) and
// its runner.
type front struct {
	log    zerolog.Logger
	runner *codemode.Runner
	b      *bridge.Bridge
	served chan struct{}
	dir    string
	grace  time.Duration
}

func (f *front) close() {
	if f.runner != nil {
		f.runner.Close()
	}
	if f.b != nil {
		if err := f.b.Shutdown(f.grace); err != nil {
			f.log.Error().Err(err).Msg("shutdown could not confirm every server's exit")
		}
		<-f.served
		os.RemoveAll(f.dir)
	}
}

// start boots (or attaches to) the bridge and prepares the runner. It
// returns nil and the exit status on failure, which it has logged.
func (ff *frontFlags) start(ctx context.Context, stderr io.Writer) (*front, int) {
	log := zerolog.New(stderr).With().Timestamp().Logger()
	f := &front{log: log}
	jc := &jail.Config{}
	if ff.wrap != "" {
		jc.Wrap = strings.Fields(ff.wrap)
		jc.Transformer = codemode.StripTypes
	}
	control := ff.attach
	if control == "" {
		cfg, demo, warnings, err := loadServeConfig(ff.cfgPath, ff.mcpConfig, config.EditorOptions{Workspace: ff.workspace, Strict: ff.strict})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return nil, exitConfig
		}
		// From here on the log holds what the servers print and what
		// errors quote: it goes through the config's secrets, as serve's
		// does (an MCP host keeps this stderr in its own log files).
		log = zerolog.New(bridge.NewSecretWriter(stderr, cfg)).With().Timestamp().Logger()
		f.log = log
		for _, w := range warnings {
			log.Warn().Str("file", w.File).Int("line", w.Line).Str("key", w.Key).Str("fix", w.Fix).Msg(w.Msg)
		}
		for i := range cfg.Servers {
			cfg.Servers[i].Strict = ff.strict
		}
		// Sockets of its own, so it never meets a serve on the configured
		// paths, in a directory made here under a name nobody can guess
		// (another user who took a name known in advance, uid and pid,
		// kept mcp from starting). Under root the jail runs as another
		// uid (jail.Config.UID), which must be able to connect: Listen
		// lets it search the directory.
		dir, err := os.MkdirTemp("", "capbridge-mcp-"+strconv.Itoa(os.Getuid())+"-")
		if err != nil {
			log.Error().Err(err).Msg("cannot make the sockets' directory")
			return nil, exitBoot
		}
		cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
		cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
		if os.Getuid() == 0 {
			cfg.Bridge.CallSocketMode = 0o666
			cfg.Bridge.AllowedUIDs = []uint32{0, 65534}
		}
		if demo {
			log.Info().Msg("no config given: serving the built-in demo server")
		}
		f.b = bridge.New(bridge.Options{Config: cfg, Log: log, Audit: log.With().Str("log", "audit").Logger(), ClientVersion: version()})
		f.dir, f.grace = dir, cfg.Bridge.ShutdownGrace
		if err := f.b.ReserveDescriptors(ff.reserve); err != nil {
			log.Warn().Err(err).Msg("not enough file descriptors for every budget")
		}
		if err := f.b.Listen(); err != nil {
			log.Error().Err(err).Msg("cannot open the sockets")
			_ = f.b.Shutdown(0)
			os.RemoveAll(dir)
			return nil, exitBoot
		}
		f.served = make(chan struct{})
		go func() { f.b.Serve(); close(f.served) }()
		for _, o := range f.b.Boot(ctx) {
			if o.State != bridge.StateReady {
				log.Error().Str("server", o.Name).Stringer("state", o.State).Str("reason", o.Reason).Str("stderr_tail", o.StderrTail).Msg("server did not boot")
			}
		}
		control = cfg.Bridge.ControlSocket
	}
	cfg := codemode.Config{Control: control, Jail: jc, Node: ff.node, Python: ff.python, Go: ff.gob,
		TSClient: ff.tsClient, PyClient: ff.pyClient, Warm: ff.warm, AllowDestructive: ff.allowDestructive,
		DefaultTimeout: ff.timeout, MaxTimeout: ff.maxTimeout}
	if ff.servers != "" {
		cfg.Servers = strings.Split(ff.servers, ",")
	}
	if ff.languages != "" {
		cfg.Languages = strings.Split(ff.languages, ",")
	}
	r, err := codemode.New(cfg)
	if err != nil {
		log.Error().Err(err).Msg("cannot run programs")
		f.close()
		return nil, exitConfig
	}
	f.runner = r
	if err := r.Prewarm(ctx); err != nil {
		log.Warn().Err(err).Msg("no warm jails: every run starts cold")
	}
	if st := r.CgroupStatus(); st.Available {
		log.Info().Str("cgroup", st.Dir).Msg("each run gets a cgroup v2 of its own: memory, pids and cpu limits")
	} else {
		log.Warn().Str("reason", st.Reason).Msg("runs get no cgroup v2 limits")
	}
	return f, exitOK
}
