// Package jail implements capbridge's reference jail: it runs one
// model-written program in fresh Linux namespaces (user, mount, PID,
// network, IPC, UTS, cgroup) with no network, a read-only view of the
// runtime and of the files it is given, a private size-capped tmpfs,
// rlimits, no_new_privs, an empty capability set, a seccomp filter and a
// wall clock that ends the whole PID namespace. It needs neither root nor
// a setuid helper. docs/jail.md states what it promises and which test
// holds each promise.
//
// The jail's first process is the calling binary itself, re-executed with
// a marker in its environment: the binary's main must call MaybeInit
// before anything else, and a test binary that runs jails from its
// TestMain. MaybeInit builds the program's view of the filesystem, applies
// the limits and executes the program, which so becomes the PID
// namespace's init: when it exits, the kernel ends everything it left
// behind.
//
// Where an operator already has a jail (bubblewrap, nsjail, runsc, a
// container runtime), Config.Wrap names the command that wraps the
// program instead, and the built-in one stands aside.
package jail

import (
	"errors"
	"time"
)

// Errors callers branch on.
var (
	// ErrUnsupported: the built-in jail needs Linux.
	ErrUnsupported = errors.New("jail: the built-in jail needs Linux")
	// ErrSetup: the jail could not be built (a namespace refused, a mount
	// failed); the error says which step and why. The program never ran.
	ErrSetup = errors.New("jail: setting up the jail failed")
)

// Limits are the resource limits a program runs under. A zero field takes
// the default in DefaultLimits.
type Limits struct {
	CPU          time.Duration // CPU time (RLIMIT_CPU), whole seconds
	AddressSpace int64         // bytes of virtual memory (RLIMIT_AS)
	FileSize     int64         // bytes, the largest file it may write (RLIMIT_FSIZE)
	OpenFiles    int           // open file descriptors (RLIMIT_NOFILE)
	Procs        int           // processes and threads of the jail (RLIMIT_NPROC, counted in its user namespace)
}

// DefaultLimits are generous for a script and small for a host: Node and
// V8 reserve several GiB of address space at start, hence the 8 GiB.
var DefaultLimits = Limits{
	CPU:          60 * time.Second,
	AddressSpace: 8 << 30,
	FileSize:     64 << 20,
	OpenFiles:    256,
	Procs:        64,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.CPU > 0 {
		d.CPU = l.CPU
	}
	if l.AddressSpace > 0 {
		d.AddressSpace = l.AddressSpace
	}
	if l.FileSize > 0 {
		d.FileSize = l.FileSize
	}
	if l.OpenFiles > 0 {
		d.OpenFiles = l.OpenFiles
	}
	if l.Procs > 0 {
		d.Procs = l.Procs
	}
	return d
}

// Bounds of a run's output and of what a jail is given.
const (
	DefaultTmpSize   = 64 << 20 // the writable /tmp
	DefaultMaxStdout = 64 << 10 // stdout kept (its head)
	DefaultMaxStderr = 8 << 10  // stderr kept (its tail)
	DefaultMaxOutput = 16 << 20 // stdout and stderr written in all before the run is ended
	MaxResult        = 1 << 20  // the result channel (fd 4)
	maxSpec          = 64 << 20 // the spec init reads
	maxStatus        = 8 << 10  // what init reports of a failed setup
	rootSize         = 64 << 20 // the read-only root's tmpfs: the files given and the mount points
	// maxInodes caps the files, directories and links a writable tmpfs
	// (/tmp, a warm jail's /work) holds: an empty file takes no block,
	// so size= alone lets a program fill the host's memory with inodes.
	maxInodes = 1 << 14
)

