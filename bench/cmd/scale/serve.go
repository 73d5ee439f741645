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

	"github.com/capbridge/capbridge/bench/procstat"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// bridge is one `capbridge serve` process with n rawecho servers, s0 …
// s<n-1>, and every setting the config does not name at its default.
type bridge struct {
	cmd     *exec.Cmd
	dir     string
	call    string // the call socket
	control string
	booted  time.Duration // from start to the ready line
	readyAt time.Time     // when the ready line was read
	drained chan struct{}
}

// serveTimeout bounds a boot, and every control request.
const serveTimeout = 2 * time.Minute

// startBridge writes a config serving n rawecho servers (serverExtra is
// added to each server's table as is) and starts serve, returning once
// its ready line says every server is ready.
func startBridge(ctx context.Context, bin, tmp string, n int, serverExtra string) (*bridge, error) {
	argv, env := rawecho.Command()
	cmds := make([]serverCmd, n)
	for i := range cmds {
		cmds[i] = serverCmd{argv, env}
	}
	return startBridgeOf(ctx, bin, tmp, serverExtra, cmds)
}

// A serverCmd is how one server is started.
type serverCmd struct{ argv, env []string }

// startBridgeOf is startBridge with server s<i> started as cmds[i].
func startBridgeOf(ctx context.Context, bin, tmp string, serverExtra string, cmds []serverCmd) (*bridge, error) {
	dir, err := os.MkdirTemp(tmp, "cb")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[bridge]\ncall_socket = %s\ncontrol_socket = %s\n\n", strconv.Quote(filepath.Join(dir, "call.sock")), strconv.Quote(filepath.Join(dir, "control.sock")))
	for i, c := range cmds {
		argv, env := c.argv, c.env
		fmt.Fprintf(&b, "[mcp.s%d]\ncommand = %s\nargs = [", i, strconv.Quote(argv[0]))
		for j, a := range argv[1:] {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(a))
		}
		b.WriteString("]\nenv = {")
		for j, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s = %s", k, strconv.Quote(v))
		}
		b.WriteString(" }\n")
		b.WriteString(serverExtra)
	}
	cfg := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "-c", cfg)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	br := &bridge{cmd: cmd, dir: dir, drained: make(chan struct{})}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		defer close(br.drained)
		r := bufio.NewReader(io.LimitReader(stdout, 1<<20))
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r)
	}()
	var ready struct {
		Ready         bool              `json:"ready"`
		CallSocket    string            `json:"call_socket"`
		ControlSocket string            `json:"control_socket"`
		Servers       map[string]string `json:"servers"`
	}
	t := time.NewTimer(serveTimeout)
	defer t.Stop()
	select {
	case line := <-lines:
		br.readyAt = time.Now()
		br.booted = br.readyAt.Sub(start)
		if err := json.Unmarshal([]byte(line), &ready); err != nil || !ready.Ready {
			return nil, errors.Join(fmt.Errorf("serve printed %q instead of its ready line", line), br.stop())
		}
	case <-t.C:
		return nil, errors.Join(fmt.Errorf("serve was not ready within %v", serveTimeout), br.stop())
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), br.stop())
	}
	for name, st := range ready.Servers {
		if st != "ready" {
			return nil, errors.Join(fmt.Errorf("server %s is %s", name, st), br.stop())
		}
	}
	br.call, br.control = ready.CallSocket, ready.ControlSocket
	return br, nil
}

// grant issues a grant reaching every server named.
func (b *bridge) grant(ctx context.Context, servers ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, serveTimeout)
	defer cancel()
	cc, err := control.Dial(ctx, b.control)
	if err != nil {
		return "", err
	}
	defer cc.Close()
	m := map[string][]string{}
	for _, s := range servers {
		m[s] = nil
	}
	g, err := cc.Grant(ctx, &control.GrantRequest{Servers: m, TTLMS: new(uint64(time.Hour / time.Millisecond))})
	if err != nil {
		return "", err
	}
	return g.Token, nil
}

// status is serve's status.
func (b *bridge) status(ctx context.Context) (*control.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, serveTimeout)
	defer cancel()
	cc, err := control.Dial(ctx, b.control)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	return cc.Status(ctx)
}

