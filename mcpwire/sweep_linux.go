package mcpwire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// custodyEnv names the variable that marks every process of one spawned
// server: the leader gets a fresh random token and its descendants
// inherit it, whatever process group or session they move to and
// whoever they are reparented to. The sweep kills what carries the
// token, plus the descendants of what carries it (which covers those
// started with a cleared environment).
const custodyEnv = "MCPWIRE_CUSTODY"

// Bounds of the sweep.
const (
	// sweepRounds bounds the re-scans after the first: each kills what
	// the marked processes forked while the previous round ran.
	sweepRounds = 4
	// maxEnviron bounds the bytes of /proc/PID/environ read per process.
	maxEnviron = 1 << 20
	// statBuf holds any /proc/PID/stat line: 52 numeric fields and a
	// command name of at most 64 bytes (TASK_COMM_LEN is 16 today).
	statBuf = 2 << 10
)

// newCustodyToken returns a fresh token for custodyEnv.
func newCustodyToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// orphanMu orders the orphan reaper against spawn:
// a child that spawn has started but not yet recorded in leaders must
// never be reaped as an orphan.
var (
	orphanMu sync.Mutex
	leaders  = map[int]bool{} // pids of live, unreaped server leaders
)

// Subreap makes the calling process a child subreaper (prctl(2)
// PR_SET_CHILD_SUBREAPER): every descendant of every spawned server,
// including one that called setsid(2), is then reparented to this
// process when its parent dies, instead of to init, so a sweep can reap
// it. It also starts a goroutine that reaps such orphans as they exit,
// which a subreaper owes: nobody else will wait for them. The setting is
// process-wide and lasts for the life of the process; call it once,
// early, and only in a process that starts no child other than through
// mcpwire (the orphan reaper treats every unknown child as an orphan).
func Subreap() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("mcpwire: becoming a child subreaper: %w", err)
	}
	go reapOrphansForever()
	return nil
}

// reapOrphansForever reaps exited orphans on every SIGCHLD. Signals
// coalesce, which is harmless: each pass reaps every orphan that has
// exited by then.
func reapOrphansForever() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGCHLD)
	for range c {
		reapOrphans()
	}
}

// reapOrphans reaps every exited child of ours that is not a live server
// leader, each with a P_PID wait on that pid alone: a leader's status
// belongs to its own wait goroutine. orphanMu keeps a leader that spawn
// has just started from looking like an orphan.
func reapOrphans() {
	self := os.Getpid()
	orphanMu.Lock()
	defer orphanMu.Unlock()
	for pid, p := range scanProcs() {
		if p.ppid != self || p.state != 'Z' || leaders[pid] {
			continue
		}
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
	}
}

// procStat is what the sweep needs from /proc/PID/stat.
type procStat struct {
	ppid  int
	state byte
	start uint64 // starttime, in clock ticks since boot: with the pid, a process's identity
}

// readStat parses /proc/PID/stat; false if the process is gone or the
// line does not parse. It is read with one open, one read and one close
// into a buffer on the stack: a sweep reads every process's, once a
// round, for every server that ends.
func readStat(pid int) (procStat, bool) {
	var buf [statBuf]byte
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, false
	}
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 || n == len(buf) {
		// A line that fills the buffer was cut: the kernel's is shorter.
		return procStat{}, false
	}
	return parseStat(buf[:n])
}

// parseStat parses a /proc/PID/stat line.
func parseStat(b []byte) (procStat, bool) {
	// The command name is parenthesised and may hold anything,
	// parentheses included: the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22
	// (starttime).
	var f [20][]byte
	k := 0
	for fld := range bytes.FieldsSeq(b[i+1:]) {
		if k == len(f) {
			break
		}
		f[k] = fld
		k++
	}
	if k < len(f) || len(f[0]) != 1 {
		return procStat{}, false
	}
	// The conversions do not escape, so they take no allocation.
	ppid, err1 := strconv.ParseUint(string(f[1]), 10, 31)
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{ppid: int(ppid), state: f[0][0], start: start}, true
}

// scanProcs reads the stat of every process in /proc. Processes that end
// during the scan are simply missing.
func scanProcs() map[int]procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	procs := make(map[int]procStat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if st, ok := readStat(pid); ok {
			procs[pid] = st
		}
	}
	return procs
}

// procScans shares /proc scans between the sweeps of servers retired
// together. A scan reads every process's stat, so a bridge stopping 64
// servers on a host of 1000 processes, one scan each, read 64 000 of
// them and took 0.9 s to stop.
var procScans = scanShare{read: scanProcs}

// scanShare runs one scan of /proc at a time and gives its result to
// every caller that asked before it began. A caller needs a scan begun
// after it asked (what it looks for was running by then), so callers
// that ask while a scan runs wait for it to end and share the next one,
// which the first of them to find the scanner free runs. So however many
// sweeps run at once, each waits for at most two scans.
//
// Concurrency: scan may be called from any goroutine; the map it
// returns is shared and must not be modified.
type scanShare struct {
	read func() map[int]procStat

	mu      sync.Mutex
	next    *sharedScan // the scan that callers asking now will share; nil until one asks
	running *sharedScan // the scan under way, or nil
}

// A sharedScan is one scan and the callers waiting for it.
type sharedScan struct {
	started bool
	done    chan struct{} // closed once procs is set
	procs   map[int]procStat
}