// Config is the jail's fixed configuration: what every run gets. The zero
// value is the built-in jail with the default limits. A Config must not
// change once Run is first called; Run may be called concurrently.
type Config struct {
	Limits Limits
	// TmpSize caps the writable tmpfs at /tmp, in bytes (default 64 MiB).
	TmpSize int64
	// System lists the host paths every jail sees read-only at the same
	// place: the runtime's files. Nil means DefaultSystem. A path that does
	// not exist is left out; a symbolic link (/bin → usr/bin) is recreated
	// as one.
	System []string
	// UID and GID are the host ids a jail runs as when capbridge runs as
	// root (default 65534, nobody). Otherwise a jail runs as capbridge's
	// own user: an unprivileged user namespace maps only that.
	UID, GID int
	// Exe is the binary that becomes a jail's init; it must call
	// MaybeInit first. Default /proc/self/exe.
	Exe string
	// NoSeccomp leaves the seccomp filter off (docs/jail.md says what it
	// refuses).
	NoSeccomp bool
	// Wrap, when set, runs each program under this command instead of the
	// built-in jail: see wrap.go for the placeholders it may hold.
	Wrap []string
	// Transformer applies a Program's transforms in wrapped mode (the
	// built-in jail applies them inside, with MaybeInit's).
	Transformer Transformer
	// Cgroup, when set (DetectCgroup, then Prepare), gives each run a
	// cgroup v2 of its own below it, with its Limits: the run's processes
	// together, a wrapper's too, are bounded in memory, processes and CPU.
	Cgroup *Cgroup
}

// DefaultSystem is the host's runtime view: binaries, libraries, and the
// few files of /etc a runtime reads at start.
var DefaultSystem = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", "/etc/ssl/certs"}

// File is a file a program is given, read-only, at an absolute path in
// the jail.
type File struct {
	Path string
	Data []byte
	Mode uint32 // permission bits; 0 means 0644
}

// Bind makes a host path visible in the jail.
type Bind struct {
	Source string // host path
	Target string // absolute path in the jail
	// Writable leaves the bind writable. A socket needs no writable
	// mount to be connected to: its inode's mode decides (unix(7)).
	Writable bool
}

// Overlay makes a host directory visible at Target and writable there:
// the program's writes land on the run's /tmp (counted against its size)
// and vanish with the run; the host directory is never written. It needs
// the built-in jail (an overlay filesystem mounted in the jail's user
// namespace, Linux 5.11 and later). A build cache is the use: read from
// what was prepared, written for one run only.
type Overlay struct {
	Source string // host directory
	Target string // absolute path in the jail, without ',' or ':'
}

// Transform is a file the jail's init rewrites before the program runs:
// From is read, passed to the Transformer given to MaybeInit, and the
// output written to To (TypeScript's types stripped, for instance). A
// transform's error ends the run like a compiler's: its text on the
// program's stderr and exit status 1.
type Transform struct {
	From, To string
}

// Transformer rewrites a file for a Program's Transform: it gets the
// file's name, for messages, and its bytes.
type Transformer func(name string, src []byte) ([]byte, error)

// Program is one run.
type Program struct {
	Argv      []string // argv[0] is an absolute path in the jail
	Env       []string // the whole environment; nothing is inherited
	Dir       string   // the working directory in the jail; default /tmp
	Files     []File
	Binds     []Bind
	Overlays  []Overlay
	Transform []Transform
	// WallClock ends the run, and everything it started, this long after
	// it begins (required).
	WallClock time.Duration
	// MaxStdout and MaxStderr are how much of each stream the Outcome
	// keeps (stdout's head, stderr's tail); MaxOutput is how much the
	// program may write in all before it is ended. Zero means the
	// defaults.
	MaxStdout, MaxStderr, MaxOutput int64
	// Started, when set, is called once the program's process exists
	// (its init is running); it must not block.
	Started func()
}

// Ended says why a run ended.
type Ended string

const (
	EndedExit      Ended = "exit"         // the program exited (or was killed by a signal it raised or a limit)
	EndedWallClock Ended = "wall_clock"   // the wall clock ran out
	EndedOutput    Ended = "output_limit" // it wrote more than MaxOutput
	EndedCancelled Ended = "cancelled"    // the caller's context ended
)

// Outcome is what a run produced.
type Outcome struct {
	Ended    Ended
	ExitCode int    // the exit status, or -1 when a signal ended it
	Signal   string // the signal that ended it, if one did ("killed")
	Stdout   []byte // its head, at most MaxStdout
	Stderr   []byte // its tail, at most MaxStderr
	// StdoutBytes and StderrBytes count everything written.
	StdoutBytes, StderrBytes int64
	// Result is what the program wrote to file descriptor 4, at most
	// MaxResult bytes; ResultTruncated is set when it wrote more.
	Result          []byte
	ResultTruncated bool
	Took            time.Duration
}
