package mcpwire

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/internal/framewrite"
)

// spawner runs every fork on one goroutine locked to its OS thread for
// the life of the process. Pdeathsig fires when the *thread* that forked
// the child exits, not the process (see prctl(2) PR_SET_PDEATHSIG and
// golang/go#27505); an ordinary goroutine forks on whatever thread it
// happens to run on, and the runtime may retire that thread later, which
// would SIGKILL a healthy server. A locked goroutine that never returns
// keeps its thread forever, so the signal fires only when we die. It is
// started at package init so it predates every leak-check snapshot.
var spawnc = make(chan spawnReq)

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread must outlive every child
		for r := range spawnc {
			// Recorded before the orphan reaper can look again: a leader
			// that dies at once is still ours to wait for, not an orphan.
			orphanMu.Lock()
			err := r.cmd.Start()
			if err == nil {
				leaders[r.cmd.Process.Pid] = true
			}
			orphanMu.Unlock()
			r.errc <- err
		}
	}()
}

// spawn starts the server described by cmd in its own process group,
// with SIGKILL as its parent-death signal, its stdin and stdout as
// pipes to us and its stderr drained into a bounded ring and the log.
func spawn(cmd Command) (Conn, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return nil, errInvalid("empty argv")
	}
	cmd.defaults()
	env := cmd.childEnv()
	token := ""
	var since uint64
	if cmd.SweepDescendants {
		token = newCustodyToken()
		env = append(env, custodyEnv+"="+token)
		// Before the fork: the leader and all it starts begin later.
		since = bootTicks()
	}
	path, err := lookPath(cmd.Argv[0], env)
	if err != nil {
		return nil, err
	}
	log := zerolog.Nop()
	if cmd.Logger != nil {
		log = *cmd.Logger
	}

	// Our own pipes, handed to the child as *os.File: os/exec then
	// starts no copying goroutines, so Wait can never be held up by a
	// grandchild that inherited a pipe (the hang WaitDelay exists for,
	// golang/go#50436, cannot arise), and we decide when our ends close.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("mcpwire: pipes: %w", err)
	}
	pidfd := -1
	start := func(cgroupFD int) (*exec.Cmd, error) {
		ec := &exec.Cmd{
			Path: path, Args: cmd.Argv, Env: env, Dir: cmd.Dir,
			Stdin: inR, Stdout: outW, Stderr: errW,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
				// clone3(CLONE_INTO_CGROUP): the child is in its cgroup
				// from its first instruction, before it can fork.
				UseCgroupFD: cgroupFD >= 0, CgroupFD: cgroupFD, PidFD: &pidfd},
		}
		req := spawnReq{cmd: ec, errc: make(chan error, 1)}
		spawnc <- req
		return ec, <-req.errc
	}
	cg, ec, err := "", (*exec.Cmd)(nil), error(nil)
	if cmd.Cgroups != nil {
		cg, ec, err = startInCgroup(cmd.Cgroups, start)
		if err != nil {
			log.Warn().Err(err).Msg("mcpwire: cannot run the server in a cgroup of its own; starting it without one")
		}
	}
	if ec == nil {
		if ec, err = start(-1); err != nil {
			closeAll()
			return nil, fmt.Errorf("mcpwire: start %s: %w", cmd.Argv[0], err)
		}
	}
	inR.Close()
	outW.Close()
	errW.Close()

	c := &childConn{
		cmd: cmd, ec: ec, pid: ec.Process.Pid, pidfd: pidfd, log: log, token: token, since: since, cgroup: cg,
		stdin: inW, stdout: outR, stderr: errR,
		rd: framewrite.RawReader(outR), wr: framewrite.RawWriter(inW),
		tail: newRing(cmd.StderrTailBytes), done: make(chan struct{}),
		drained: make(chan struct{}), eof: make(chan struct{}), exited: make(chan struct{}),
	}
	log.Info().Int("pid", c.pid).Str("path", path).Msg("mcpwire: server started")
	go c.drainStderr()
	go c.wait()
	return c, nil
}

// childConn is the child-process Conn.
type childConn struct {
	cmd Command
	ec  *exec.Cmd
	pid int
	// pidfd refers to the leader (-1: the kernel gave none); leaderExited
	// waits on it and closes it.
	pidfd int
	log   zerolog.Logger
	// token marks the server's processes for the sweep ("" = no sweep);
	// since is a starttime no later than the leader's (bootTicks before
	// its fork), before which none of them began.
	token string
	since uint64
	// cgroup is the server's own cgroup directory ("" = none).
	cgroup string

	stdin, stdout, stderr *os.File
	// rd and wr read stdout and write stdin: on the raw path when the
	// pipes are pollable (see framewrite.RawReader).
	rd   io.Reader
	wr   io.Writer
	tail *ring

	// mu orders signals against reaping: a signal to the group is sent
	// only while the leader is unreaped, so its pid (= the pgid) cannot
	// have been recycled.
	mu      sync.Mutex
	reaped  bool
	reason  error
	exited  chan struct{} // closed once reaped (reason set)
	done    chan struct{} // closed once reaped and stderr drained
	drained chan struct{} // closed when the stderr drainer ends
	eof     chan struct{} // closed when Read first sees the end of stdout
	eofOnce sync.Once

	shutOnce sync.Once
	exit     Exit
	exitErr  error
}

