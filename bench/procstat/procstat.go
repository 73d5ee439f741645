// Package procstat reads what a process has cost so far from /proc: CPU,
// context switches and read/write-family syscalls, for the harnesses to
// divide by the calls made between two readings.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Counters are one process's cumulative costs at one moment.
type Counters struct {
	CPU      time.Duration // user + system
	CtxSw    uint64        // voluntary + nonvoluntary, summed over live threads
	Syscalls uint64        // read- and write-family syscalls (/proc/PID/io syscr + syscw)
}

// Sub is what c counts beyond o.
func (c Counters) Sub(o Counters) Counters {
	return Counters{CPU: c.CPU - o.CPU, CtxSw: c.CtxSw - o.CtxSw, Syscalls: c.Syscalls - o.Syscalls}
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const clockTick = 10 * time.Millisecond

// Self reads this process's counters; CPU comes from
// getrusage(RUSAGE_SELF), which has microsecond resolution rather than
// /proc's 10 ms ticks.
func Self() (Counters, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Counters{}, err
	}
	c, err := Of(os.Getpid(), false)
	c.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return c, err
}

// Of reads pid's counters from /proc; withCPU reads utime+stime from
// /proc/PID/stat (10 ms ticks), else CPU is left zero for the caller to
// fill from a finer source.
func Of(pid int, withCPU bool) (Counters, error) {
	var c Counters
	base := "/proc/" + strconv.Itoa(pid)
	if withCPU {
		b, err := os.ReadFile(base + "/stat")
		if err != nil {
			return c, err
		}
		// The fields after the command name, which is in parentheses and
		// may itself contain spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			return c, fmt.Errorf("%s/stat: no command name", base)
		}
		f := strings.Fields(string(b[i+1:]))
		// f[0] is field 3 (state); utime and stime are fields 14 and 15.
		if len(f) < 13 {
			return c, fmt.Errorf("%s/stat: %d fields", base, len(f)+2)
		}
		ut, err1 := strconv.ParseUint(f[11], 10, 64)
		st, err2 := strconv.ParseUint(f[12], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return c, fmt.Errorf("%s/stat: %w", base, err)
		}
		c.CPU = time.Duration(ut+st) * clockTick
	}
	tasks, err := filepath.Glob(base + "/task/*/status")
	if err != nil {
		return c, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited meanwhile
		}
		c.CtxSw += Field(b, "voluntary_ctxt_switches:") + Field(b, "nonvoluntary_ctxt_switches:")
	}
	b, err := os.ReadFile(base + "/io")
	if err != nil {
		return c, err
	}
	c.Syscalls = Field(b, "syscr:") + Field(b, "syscw:")
	return c, nil
}

// Field returns the number after key at the start of a line of b, or 0.
func Field(b []byte, key string) uint64 {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
