package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/regular"
)

// defaultLockFile is where lock writes and skew and serve read when
// neither the command line nor the config names a lock.
const defaultLockFile = "capbridge.lock"

// surfaceFlags are the flags lock and skew share: which servers to boot,
// or which running capbridge to ask.
type surfaceFlags struct {
	config, mcpConfig, workspace string
	strict                       bool
	running                      bool
	control                      string
}

func addSurfaceFlags(fs *cmdFlags) *surfaceFlags {
	sf := &surfaceFlags{}
	fs.StringVar(&sf.config, "c", "", "capbridge.toml whose servers to boot (default: none, which boots the built-in demo server)")
	fs.StringVar(&sf.mcpConfig, "mcp-config", "", "an editor's MCP config whose stdio servers to boot")
	fs.StringVar(&sf.workspace, "workspace", "", "what ${workspaceFolder} expands to in --mcp-config (default: that file's directory)")
	fs.BoolVar(&sf.strict, "strict", false, "make warnings errors, as serve --strict does: a tools.allow, tools.deny, destructive or restrict entry that names no tool fails that server")
	fs.BoolVar(&sf.running, "running", false, "read the surface from the running capbridge (its control socket: --control, else -c's control_socket, else $"+envControl+", else serve's default) instead of starting the servers again")
	fs.StringVar(&sf.control, "control", "", "with --running: the control socket of the running capbridge")
	return sf
}

// surface is the live surface: read from the running capbridge
// (--running), else from servers booted for the purpose.
func (sf *surfaceFlags) surface(cfg *config.Config, log zerolog.Logger) (*lock.File, map[string]error, map[string]map[string]string, error) {
	if !sf.running {
		return bootSurface(cfg, log)
	}
	cf := &clientFlags{control: sf.control, config: sf.config, timeout: 60 * time.Second}
	got, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Surface, error) { return c.Surface(ctx) })
	if err != nil {
		return nil, nil, nil, err
	}
	lf, err := lock.Decode([]byte(got.Lock))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the running capbridge's surface: %w", err)
	}
	var down map[string]error
	for name, why := range got.Down {
		if down == nil {
			down = map[string]error{}
		}
		down[name] = errors.New(why)
	}
	return lf, down, got.Dropped, nil
}

// load reads the config the flags name.
// misused names a flag given that means nothing without another, for a
// usage error; "" when there is none.
func (sf *surfaceFlags) misused() string {
	if sf.control != "" && !sf.running {
		return "--control names the running capbridge to ask: use it with --running"
	}
	return ""
}

func (sf *surfaceFlags) load() (*config.Config, error) {
	cfg, _, _, err := loadServeConfig(sf.config, sf.mcpConfig, config.EditorOptions{Workspace: sf.workspace, Strict: sf.strict})
	if err != nil {
		return nil, err
	}
	for i := range cfg.Servers {
		cfg.Servers[i].Strict = sf.strict
	}
	return cfg, nil
}

// lockPath is the lock file to use: the flag, else the config's lock,
// else capbridge.lock in the working directory.
func lockPath(flagValue string, cfg *config.Config) string {
	return cmp.Or(flagValue, cfg.Bridge.Lock, defaultLockFile)
}

// bootSurface boots every configured server, as serve would but without
// sockets or a lock, lists their tools and shuts them down: the live
// surface, the servers that did not boot with why, and the tools each
// server's client dropped from its listing with why (Bridge.Dropped).
// Warnings (an allow or deny entry that names no tool) go to log.
func bootSurface(cfg *config.Config, log zerolog.Logger) (*lock.File, map[string]error, map[string]map[string]string, error) {
	b := bridge.New(bridge.Options{Config: cfg, Log: log, Audit: zerolog.Nop(), ClientVersion: version(), TokenDir: tokenDir()})
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	b.Boot(ctx)
	interrupted := ctx.Err() != nil
	servers, down := b.Surface()
	dropped := b.Dropped()
	shutErr := b.Shutdown(0)
	if interrupted {
		return nil, nil, nil, errors.New("interrupted while the servers booted")
	}
	if shutErr != nil {
		log.Warn().Err(shutErr).Msg("could not confirm every server's exit")
	}
	return lock.New(servers), down, dropped, nil
}

