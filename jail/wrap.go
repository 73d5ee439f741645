package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Wrapped mode: the program runs under an operator's own jail (Config.Wrap)
// rather than the built-in one. The program's files are written below a
// fresh host directory, its transforms applied there by Config.Transformer,
// and each argument of Wrap may name them:
//
//	{files}          the host directory holding the files at their jail paths ({files}/work/main.py)
//	{bind:TARGET}    the host source of the Program's bind at TARGET ({bind:/run/capbridge/call.sock})
//	{tmp_size}       Config.TmpSize in bytes
//
// The program's argv follows Wrap's last argument, and its environment is
// the wrapper's. The wrapper must provide what the built-in jail does
// (namespaces, no network, read-only binds, /tmp); the wall clock, the
// output bounds and the result channel (file descriptor 4) are still
// capbridge's. The run ends with the wrapper: its process group, and the
// run's cgroup when there is one, are killed then, and what else still
// holds the program's output is given wrapDrainGrace before its pipes
// are closed under it. Without a cgroup, a process that left the
// wrapper's process group (setsid) outlives the run unless the wrapper
// ends it (bubblewrap's --die-with-parent and PID namespace do).
// bubblewrap, for one:
//
//	wrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
//	        "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
//	        "--ro-bind", "{files}/work", "/work", "--ro-bind", "{files}/capbridge", "/capbridge",
//	        "--ro-bind-try", "{files}/node_modules", "/node_modules",
//	        "--ro-bind", "{bind:/run/capbridge/call.sock}", "/run/capbridge/call.sock",
//	        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--"]
func (c *Config) runWrapped(ctx context.Context, p *Program) (*Outcome, error) {
	if len(p.Overlays) > 0 {
		return nil, fmt.Errorf("%w: the program needs an overlay (%s), which only the built-in jail makes", ErrSetup, p.Overlays[0].Target)
	}
	dir, err := os.MkdirTemp("", "capbridge-run-")
	if err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, f := range p.Files {
		host := filepath.Join(dir, filepath.Clean(f.Path))
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
		if err := os.WriteFile(host, f.Data, os.FileMode(mode&0o777)); err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
	}
	for _, t := range p.Transform {
		src, err := os.ReadFile(filepath.Join(dir, filepath.Clean(t.From)))
		if err == nil && c.Transformer == nil {
			err = errors.New("no transformer is configured")
		}
		var out []byte
		if err == nil {
			out, err = c.Transformer(filepath.Base(t.From), src)
		}
		if err != nil {
			// The program's own mistake: reported as a compiler would.
			return &Outcome{Ended: EndedExit, ExitCode: 1, Stderr: []byte(err.Error() + "\n"), StderrBytes: int64(len(err.Error()) + 1)}, nil
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Clean(t.To)), out, 0o644); err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
	}
	argv := make([]string, 0, len(c.Wrap)+len(p.Argv))
	for _, a := range c.Wrap {
		a = strings.ReplaceAll(a, "{files}", dir)
		a = strings.ReplaceAll(a, "{tmp_size}", fmt.Sprint(orDefault(c.TmpSize, DefaultTmpSize)))
		for _, b := range p.Binds {
			a = strings.ReplaceAll(a, "{bind:"+b.Target+"}", b.Source)
		}
		argv = append(argv, a)
	}
	argv = append(argv, p.Argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = p.Env
	cmd.Dir = dir
	cmd.SysProcAttr = wrapAttr()
	cgStarted, cgDone, cgKill, err := c.intoCgroup(cmd.SysProcAttr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	defer cgDone()
	return supervise(ctx, cmd, p, cgStarted, func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cgKill()
	})
}

// wrapDrainGrace is how long a wrapped run's output is still read once
// the wrapper has exited: what it wrote is in the pipes already, and
// whatever else still holds them is not the run's.
const wrapDrainGrace = time.Second

// supervise starts cmd with the program's streams and result channel,
// enforces the wall clock and the output bound with kill, and collects
// the outcome. started is called once cmd has been started (or failed
// to).
func supervise(ctx context.Context, cmd *exec.Cmd, p *Program, started, killFn func()) (*Outcome, error) {
	// Each file is closed on the way out from the moment it is made: a
	// failure at the second pipe (descriptors running out) leaks nothing.
	var opened []*os.File
	defer func() {
		for _, f := range opened {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			opened = append(opened, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	resR, resW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	// fd 3 is left empty (/dev/null) so the result channel is fd 4, as in
	// the built-in jail.
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	opened = append(opened, null)
	cmd.ExtraFiles = []*os.File{null, resW}
	start := time.Now()
	err = cmd.Start()
	started()
	if err != nil {
		return nil, fmt.Errorf("%w: starting %s: %v", ErrSetup, cmd.Path, err)
	}
	outW.Close()
	errW.Close()
	resW.Close()
	if p.Started != nil {
		p.Started()
	}
	var (
		mu     sync.Mutex
		killed bool
		ended  Ended
	)
	kill := func(why Ended) {
		mu.Lock()
		defer mu.Unlock()
		if !killed {
			killed, ended = true, why
			killFn()
		}
	}
	timer := time.AfterFunc(p.WallClock, func() { kill(EndedWallClock) })
	defer timer.Stop()
	defer context.AfterFunc(ctx, func() { kill(EndedCancelled) })()
	total := &outputBudget{limit: orDefault(p.MaxOutput, DefaultMaxOutput), over: func() { kill(EndedOutput) }}
	stdout := &headBuffer{max: orDefault(p.MaxStdout, DefaultMaxStdout)}
	stderr := &tailBuffer{max: orDefault(p.MaxStderr, DefaultMaxStderr)}
	var wg sync.WaitGroup
	wg.Go(func() { drain(outR, stdout, total) })
	wg.Go(func() { drain(errR, stderr, total) })
	res := &headBuffer{max: MaxResult}
	wg.Go(func() { drain(resR, res, &outputBudget{limit: 1 << 62}) })
	_ = cmd.Wait()
	// The wrapper has exited; anything it left holding our pipes goes with
	// its process group and the run's cgroup. What escaped both (a daemon
	// in a session of its own, with no cgroup to find it by) is not waited
	// for: the pipes' read ends are closed under it after a grace, which
	// ends the reads.
	killFn()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	grace := time.NewTimer(wrapDrainGrace)
	select {
	case <-drained:
		grace.Stop()
	case <-grace.C:
		for _, f := range []*os.File{outR, errR, resR} {
			f.Close()
		}
		<-drained
	}
	out := &Outcome{Ended: EndedExit, Took: time.Since(start),
		Stdout: stdout.buf, StdoutBytes: stdout.n, Stderr: stderr.buf, StderrBytes: stderr.n,
		Result: res.buf, ResultTruncated: res.n > MaxResult, ExitCode: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.Signal = ws.Signal().String()
	}
	mu.Lock()
	if killed {
		out.Ended = ended
	}
	mu.Unlock()
	return out, nil
}