func (c *childConn) Read(p []byte) (int, error) {
	n, err := c.rd.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.eofOnce.Do(func() { close(c.eof) })
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF // our side closed it: the stream has ended
		}
	}
	return n, err
}

func (c *childConn) Write(p []byte) (int, error)        { return c.wr.Write(p) }
func (c *childConn) SetWriteDeadline(t time.Time) error { return c.stdin.SetWriteDeadline(t) }
func (c *childConn) SetReadDeadline(t time.Time) error  { return c.stdout.SetReadDeadline(t) }
func (c *childConn) Done() <-chan struct{}              { return c.done }
func (c *childConn) StderrTail() []byte                 { return c.tail.snapshot() }
func (c *childConn) Pid() int                           { return c.pid }
func (c *childConn) transportName() string              { return "stdio" }

func (c *childConn) EndReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// signalGroup sends sig to the server's whole process group (npx/uvx
// wrappers and what they started), unless the leader is already reaped.
func (c *childConn) signalGroup(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		_ = unix.Kill(-c.pid, sig)
	}
}

// wait observes the leader's exit without reaping it (WNOWAIT keeps the
// zombie, and with it the pgid, reserved), kills whatever is left of the
// process group — those are orphans now — then reaps. After ExitDrain it
// closes our stdout and stderr ends in case a process outside the group
// still holds the pipes.
func (c *childConn) wait() {
	c.leaderExited()
	c.mu.Lock()
	_ = unix.Kill(-c.pid, unix.SIGKILL)
	_ = c.ec.Wait() // the status is in ProcessState either way
	orphanMu.Lock()
	delete(leaders, c.pid)
	orphanMu.Unlock()
	st := c.ec.ProcessState
	c.reaped = true
	c.reason = fmt.Errorf("%w (%s)", ErrExited, st.String())
	c.mu.Unlock()
	close(c.exited)
	c.log.Info().Int("pid", c.pid).Str("status", st.String()).Msg("mcpwire: server exited")

	deadline := time.Now().Add(c.cmd.ExitDrain)
	if !waitUntil(c.drained, deadline) {
		c.stderr.Close() // unblocks the drainer
		<-c.drained
	}
	close(c.done)
	if !waitUntil(c.eof, deadline) {
		c.stdout.Close() // unblocks the client's reader with io.EOF
	}
}