// surfaceLog is the log lock and skew give the servers' boot: warnings
// and errors only, on stderr, in serve's format, with what the config's
// secret references resolved to replaced, as serve's are (a server that
// fails to boot prints its stderr into them).
func surfaceLog(stderr io.Writer, cfg *config.Config) zerolog.Logger {
	log, _ := newLogger(bridge.NewSecretWriter(stderr, cfg), cfg.Bridge.LogFormat, "warn")
	return log
}

func runLock(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("lock", "capbridge lock [-c capbridge.toml | --mcp-config EDITOR-CONFIG] [--running] [--out capbridge.lock] [--strict]", `
Approve the tool surface: boot the configured servers (as serve does, with no
sockets), or with --running ask the capbridge serving them, list their tools,
apply tools.allow and tools.deny, and write the lock: per server its
serverInfo and revision, per tool the full descriptor (name, title,
description, input and output schemas, annotations, icons, execution, _meta)
with a SHA-256 digest of each part and of the whole. The file is canonical JSON:
locking unchanged servers again writes the same bytes. serve --lock (or
[bridge] lock) then serves only the locked tools, and withholds any that
change; capbridge skew shows what moved. The format is in docs/lock.md.
Nothing is written unless every server boots: a server left out of the lock
would serve no tools.
Exit status: 0 written, 1 a server did not boot or the file could not be
written, 2 bad command line, 4 configuration error.`)
	sf := addSurfaceFlags(fs)
	out := fs.String("out", "", "where to write the lock (default: the config's [bridge] lock, else "+defaultLockFile+")")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; lock takes only flags", pos[0])
	}
	if msg := sf.misused(); msg != "" {
		return fs.usageError(stderr, "%s", msg)
	}
	cfg, err := sf.load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitSurfaceConfig
	}
	live, down, _, err := sf.surface(cfg, surfaceLog(stderr, cfg))
	if err != nil {
		fmt.Fprintln(stderr, "capbridge lock:", err)
		return exitError
	}
	if len(down) > 0 {
		for _, name := range slices.Sorted(maps.Keys(down)) {
			fmt.Fprintf(stderr, "capbridge lock: server %s did not boot: %s\n", name, inert.Line(fmt.Sprint(down[name])))
		}
		fmt.Fprintln(stderr, "capbridge lock: nothing written; fix the servers (capbridge doctor) and lock again")
		return exitError
	}
	path := lockPath(*out, cfg)
	if err := writeFileAtomic(path, live.Encode(), 0o644); err != nil {
		fmt.Fprintf(stderr, "capbridge lock: writing %s: %v\n", path, err)
		return exitError
	}
	tools := 0
	for _, name := range slices.Sorted(maps.Keys(live.Servers)) {
		s := live.Servers[name]
		tools += len(s.Tools)
		fmt.Fprintf(stdout, "%s: %d tools, revision %s (%s)\n", name, len(s.Tools), lock.Short(s.Revision), inert.Line(strings.Join(slices.Sorted(maps.Keys(s.Tools)), ", ")))
	}
	fmt.Fprintf(stdout, "locked %s, %s in %s (digest %s)\n", plural(len(live.Servers), "server"), plural(tools, "tool"), path, lock.Short(live.Digest))
	return exitOK
}

