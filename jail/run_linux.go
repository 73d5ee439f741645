package jail

import (
	"bufio"
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
	j, err := c.startInit(c.spec(p))
	if err != nil {
		return nil, err
	}
	defer j.closeAll()
	// All of it: init reads the spec to its end.
	j.specW.Close()
	return j.supervise(ctx, p, false)
}

// started is a jail's init, started, with the ends of its pipes that are
// ours.
type started struct {
	cmd     *exec.Cmd
	specW   *os.File // the spec and, for a warm jail, the delivery after it
	status  *bufio.Reader
	statR   *os.File
	outR    *os.File
	errR    *os.File
	resR    *os.File
	closers []*os.File
	cgDone  func()
}

func (j *started) closeAll() {
	for _, f := range j.closers {
		f.Close()
	}
	j.cgDone()
}

// startInit starts a jail's init with sp, writes the spec and returns,
// the spec pipe still open.
func (c *Config) startInit(sp *spec) (*started, error) {
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
	uid, gid := c.RunIDs()
	j := &started{cgDone: func() {}}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			j.closers = append(j.closers, r, w)
		}
		return r, w, err
	}
	specR, specW, err1 := pipe()
	resR, resW, err2 := pipe()
	statR, statW, err3 := pipe()
	outR, outW, err4 := pipe()
	errR, errW, err5 := pipe()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		j.closeAll()
		return nil, fmt.Errorf("jail: %w", err)
	}
	j.specW, j.statR, j.outR, j.errR, j.resR = specW, statR, outR, errR, resR
	j.status = bufio.NewReaderSize(io.LimitReader(statR, maxStatus), 512)

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
		// A session and process group of its own: left in capbridge's,
		// the program could signal them all with kill(0, sig), the
		// bridge and other jails' programs included, since a process
		// group is not bounded by the PID namespace.
		Setsid: true,
	}
	// Killing init kills the namespace; the cgroup's kill is not needed.
	cgStarted, cgDone, _, err := c.intoCgroup(cmd.SysProcAttr)
	if err != nil {
		j.closeAll()
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	// Removed once the program, and so its namespace, is gone.
	j.cgDone = cgDone
	err = cmd.Start()
	cgStarted()
	if err != nil {
		j.closeAll()
		return nil, fmt.Errorf("%w: starting the jail's init: %v (are unprivileged user namespaces enabled? see docs/jail.md)", ErrSetup, err)
	}
	j.cmd = cmd
	// The child holds its ends now; ours must go, or no reader sees EOF.
	for _, f := range []*os.File{specR, resW, statW, outW, errW} {
		f.Close()
	}
	if _, err := specW.Write(payload); err != nil {
		// Init died before reading its spec; what it said is on status.
		_ = cmd.Process.Kill()
		msg, _ := io.ReadAll(j.status)
		_ = cmd.Wait()
		j.closeAll()
		return nil, fmt.Errorf("%w: sending the spec: %v %s", ErrSetup, err, strings.TrimSpace(string(msg)))
	}
	return j, nil
}

// supervise runs the started jail to its end under p's wall clock and
// output bounds and ctx. A warm jail's status ends with how its program
// ended; a cold one's is empty unless its setup failed.
func (j *started) supervise(ctx context.Context, p *Program, warm bool) (*Outcome, error) {
	cmd := j.cmd
	if p.Started != nil {
		p.Started()
	}
	start := time.Now()
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
	maxOut := p.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	total := &outputBudget{limit: maxOut, over: func() { kill(EndedOutput) }}
	stdout := &headBuffer{max: orDefault(p.MaxStdout, DefaultMaxStdout)}
	stderr := &tailBuffer{max: orDefault(p.MaxStderr, DefaultMaxStderr)}
	wg.Go(func() { drain(j.outR, stdout, total) })
	wg.Go(func() { drain(j.errR, stderr, total) })
	var result []byte
	var resultTrunc bool
	wg.Go(func() {
		result, _ = io.ReadAll(io.LimitReader(j.resR, MaxResult+1))
		if len(result) > MaxResult {
			result, resultTrunc = result[:MaxResult], true
		}
		_, _ = io.Copy(io.Discard, j.resR)
	})
	status, _ := io.ReadAll(j.status)
	_, _ = io.Copy(io.Discard, j.statR)

	waitErr := cmd.Wait()
	out.Took = time.Since(start)
	wg.Wait()
	mu.Lock()
	if killed {
		out.Ended = ended
	}
	mu.Unlock()
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
	if warm && !killed {
		// Init outlived the program to report how it ended.
		rest, started := strings.CutPrefix(string(status), statusStarted)
		var n int
		switch line := strings.TrimSpace(rest); {
		case scanf(line, "exit %d", &n):
			out.ExitCode, out.Signal = n, ""
		case scanf(line, "signal %d", &n):
			out.ExitCode, out.Signal = -1, syscall.Signal(n).String()
		case started:
			// Init ended first: the kernel killed the program with the
			// namespace. It had its environment, its token, so it may
			// have acted: the run failed, its setup did not, and an
			// ErrSetup would have it run again.
			why := cmd.ProcessState.String()
			if line != "" {
				why += ": " + line
			}
			out.ExitCode, out.Signal = -1, syscall.SIGKILL.String()
			out.Stderr = append(out.Stderr, "\n[capbridge: the jail's init ended before the program ("+why+")]\n"...)
		default:
			return nil, fmt.Errorf("%w: %s", ErrSetup, line)
		}
		return out, nil
	}
	if len(status) > 0 && !killed {
		return nil, fmt.Errorf("%w: %s", ErrSetup, strings.TrimSpace(string(status)))
	}
	return out, nil
}

