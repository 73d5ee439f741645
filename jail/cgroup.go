package jail

import (
	"fmt"
	"sync/atomic"
)

// CgroupLimits are the limits a run's own cgroup v2 gets, when capbridge
// has a delegated cgroup to make it in: unlike the rlimits, they hold for
// the run as a whole (every process of it together). A zero field takes
// the default in DefaultCgroupLimits.
type CgroupLimits struct {
	Memory int64   // bytes of memory, page cache included (memory.max; swap is refused: memory.swap.max 0)
	Pids   int     // processes and threads (pids.max)
	CPU    float64 // cores' worth of CPU time (cpu.max, over a 100 ms period)
}

// DefaultCgroupLimits: a script's worth, and one core.
var DefaultCgroupLimits = CgroupLimits{Memory: 1 << 30, Pids: 128, CPU: 1}

func (l CgroupLimits) withDefaults() CgroupLimits {
	d := DefaultCgroupLimits
	if l.Memory > 0 {
		d.Memory = l.Memory
	}
	if l.Pids > 0 {
		d.Pids = l.Pids
	}
	if l.CPU > 0 {
		d.CPU = l.CPU
	}
	return d
}

// Cgroup is a delegated, writable cgroup v2 directory that runs get
// cgroups of their own below: DetectCgroup finds it, Prepare makes it
// ready. Its methods are safe for concurrent use.
type Cgroup struct {
	// Dir is the delegated cgroup's directory.
	Dir string
	// Limits are what each run's cgroup gets.
	Limits CgroupLimits

	n atomic.Uint64 // names the runs' cgroups
}

// CgroupStatus says whether runs get cgroup v2 limits: where, or why not.
type CgroupStatus struct {
	Available bool   `json:"available"`
	Dir       string `json:"dir,omitempty"`
	// Reason, when not available, says why, and what limits the run
	// instead.
	Reason string `json:"reason,omitempty"`
}

// String is the status in one line, for a log or a report.
func (s CgroupStatus) String() string {
	if s.Available {
		return "cgroup v2 limits (memory, pids, cpu) per run, below " + s.Dir
	}
	return "no cgroup v2 limits: " + s.Reason
}

// noCgroup is the status when none can be used, with why.
func noCgroup(format string, args ...any) CgroupStatus {
	return CgroupStatus{Reason: fmt.Sprintf(format, args...) +
		"; each process of a run is limited by rlimits instead (memory, processes, CPU time), not the run as a whole"}
}

// UseCgroup finds a delegated cgroup v2 (DetectCgroup) and prepares it for
// runs (Prepare): what a front calls once, before it starts servers or
// runs, to set in Config.Cgroup. The status says where, or why none.
func UseCgroup() (*Cgroup, CgroupStatus) {
	cg, st := DetectCgroup()
	if cg == nil {
		return nil, st
	}
	if err := cg.Prepare(); err != nil {
		return nil, noCgroup("%v", err)
	}
	return cg, st
}