// readLock reads and decodes a lock file, once it has checked who may
// have written it (trustedFile). It opens without waiting (regular.Open):
// a reload reads the lock while it holds the bridge's reload lock, so a
// FIFO planted at the path (in a sticky directory others may write)
// would otherwise hold that reload, every later one and the shutdown
// for ever.
func readLock(path string) (*lock.File, error) {
	f, err := regular.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no lock file; write one with capbridge lock", path)
		}
		return nil, fmt.Errorf("lock file: %w", err)
	}
	defer f.Close()
	if err := trustedFile(f, path, "lock file", "decides which tools are served"); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, lock.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	lf, err := lock.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lf, nil
}

// checkLockedGuards checks every restrict guard against the input schema
// the lock approved for its tool: a guard that names no argument is a
// configuration error before anything starts.
func checkLockedGuards(cfg *config.Config, lf *lock.File) config.ErrorList {
	var errs config.ErrorList
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		entry := lf.Servers[s.Name]
		if entry == nil {
			continue
		}
		errs = append(errs, s.CheckGuards(func(tool string) ([]byte, bool) {
			if t := entry.Tools[tool]; t != nil {
				return t.InputSchema, true
			}
			return nil, false
		})...)
	}
	return errs
}

// serveLock reads the lock serve holds the servers to (--lock, else
// [bridge] lock; none when neither names one) and checks the config's
// guards against it.
func serveLock(cfg *config.Config, flagValue string, log zerolog.Logger) (*lock.File, error) {
	if flagValue != "" {
		cfg.Bridge.Lock = flagValue
	}
	if cfg.Bridge.Lock == "" {
		return nil, nil
	}
	lf, err := readLock(cfg.Bridge.Lock)
	if err != nil {
		return nil, err
	}
	if errs := checkLockedGuards(cfg, lf); len(errs) > 0 {
		return nil, errs
	}
	for _, s := range cfg.Servers {
		if lf.Servers[s.Name] == nil {
			log.Warn().Str("server", s.Name).Str("lock", cfg.Bridge.Lock).Msg("the lock has no entry for this server: it will serve no tools; run capbridge lock")
		}
	}
	log.Info().Str("lock", cfg.Bridge.Lock).Str("lock_mode", cfg.Bridge.LockMode).Str("digest", lock.Short(lf.Digest)).Msg("holding the servers to the lock")
	return lf, nil
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// trustedFile checks who may have written the open file f (at path), a
// what whose writer has power (what it lets its writer do): a lock
// decides which tools are served, and its digests detect damage, not
// forgery (whoever can write the file can compute them); a config names
// the commands capbridge runs. So it must belong to capbridge's user or
// root and be writable by no one else, and so must its directory, whose
// writers can replace it: the group's write bit is allowed only for
// capbridge's own group (a user-private group, as many systems give each
// user), and a directory writable by everyone only when it is sticky, as
// /tmp is.
func trustedFile(f *os.File, path, what, power string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := writableByOthers(fi, path, what, power); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return err
	}
	return writableByOthers(di, dir, "the "+what+"'s directory", power)
}

// writableByOthers says how someone other than capbridge's user (or
// root) could write fi, or nil.
func writableByOthers(fi os.FileInfo, path, what, power string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s %s: cannot read its owner", what, path)
	}
	mode := fi.Mode()
	sticky := fi.IsDir() && mode&os.ModeSticky != 0
	switch {
	case int(st.Uid) != os.Geteuid() && st.Uid != 0:
		return fmt.Errorf("%s %s belongs to uid %d, not to capbridge's user (uid %d) or root: its owner %s; chown it", what, path, st.Uid, os.Geteuid(), power)
	case mode.Perm()&0o002 != 0 && !sticky:
		return fmt.Errorf("%s %s is writable by every user (mode %04o): any of them %s; chmod o-w %s", what, path, mode.Perm(), power, path)
	case mode.Perm()&0o020 != 0 && int(st.Gid) != os.Getegid() && !sticky:
		return fmt.Errorf("%s %s is writable by group %d (mode %04o), not capbridge's own: any of its members %s; chmod g-w %s", what, path, st.Gid, mode.Perm(), power, path)
	}
	return nil
}
