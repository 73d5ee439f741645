package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
)

// capbridgePeer is the whole jail boundary: the capwire Go client a façade
// uses, the call socket, a `capbridge serve` process running from a config
// file that leaves every limit at its default, and the rawecho server it
// runs as its stdio child.
type capbridgePeer struct {
	cmd     *exec.Cmd
	dir     string
	c       *capwire.Client
	drained chan struct{} // closed when serve's stdout reaches EOF
	server  int           // pid of serve's child, or of the remote server
	remote  bool          // the server is remote: not serve's to stop
}

// readyTimeout bounds how long serve may take to boot and print its ready
// line, and the grant that follows.
const readyTimeout = time.Minute

// tomlQuote quotes s as a TOML basic string. Go's quoting agrees with
// TOML's for everything but control characters (Go writes \x..), which
// writeConfig refuses beforehand.
func tomlQuote(s string) string { return strconv.Quote(s) }

// writeConfig writes a capbridge.toml serving the raw server as "t".
// Nothing beyond the sockets and the server's command is set: the
// defaults (max_inflight, max_queue, log level, audit) are what is
// measured.
func writeConfig(path, callSock, controlSock string, e *env) error {
	for _, s := range append(append([]string{callSock, controlSock}, e.serverArgv...), e.serverEnv...) {
		if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("capbridge: %q cannot go into a TOML basic string as is", s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[bridge]\ncall_socket = %s\ncontrol_socket = %s\n\n[mcp.t]\ncommand = %s\nargs = [",
		tomlQuote(callSock), tomlQuote(controlSock), tomlQuote(e.serverArgv[0]))
	for i, a := range e.serverArgv[1:] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tomlQuote(a))
	}
	b.WriteString("]\nenv = {")
	for i, kv := range e.serverEnv {
		k, v, _ := strings.Cut(kv, "=")
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s = %s", k, tomlQuote(v))
	}
	b.WriteString(" }\n")
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// readyLine is the JSON line serve prints on stdout once its sockets are
// open; cmd/capbridge declares it in package main, so it is repeated here.
type readyLine struct {
	Ready         bool              `json:"ready"`
	CallSocket    string            `json:"call_socket"`
	ControlSocket string            `json:"control_socket"`
	Servers       map[string]string `json:"servers"`
}

func startCapbridge(ctx context.Context, e *env, _ string, _ int) (peer, error) {
	return bootCapbridge(ctx, e, func(cfgPath, call, control string) error { return writeConfig(cfgPath, call, control, e) }, 0)
}

// bootCapbridge starts serve from the config write writes and connects
// a capwire client to it. server is the pid of a server serve does not
// start (a remote one), 0 to learn serve's child from status.
func bootCapbridge(ctx context.Context, e *env, write func(cfgPath, call, control string) error, server int) (*capbridgePeer, error) {
	dir, err := os.MkdirTemp(e.tmp, "cb")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "capbridge.toml")
	if err := write(cfgPath, filepath.Join(dir, "call.sock"), filepath.Join(dir, "control.sock")); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	args := []string{"serve", "-c", cfgPath}
	if e.profile != "" {
		args = append(args, "--cpu-profile", e.profile+".cpu.pprof", "--alloc-profile", e.profile+".allocs.pprof")
	}
	cmd := exec.Command(e.capbridge, args...)
	cmd.Stderr = logf // the JSON log and audit trail, one line per call: part of the cost
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &capbridgePeer{cmd: cmd, dir: dir, drained: make(chan struct{}), server: server, remote: server != 0}
	lines := make(chan string, 1)
	go func() {
		defer close(p.drained)
		br := bufio.NewReader(io.LimitReader(stdout, 1<<20))
		line, _ := br.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, br)
	}()
	fail := func(err error) (*capbridgePeer, error) {
		if p.c != nil {
			p.c.Close()
		}
		if serr := p.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		tail := p.logTail()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("capbridge: %w%s", err, tail)
	}
	bootCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var ready readyLine
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), &ready); err != nil || !ready.Ready {
			return fail(fmt.Errorf("serve printed %q instead of its ready line", line))
		}
	case <-bootCtx.Done():
		return fail(fmt.Errorf("serve was not ready within %v", readyTimeout))
	}
	if ready.Servers["t"] != "ready" {
		return fail(fmt.Errorf("server t did not boot: %v", ready.Servers))
	}
	token, pid, err := grant(bootCtx, ready.ControlSocket, p.remote)
	if err != nil {
		return fail(err)
	}
	if !p.remote {
		p.server = pid
	}
	if p.c, err = capwire.Dial(bootCtx, ready.CallSocket, token); err != nil {
		return fail(err)
	}
	return p, nil
}

// grant asks the control socket for a grant reaching server t, as
// `capbridge grant --servers t` does, and for the status that names t's
// pid, as `capbridge status` does.
func grant(ctx context.Context, controlPath string, remote bool) (token string, pid int, err error) {
	cc, err := control.Dial(ctx, controlPath)
	if err != nil {
		return "", 0, err
	}
	defer cc.Close()
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}, TTLMS: new(uint64(time.Hour / time.Millisecond))})
	if err != nil {
		return "", 0, fmt.Errorf("grant: %w", err)
	}
	st, err := cc.Status(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("status: %w", err)
	}
	for _, s := range st.Servers {
		if s.Name == "t" && (s.PID > 0 || remote && s.State == "ready") {
			return g.Token, s.PID, nil
		}
	}
	return "", 0, fmt.Errorf("status names no pid for server t: %+v", st.Servers)
}

func (p *capbridgePeer) call(ctx context.Context, text string) (string, error) {
	r, err := p.c.Call(ctx, "t", "echo", map[string]any{"text": text})
	if err != nil {
		return "", err
	}
	if r.IsError || len(r.Content) != 1 || r.Content[0].Type != capwire.BlockText || r.Truncated {
		return "", fmt.Errorf("capbridge: unexpected result %+v", r)
	}
	return r.Content[0].Text, nil
}

func (p *capbridgePeer) procs() []proc {
	return []proc{{"bridge", p.cmd.Process.Pid}, {"server", p.server}}
}

// close ends the connection, then stops serve with SIGTERM. serve must
// exit 0 (it confirmed every server exited) and its server must be gone.
func (p *capbridgePeer) close() error {
	p.c.Close()
	err := p.stop()
	if err == nil && !p.remote && p.server != 0 && alive(p.server) {
		err = fmt.Errorf("capbridge: server %d outlived serve", p.server)
	}
	if err != nil {
		err = fmt.Errorf("%w%s", err, p.logTail())
	}
	os.RemoveAll(p.dir)
	return err
}

// stop sends SIGTERM and waits for serve; anything but exit status 0 is an
// error.
func (p *capbridgePeer) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.drained:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
	}
	if err := waitProc(p.cmd); err != nil {
		return fmt.Errorf("capbridge serve after SIGTERM: %w", err)
	}
	return nil
}

// logTail returns the end of serve's log, for error messages.
func (p *capbridgePeer) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, "serve.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\nserve's log ends:\n" + string(b)
}