// leaderExited returns once the leader has exited, leaving it unreaped.
// It waits in the runtime's poller on the leader's pidfd, which turns
// readable when the process exits, so a server costs no OS thread for
// its life: a waitid blocked in the kernel holds one, which the runtime
// must create while servers boot (and, with one P, hand the P away from
// by sysmon's retake, every time). Without a pidfd (a kernel before
// 5.3), or one the poller refuses, it blocks in waitid.
func (c *childConn) leaderExited() {
	var info unix.Siginfo
	if c.pidfd >= 0 {
		// Non-blocking before NewFile, which then hands it to the poller.
		nb := unix.SetNonblock(c.pidfd, true)
		f := os.NewFile(uintptr(c.pidfd), "pidfd")
		defer f.Close()
		if nb == nil {
			if rc, err := f.SyscallConn(); err == nil {
				polled := rc.Read(func(fd uintptr) bool {
					info = unix.Siginfo{}
					err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
					// WNOHANG with nothing to report returns 0 and an
					// empty siginfo; an error other than EINTR means
					// there is nothing to wait for, as in the loop below.
					return err != nil && err != unix.EINTR || err == nil && info.Signo != 0
				})
				if polled == nil {
					return
				}
			}
		}
	}
	for {
		err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// waitUntil waits for ch to close until deadline and reports whether it
// did.
func waitUntil(ch <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// drainStderr copies the server's stderr into the ring and the log until
// EOF or until its read end is closed. Never reading stderr is how other
// clients deadlock: a server blocks in write(2) once the pipe fills.
func (c *childConn) drainStderr() {
	defer close(c.drained)
	defer c.stderr.Close()
	buf := make([]byte, 4096)
	line := make([]byte, 0, stderrLogLine)
	truncated := false
	emit := func() {
		if len(line) > 0 || truncated {
			ev := c.log.Info().Int("pid", c.pid)
			if truncated {
				ev = ev.Bool("truncated", true)
			}
			text := strings.ToValidUTF8(string(line), string(utf8.RuneError))
			if truncated && c.cmd.CutLine != nil {
				text = c.cmd.CutLine(text)
			}
			ev.Str("stderr", text).Msg("mcpwire: server stderr")
		}
		line, truncated = line[:0], false
	}
	for {
		n, err := c.stderr.Read(buf)
		_, _ = c.tail.Write(buf[:n])
		for _, b := range buf[:n] {
			switch {
			case b == '\n':
				emit()
			case len(line) < stderrLogLine:
				line = append(line, b)
			default:
				truncated = true
			}
		}
		if err != nil {
			emit()
			return
		}
	}
}

// Shutdown runs the stdio shutdown sequence of the MCP lifecycle ("close
// the input stream, wait for the server to exit, or send SIGTERM...
// SIGKILL") with every wait bounded, signalling the whole process group.
func (c *childConn) Shutdown() (Exit, error) {
	c.shutOnce.Do(func() {
		start := time.Now()
		how := ExitHow(0)
		select {
		case <-c.exited:
			how = ExitedBefore
		default:
		}
		c.stdin.Close()
		steps := []struct {
			sig   syscall.Signal
			grace time.Duration
			how   ExitHow
		}{{0, c.cmd.StdinGrace, ExitedOnEOF}, {syscall.SIGTERM, c.cmd.TermGrace, ExitedOnSIGTERM}, {syscall.SIGKILL, c.cmd.KillGrace, ExitedOnSIGKILL}}
		for _, s := range steps {
			if how != 0 {
				break
			}
			if s.sig != 0 {
				c.log.Info().Int("pid", c.pid).Str("signal", s.sig.String()).Msg("mcpwire: signalling server process group")
				c.signalGroup(s.sig)
			}
			t := time.NewTimer(s.grace)
			select {
			case <-c.exited:
				how = s.how
			case <-t.C:
			}
			t.Stop()
		}
		if how == 0 {
			c.exitErr = fmt.Errorf("%w: pid %d still running %v after SIGKILL", ErrUnconfirmed, c.pid, c.cmd.KillGrace)
			c.log.Error().Int("pid", c.pid).Msg("mcpwire: server exit not confirmed")
			return
		}
		if c.cgroup != "" {
			// What is left in the cgroup left the process group:
			// cgroup.kill ends it all at once, escapees that cleared
			// their environment included.
			if err := killCgroupTree(c.cgroup, c.cmd.KillGrace); err != nil {
				c.exitErr = err
				c.log.Error().Err(err).Int("pid", c.pid).Msg("mcpwire: the server's cgroup could not be emptied")
			}
		}
		if c.token != "" {
			// Before waiting on the pipes: an escapee holding stdout
			// would otherwise keep them open for all of ExitDrain.
			n, err := sweep(c.token, c.since, c.cmd.SweepGrace, c.cmd.KillGrace)
			if n > 0 {
				c.log.Info().Int("pid", c.pid).Int("swept", n).Msg("mcpwire: swept the server's remaining descendants")
			}
			if err != nil {
				c.exitErr = err
				c.log.Error().Err(err).Int("pid", c.pid).Msg("mcpwire: descendants survived the sweep")
			}
		}
		<-c.done // bounded: ExitDrain after the reap
		c.stdout.Close()
		// Our side has ended the stream: wait need not hold stdout open
		// for a reader any longer. Callers read their own replies, so
		// with no call in flight nobody may be reading to see the EOF.
		c.eofOnce.Do(func() { close(c.eof) })
		st := c.ec.ProcessState
		c.exit = Exit{How: how, Status: st.String(), Code: st.ExitCode(), Took: time.Since(start)}
	})
	return c.exit, c.exitErr
}

// startInCgroup starts the server through start in a new cgroup under g.
// A failure to create or enter the cgroup returns the error with a nil
// command, for the caller to start the server without one; the
// cgroup's directory is removed then.
func startInCgroup(g *Cgroups, start func(cgroupFD int) (*exec.Cmd, error)) (string, *exec.Cmd, error) {
	dir, err := g.next()
	if err != nil {
		return "", nil, fmt.Errorf("creating its cgroup: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Rmdir(dir)
		return "", nil, fmt.Errorf("opening its cgroup: %w", err)
	}
	defer unix.Close(fd)
	ec, err := start(fd)
	if err != nil {
		_ = unix.Rmdir(dir)
		return "", nil, fmt.Errorf("starting in cgroup %s: %w", dir, err)
	}
	return dir, ec, nil
}
