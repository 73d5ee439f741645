package mcpwire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/internal/bound"
)

// Defaults for Command's bounds (see docs/mcpwire.md for the table).
const (
	defaultStderrTailBytes = 8 << 10
	// The shutdown rungs sum to 5 s, the sweep adds at most 1 s + KillGrace:
	// with the bridge's 3 s for calls in flight, a clean stop fits in
	// docker stop's 10 s (docs/architecture.md, Retirement).
	defaultStdinGrace = 2 * time.Second
	defaultTermGrace  = 2 * time.Second
	defaultKillGrace  = time.Second
	defaultSweepGrace = time.Second
	defaultExitDrain  = time.Second
	// stderrLogLine caps one logged stderr line; longer lines are
	// logged truncated (the ring keeps the bytes regardless).
	stderrLogLine = 1 << 10
)

// errNoCgroups starts every error of OpenCgroups. It is not exported:
// every error OpenCgroups returns would match it, so it names no case a
// caller could branch on.
var errNoCgroups = errors.New("mcpwire: no writable cgroup v2")

// Command describes a server to spawn. There is no shell: Argv[0] is an
// executable (looked up in the child's PATH when it has no slash) and
// the rest are its arguments, verbatim.
type Command struct {
	Argv []string
	// Env holds explicit KEY=VALUE pairs for the child; they win over
	// inherited ones.
	Env []string
	// Inherit names the variables copied from our environment. nil means
	// bound.InheritEnv(); an empty non-nil slice inherits nothing.
	Inherit []string
	// Dir is the child's working directory ("" = ours).
	Dir string
	// Logger receives the server's stderr lines and lifecycle events;
	// nil logs nothing.
	Logger *zerolog.Logger

	StderrTailBytes int // ring of stderr kept for errors (default 8 KiB)
	// CutLine, if set, rewrites a stderr line cut short to the logged
	// length before it is logged: the cut may have left the start of a
	// secret at its end, which only the caller can recognise.
	CutLine    func(line string) string
	StdinGrace time.Duration // wait after closing stdin (default 2 s)
	TermGrace  time.Duration // wait after SIGTERM (default 2 s)
	KillGrace  time.Duration // wait after SIGKILL, in the ladder and in the sweep (default 1 s)
	// SweepDescendants makes Shutdown, once the leader has exited and its
	// process group has been killed, also end every process the server
	// started that is still alive: those that left the group with
	// setpgid(2) or setsid(2) (Playwright's browsers do) and those
	// started under them. The server's environment carries
	// MCPWIRE_CUSTODY=<random token> to mark them, and a process that
	// dropped it is still found through its parent. Each gets SIGTERM,
	// SweepGrace, then SIGKILL and KillGrace; those that are our children
	// (see Subreap) are reaped. Survivors make Shutdown return
	// ErrUnconfirmed. Processes are held by pidfds throughout, so a
	// recycled pid is never signalled.
	SweepDescendants bool
	SweepGrace       time.Duration // wait after the sweep's SIGTERM (default 1 s)
	// Cgroups, when set, runs the server in a cgroup of its own under
	// it (see OpenCgroups), which Shutdown kills whole with cgroup.kill
	// once the leader is gone and removes. If the cgroup cannot be
	// created or entered, the server starts without one (logged as a
	// warning): custody then rests on the process group and the sweep.
	Cgroups *Cgroups
	// ExitDrain bounds how long, after the process is reaped, stdout and
	// stderr may stay open (a grandchild that escaped the process group
	// could hold them) before they are closed on our side (default 1 s).
	ExitDrain time.Duration
}

func (c *Command) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.StdinGrace, defaultStdinGrace)
	def(&c.TermGrace, defaultTermGrace)
	def(&c.KillGrace, defaultKillGrace)
	def(&c.SweepGrace, defaultSweepGrace)
	def(&c.ExitDrain, defaultExitDrain)
	if c.StderrTailBytes <= 0 {
		c.StderrTailBytes = defaultStderrTailBytes
	}
	if c.Inherit == nil {
		c.Inherit = bound.InheritEnv()
	}
}

// childEnv builds the child's environment: the allowlisted inherited
// variables, then the explicit pairs (later wins in os/exec's dedup).
func (c *Command) childEnv() []string {
	env := make([]string, 0, len(c.Inherit)+len(c.Env))
	for _, k := range c.Inherit {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, c.Env...)
}

// lookPath resolves name against the child's PATH (not ours: the
// operator's env for this server decides which npx runs).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("mcpwire: %q not found in the server's PATH", name)
}