// scanf reports whether s is exactly format with one integer filled in.
func scanf(s, format string, n *int) bool {
	var rest string
	k, _ := fmt.Sscanf(s+" .", format+" %s", n, &rest)
	return k == 2 && rest == "."
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

// prestartWait bounds how long a warm jail may take to get ready.
const prestartWait = 2 * time.Minute

// Prestart builds a jail for p and starts its runtime, which waits for
// its program: Warm.Run delivers that and runs it. p holds what every
// run of the runtime shares (Argv, Env, Dir, Binds, Overlays, and Files
// outside /work); its WallClock and output bounds are Run's. Its /work is
// a writable tmpfs of its own, where a delivery's files go. Prestart
// returns once the runtime is started (init says so), or fails.
func (c *Config) Prestart(p *Program) (*Warm, error) {
	if len(c.Wrap) > 0 {
		return nil, fmt.Errorf("%w: a warm jail is the built-in one's", ErrSetup)
	}
	if len(p.Argv) == 0 {
		return nil, errors.New("jail: a program needs an argv")
	}
	sp := c.spec(p)
	sp.Warm = true
	j, err := c.startInit(sp)
	if err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := j.status.ReadString('\n')
		ready <- line
	}()
	timer := time.NewTimer(prestartWait)
	defer timer.Stop()
	var line string
	select {
	case line = <-ready:
	case <-timer.C:
		_ = j.cmd.Process.Kill()
		line = <-ready
	}
	if line != "ready\n" {
		_ = j.cmd.Process.Kill()
		rest, _ := io.ReadAll(j.status)
		_ = j.cmd.Wait()
		j.closeAll()
		return nil, fmt.Errorf("%w: %s", ErrSetup, strings.TrimSpace(line+string(rest)))
	}
	return &Warm{j: j}, nil
}

// Warm is a prestarted jail: its runtime waits for a program. It runs one
// program, once (Run), or is closed unused (Close); a jail is never
// reused. Run and Close may be called concurrently; Close after Run waits
// for it.
type Warm struct {
	j    *started
	mu   sync.Mutex
	used bool
}

// Run delivers p to the warm jail and runs it to its end, as Config.Run
// does: p's Files (under /work) and Transform, its Env (which the runtime
// is handed on its file descriptor 3, a JSON array of "KEY=value", to
// set), its WallClock, output bounds and Started. Its Argv, Dir, Binds and
// Overlays were Prestart's and must be empty. An error matching ErrSetup
// means the program never got its environment, so never ran; once it
// has, every end of the run, the jail's init dying first included, is an
// Outcome.
func (w *Warm) Run(ctx context.Context, p *Program) (*Outcome, error) {
	w.mu.Lock()
	if w.used {
		w.mu.Unlock()
		return nil, errors.New("jail: a warm jail runs one program")
	}
	w.used = true
	w.mu.Unlock()
	j := w.j
	defer j.closeAll()
	switch {
	case p.WallClock <= 0:
		_ = j.cmd.Process.Kill()
		_ = j.cmd.Wait()
		return nil, errors.New("jail: a program needs a wall clock")
	case len(p.Argv) > 0 || p.Dir != "" || len(p.Binds) > 0 || len(p.Overlays) > 0:
		_ = j.cmd.Process.Kill()
		_ = j.cmd.Wait()
		return nil, errors.New("jail: a warm jail's argv, directory, binds and overlays are its prestart's")
	}
	d, err := json.Marshal(&delivery{Files: p.Files, Transform: p.Transform, Env: p.Env})
	if err == nil && len(d) > maxSpec {
		err = fmt.Errorf("the program's files come to %d bytes, more than %d", len(d), maxSpec)
	}
	if err == nil {
		_, err = j.specW.Write(d)
	}
	j.specW.Close()
	if err != nil {
		_ = j.cmd.Process.Kill()
		_ = j.cmd.Wait()
		return nil, fmt.Errorf("%w: delivering the program: %v", ErrSetup, err)
	}
	return j.supervise(ctx, p, true)
}

// Close ends a warm jail that was never run; after Run it does nothing.
func (w *Warm) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.used {
		return
	}
	w.used = true
	_ = w.j.cmd.Process.Kill()
	_ = w.j.cmd.Wait()
	w.j.closeAll()
}
