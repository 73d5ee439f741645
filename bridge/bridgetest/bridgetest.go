// Package bridgetest runs a real capbridge bridge for tests, as
// net/http/httptest runs an HTTP server: booted, listening on Unix sockets
// in a fresh directory, and shut down when the test ends, with every
// server's retirement confirmed.
//
// A Server is the bridge of the package bridge with a test's conveniences
// around it: Grant, Dial, Control. Its servers are real processes; a test
// that needs one with chosen behaviour configures a stdio command with
// [Stdio].
package bridgetest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
)

// Backstop bounds every wait a Server makes on an event that should
// happen (a boot, a dial, the shutdown's end): it fires only when what is
// under test is broken, so a slow machine makes waits longer, never
// failures.
const Backstop = time.Minute

// Server is a bridge serving on Unix sockets in a directory of its own.
//
// Close (called at the test's cleanup, or earlier by the test) closes
// every client Dial and Control returned, then shuts the bridge down; a
// test that checks for leaks in a deferred call defers Close after it.
//
// Concurrency: Grant, Dial and Control may be called from any goroutine;
// Start and Close from the test's.
type Server struct {
	*bridge.Bridge
	// Config is what the bridge runs with: the defaults, the sockets in
	// Dir, a 2 s shutdown grace, then what the Options changed.
	Config *config.Config
	// Dir holds the call and control sockets. Its path is short, as a
	// socket path must fit in 108 bytes.
	Dir string
	// Outcomes is what Boot reported of each server's first attempt,
	// once started.
	Outcomes []bridge.Outcome

	tb         testing.TB
	o          bridge.Options
	allowFails bool
	served     chan struct{}
	started    bool
	closed     bool

	mu      sync.Mutex
	clients []io.Closer // what Dial and Control returned, for Close
}

// Option configures a Server before it starts.
type Option func(*Server)

// WithServers adds the MCP servers the bridge owns.
func WithServers(servers ...config.Server) Option {
	return func(s *Server) { s.Config.Servers = append(s.Config.Servers, servers...) }
}

// WithConfig lets f change the configuration (bounds, timeouts, policy)
// after the defaults and the sockets are set.
func WithConfig(f func(*config.Config)) Option { return func(s *Server) { f(s.Config) } }

// WithOptions lets f set what bridge.New takes beside the configuration:
// logs, the audit writer, a progress hook, a lock.
func WithOptions(f func(*bridge.Options)) Option { return func(s *Server) { f(&s.o) } }

// AllowFailedBoot lets a server fail its first boot without failing the
// test: for tests of what a failure looks like.
func AllowFailedBoot() Option { return func(s *Server) { s.allowFails = true } }

// NewServer starts a bridge: New, Boot (each server's first attempt, the
// test failing if one is not ready unless AllowFailedBoot), Listen and
// Serve. It is shut down at the test's cleanup if Close was not called.
func NewServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := NewUnstartedServer(tb, opts...)
	s.Start()
	return s
}

// NewUnstartedServer prepares a bridge (bridge.New) without booting its
// servers or opening its sockets: Start does both.
func NewUnstartedServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	removeStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Defaults()
	cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
	cfg.Bridge.ShutdownGrace = 2 * time.Second
	s := &Server{Config: cfg, Dir: dir, tb: tb, served: make(chan struct{}),
		o: bridge.Options{Log: zerolog.Nop(), Audit: zerolog.Nop()}}
	for _, opt := range opts {
		opt(s)
	}
	s.o.Config = cfg
	s.Bridge = bridge.New(s.o)
	tb.Cleanup(s.Close)
	return s
}

// Start boots the servers, opens the sockets and serves, as NewServer
// does. It fails the test on an error.
func (s *Server) Start() {
	s.tb.Helper()
	if s.started {
		s.tb.Fatal("bridgetest: Start called twice")
	}
	s.started = true
	ctx, cancel := context.WithTimeout(context.Background(), Backstop)
	defer cancel()
	s.Outcomes = s.Boot(ctx)
	for _, o := range s.Outcomes {
		if o.State != bridge.StateReady && !s.allowFails {
			s.Close()
			s.tb.Fatalf("bridgetest: server %s did not boot: %s: %s", o.Name, o.State, o.Reason)
		}
	}
	if err := s.Listen(); err != nil {
		s.Close()
		s.tb.Fatal(err)
	}
	go func() { s.Serve(); close(s.served) }()
}

// Close closes the clients Dial and Control returned, then shuts the
// bridge down once, with the configured grace period, and fails the test
// if a server's retirement was not confirmed.
func (s *Server) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	if err := s.Shutdown(s.Config.Bridge.ShutdownGrace); err != nil {
		s.tb.Errorf("bridgetest: shutdown: %v", err)
	}
	if s.started {
		<-s.served
	}
}

// dirPrefix begins the name of a Server's directory, which goes on with
// the pid of the process that made it.
const dirPrefix = "cbt-"

// removeStaleDirs removes the directories of processes that are gone. A
// process stopped without running its cleanups (the fuzzing engine stops
// its workers so) would otherwise leave one behind each time.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*-*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), dirPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// Grant issues a grant reaching servers (each with its tools, nil for
// all) for an hour, and returns its token.
func (s *Server) Grant(servers map[string][]string) string {
	s.tb.Helper()
	_, token, err := s.Bridge.Grant(bridge.GrantSpec{Servers: servers, TTL: time.Hour})
	if err != nil {
		s.tb.Fatal(err)
	}
	return token
}

// Dial connects a capwire client to the call socket with token, as a
// façade does; Close closes it.
func (s *Server) Dial(token string) *capwire.Client {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Backstop)
	defer cancel()
	c, err := capwire.Dial(ctx, s.CallSocket(), token)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.track(c)
	return c
}

// Control connects to the control socket, as a harness does; Close
// closes it.
func (s *Server) Control() *control.Client {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Backstop)
	defer cancel()
	c, err := control.Dial(ctx, s.ControlSocket())
	if err != nil {
		s.tb.Fatal(err)
	}
	s.track(c)
	return c
}

func (s *Server) track(c io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients = append(s.clients, c)
}

// Stdio configures server name as the command argv with exactly env
// ("KEY=VALUE") as its environment, which is how a test names a server
// program it builds or a test binary that doubles as one.
func Stdio(name string, argv, env []string) config.Server {
	srv := config.NewServer(name, argv[0])
	srv.Args = argv[1:]
	srv.Env = make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		srv.Env[k] = v
	}
	srv.StartupTimeout = Backstop
	return srv
}