// scan returns a scan of /proc begun after the call.
func (s *scanShare) scan() map[int]procStat {
	s.mu.Lock()
	if s.next == nil {
		s.next = &sharedScan{done: make(chan struct{})}
	}
	r := s.next
	for {
		if r.started {
			s.mu.Unlock()
			<-r.done // bounded: one scan of /proc
			return r.procs
		}
		if s.running == nil {
			r.started, s.running, s.next = true, r, nil
			s.mu.Unlock()
			procs := s.read()
			s.mu.Lock()
			r.procs, s.running = procs, nil
			close(r.done)
			s.mu.Unlock()
			return procs
		}
		busy := s.running.done
		s.mu.Unlock()
		<-busy // bounded: one scan of /proc
		s.mu.Lock()
	}
}

// bootTicks is the time since boot in the clock ticks that
// /proc/PID/stat counts a process's start in, rounded down, so a process
// forked after the call has a starttime no lower: the kernel converts a
// task's start_boottime the same way, in the reader's time namespace as
// CLOCK_BOOTTIME is in ours. The ticks are USER_HZ, 100 on every
// architecture Go supports on Linux; where one counted faster, the bound
// would only be looser. It is 0 (no bound) if the clock cannot be read.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano()) / (1e9 / userHZ)
}

// userHZ is the kernel's USER_HZ, the unit of /proc/PID/stat's times.
const userHZ = 100

// carries reports whether the environment pid started with holds
// custodyEnv=token. An unreadable environment (another user's process,
// a zombie) does not.
func carries(pid int, token string) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxEnviron))
	if err != nil {
		return false
	}
	kv := []byte(custodyEnv + "=" + token)
	for v := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.Equal(v, kv) {
			return true
		}
	}
	return false
}

// custody finds the processes of the server marked with token: those
// that carry it and, transitively, their children. self is never
// included. since is the starttime (the fork's time) of the server's
// leader: whatever it and its descendants start is forked after it, so
// only the environments of processes forked no earlier are read, which
// on a busy machine is a small part of its process table (an
// environment's read is the costly part of the scan: each one maps
// pages of another process). A process forked before the leader that is
// told the token and execs with it is not found; it is no descendant.
func custody(token string, self int, since uint64) map[int]procStat {
	procs := procScans.scan()
	kids := make(map[int][]int, len(procs))
	found := make(map[int]procStat)
	var todo []int
	for pid, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], pid)
		if pid != self && p.state != 'Z' && p.start >= since && carries(pid, token) {
			found[pid] = p
			todo = append(todo, pid)
		}
	}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, k := range kids[pid] {
			if _, ok := found[k]; !ok && k != self {
				found[k] = procs[k]
				todo = append(todo, k)
			}
		}
	}
	return found
}

// target is one swept process, held by a pidfd so that neither a signal
// nor the wait can reach a process that reused its pid.
type target struct {
	pid, fd int
}

// sweep ends what is left of a retired server: every process marked with
// its token or descended from one (since is its leader's starttime, as
// custody takes it). Each gets SIGTERM, then up to
// termGrace to exit, then SIGKILL and up to killGrace; later rounds
// SIGKILL at once whatever the earlier ones forked meanwhile. Exited
// swept processes that are our children (orphans reparented to us as a
// subreaper) are reaped, each by a wait on its own pidfd, never on any
// other child. It returns how many processes it signalled, and an error
// naming those still alive after the last round.
func sweep(token string, since uint64, termGrace, killGrace time.Duration) (int, error) {
	self := os.Getpid()
	total := 0
	for round := range sweepRounds + 1 {
		all := open(custody(token, self, since))
		if len(all) == 0 {
			return total, nil
		}
		total += len(all)
		ts := all
		if round == 0 {
			signalAll(ts, unix.SIGTERM)
			ts = awaitExit(ts, termGrace)
		}
		signalAll(ts, unix.SIGKILL)
		left := awaitExit(ts, killGrace)
		for _, t := range all {
			var info unix.Siginfo
			// ECHILD: not our child, so its own parent (or init) reaps it.
			_ = unix.Waitid(unix.P_PIDFD, t.fd, &info, unix.WEXITED|unix.WNOHANG, nil)
			unix.Close(t.fd)
		}
		if len(left) > 0 {
			pids := make([]int, len(left))
			for i, t := range left {
				pids[i] = t.pid
			}
			return total, fmt.Errorf("%w: descendants %v still running %v after SIGKILL", ErrUnconfirmed, pids, killGrace)
		}
	}
	return total, fmt.Errorf("%w: descendants still forking after %d sweeps", ErrUnconfirmed, sweepRounds+1)
}

// open takes a pidfd on each process found, keeping only those whose
// starttime still matches the scan: the pid was not recycled in between.
func open(found map[int]procStat) []target {
	ts := make([]target, 0, len(found))
	for pid, p := range found {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		if st, ok := readStat(pid); !ok || st.start != p.start {
			unix.Close(fd)
			continue
		}
		ts = append(ts, target{pid: pid, fd: fd})
	}
	return ts
}

func signalAll(ts []target, sig unix.Signal) {
	for _, t := range ts {
		_ = unix.PidfdSendSignal(t.fd, sig, nil, 0)
	}
}

// awaitExit waits up to d for the processes to exit (a pidfd polls
// readable once its process has) and returns those that have not.
func awaitExit(ts []target, d time.Duration) []target {
	deadline := time.Now().Add(d)
	left := ts
	for len(left) > 0 {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			break
		}
		fds := make([]unix.PollFd, len(left))
		for i, t := range left {
			fds[i] = unix.PollFd{Fd: int32(t.fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(fds, int(min(ms, 1<<30))); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		next := left[:0:0]
		for i, t := range left {
			if fds[i].Revents == 0 {
				next = append(next, t)
			}
		}
		left = next
	}
	return left
}
