package jail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runBuiltin runs p in the built-in jail.
func (c *Config) runBuiltin(ctx context.Context, p *Program) (*Outcome, error) {
	sp := c.spec(p)
	payload, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("jail: encoding the spec: %w", err)
	}
	if len(payload) > maxSpec {
		return nil, fmt.Errorf("jail: the program's files come to %d bytes, more than %d", len(payload), maxSpec)
	}
	exe := c.Exe
	if exe == "" {
		exe = "/proc/self/exe"
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = c.ids()
	}

	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	specR, specW, err1 := pipe()
	resR, resW, err2 := pipe()
	statR, statW, err3 := pipe()
	outR, outW, err4 := pipe()
	errR, errW, err5 := pipe()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		closeAll()
		return nil, fmt.Errorf("jail: %w", err)
	}
	defer closeAll()

	cmd := exec.Command(exe)
	cmd.Args = []string{"capbridge-jail"}
	cmd.Env = []string{envInit + "=1"}
	cmd.Dir = "/"
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{specR, resW, statW}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		// Become the namespace's root, which is the mapped host id:
		// creating a namespace changes no one's ids, and root's own
		// (unmapped in it) would leave init without capabilities there.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		// The jail dies with whoever started it.
		Pdeathsig: syscall.SIGKILL,
	}
	cgStarted, cgDone, err := c.intoCgroup(cmd.SysProcAttr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	// Removed once the program, and so its namespace, is gone.
	defer cgDone()
	start := time.Now()
	err = cmd.Start()
	cgStarted()
	if err != nil {
		return nil, fmt.Errorf("%w: starting the jail's init: %v (are unprivileged user namespaces enabled? see docs/jail.md)", ErrSetup, err)
	}
	// The child holds its ends now; ours must go, or no reader sees EOF.
	for _, f := range []*os.File{specR, resW, statW, outW, errW} {
		f.Close()
	}
	if p.Started != nil {
		p.Started()
	}

	out := &Outcome{Ended: EndedExit}
	var (
		mu     sync.Mutex
		ended  Ended
		killed bool
	)
	kill := func(why Ended) {
		mu.Lock()
		defer mu.Unlock()
		if killed {
			return
		}
		killed, ended = true, why
		// The init of the PID namespace: the kernel ends every process in
		// the namespace with it.
		_ = cmd.Process.Kill()
	}
	timer := time.AfterFunc(p.WallClock, func() { kill(EndedWallClock) })
	defer timer.Stop()
	stopCtx := context.AfterFunc(ctx, func() { kill(EndedCancelled) })
	defer stopCtx()

	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = specW.Write(payload)
		specW.Close()
	})
	maxOut := p.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	total := &outputBudget{limit: maxOut, over: func() { kill(EndedOutput) }}
	stdout := &headBuffer{max: orDefault(p.MaxStdout, DefaultMaxStdout)}
	stderr := &tailBuffer{max: orDefault(p.MaxStderr, DefaultMaxStderr)}
	wg.Go(func() { drain(outR, stdout, total) })
	wg.Go(func() { drain(errR, stderr, total) })
	var result []byte
	var resultTrunc bool
	wg.Go(func() {
		result, _ = io.ReadAll(io.LimitReader(resR, MaxResult+1))
		if len(result) > MaxResult {
			result, resultTrunc = result[:MaxResult], true
		}
		_, _ = io.Copy(io.Discard, resR)
	})
	status, _ := io.ReadAll(io.LimitReader(statR, maxStatus+1))
	_, _ = io.Copy(io.Discard, statR)

	waitErr := cmd.Wait()
	out.Took = time.Since(start)
	wg.Wait()
	mu.Lock()
	if killed {
		out.Ended = ended
	}
	mu.Unlock()
	if len(status) > 0 && !killed {
		return nil, fmt.Errorf("%w: %s", ErrSetup, strings.TrimSpace(string(status)))
	}
	out.Stdout, out.StdoutBytes = stdout.buf, stdout.n
	out.Stderr, out.StderrBytes = stderr.bytes(), stderr.n
	out.Result, out.ResultTruncated = result, resultTrunc
	out.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.Signal = ws.Signal().String()
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return nil, fmt.Errorf("jail: waiting for the program: %w", waitErr)
	}
	return out, nil
}

// spec is what init needs for p under c.
func (c *Config) spec(p *Program) *spec {
	system := c.System
	if system == nil {
		system = DefaultSystem
	}
	tmp := c.TmpSize
	if tmp <= 0 {
		tmp = DefaultTmpSize
	}
	return &spec{
		Argv: p.Argv, Env: p.Env, Dir: p.Dir, Hostname: "jail",
		System: system, Binds: p.Binds, Overlays: p.Overlays, Files: p.Files, Transform: p.Transform,
		TmpSize: tmp, Limits: c.Limits.withDefaults(), Seccomp: !c.NoSeccomp,
	}
}

// RunIDs are the host uid and gid a jail's programs run as: capbridge's
// own, or, as root, c.UID and c.GID (nobody by default).
func (c *Config) RunIDs() (uid, gid int) {
	if os.Getuid() != 0 {
		return os.Getuid(), os.Getgid()
	}
	return c.ids()
}

// ids are the host uid and gid a jail runs as when capbridge is root.
func (c *Config) ids() (int, int) {
	uid, gid := c.UID, c.GID
	if uid == 0 {
		uid = 65534
	}
	if gid == 0 {
		gid = 65534
	}
	return uid, gid
}

// wrapAttr puts a wrapper in a process group of its own, which dies with
// us.
func wrapAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