// dial opens n connections, a new grant for every perGrant of them (the
// default max_conns_per_grant is 16: many programs, each with its own).
func (b *bridge) dial(ctx context.Context, n, perGrant int, servers ...string) ([]*capwire.Client, error) {
	i := 0
	var token string
	return dialN(ctx, b.call, n, func() (string, error) {
		var err error
		if i%perGrant == 0 {
			token, err = b.grant(ctx, servers...)
		}
		i++
		return token, err
	})
}

// dialN opens n connections to sock, each with the token next gives.
func dialN(ctx context.Context, sock string, n int, next func() (string, error)) ([]*capwire.Client, error) {
	var cs []*capwire.Client
	for i := range n {
		token, err := next()
		if err != nil {
			closeAll(cs)
			return nil, err
		}
		c, err := capwire.Dial(ctx, sock, token)
		if err != nil {
			closeAll(cs)
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeAll(cs []*capwire.Client) {
	for _, c := range cs {
		c.Close()
	}
}

// stop sends SIGTERM and waits for serve, which must exit 0.
func (b *bridge) stop() error {
	defer os.RemoveAll(b.dir)
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	done := make(chan error, 1)
	go func() { <-b.drained; done <- b.cmd.Wait() }()
	return reap(b.cmd.Process, done, "serve after SIGTERM")
}

// reap waits for done, the end of p's Wait, for serveTimeout; then it
// kills p and waits on. what names the process and what was asked of it.
func reap(p *os.Process, done <-chan error, what string) error {
	t := time.NewTimer(serveTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	case <-t.C:
		_ = p.Kill()
		<-done
		return fmt.Errorf("%s: no exit within %v; killed", what, serveTimeout)
	}
}

// echo makes one echo call on c to server and checks the answer.
func echo(ctx context.Context, c *capwire.Client, server, text string) error {
	r, err := c.Call(ctx, server, "echo", map[string]any{"text": text})
	if err != nil {
		return err
	}
	if r.IsError || len(r.Content) != 1 || r.Content[0].Text != text {
		return fmt.Errorf("echo answered %+v", r)
	}
	return nil
}

// procStatus reads VmRSS (bytes), Threads and open descriptors of pid.
func procStatus(pid int) (rss int64, threads, fds int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "Threads":
			threads = int(n)
		}
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return rss, threads, len(ents), err
}

// cpuOf is pid's CPU: the sum of its threads' se.sum_exec_runtime
// (/proc/PID/task/*/sched, nanosecond accounting, in ms) where the kernel
// shows it, else user+system from /proc/PID/stat in 10 ms ticks, which a
// server's boot of a few milliseconds does not reach.
func cpuOf(pid int) (time.Duration, error) {
	base := "/proc/" + strconv.Itoa(pid)
	if tasks, _ := filepath.Glob(base + "/task/*/sched"); len(tasks) > 0 {
		var sum float64
		found := false
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // the thread exited meanwhile
			}
			for line := range strings.SplitSeq(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "se.sum_exec_runtime"); ok {
					f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimLeft(v, " :")), 64)
					if err == nil {
						sum, found = sum+f, true
					}
				}
			}
		}
		if found {
			return time.Duration(sum * float64(time.Millisecond)), nil
		}
	}
	b, err := os.ReadFile(base + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// serverPID is the pid of the bridge's server named name.
func (b *bridge) serverPID(ctx context.Context, name string) (int, error) {
	st, err := b.status(ctx)
	if err != nil {
		return 0, err
	}
	for _, sv := range st.Servers {
		if sv.Name == name {
			return sv.PID, nil
		}
	}
	return 0, fmt.Errorf("serve's status has no server %s", name)
}

// countAll reads the counters of each pid; 0 is this process, whose CPU
// comes from getrusage, the others' from cpuOf: both finer than /proc's
// 10 ms ticks.
func countAll(pids [3]int) ([3]procstat.Counters, error) {
	var out [3]procstat.Counters
	for i, pid := range pids {
		if pid == 0 {
			c, err := procstat.Self()
			if err != nil {
				return out, err
			}
			out[i] = c
			continue
		}
		c, err := procstat.Of(pid, false)
		if err != nil {
			return out, err
		}
		if c.CPU, err = cpuOf(pid); err != nil {
			return out, err
		}
		out[i] = c
	}
	return out, nil
}
