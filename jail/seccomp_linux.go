package jail

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter, written as classic BPF without cgo. It refuses what
// a program has no business doing and what widens the kernel's attack
// surface beyond the namespaces: debugging other processes (ptrace,
// process_vm_*), mounting, namespaces (unshare, setns, clone with a
// CLONE_NEW* flag), keyrings, eBPF, perf, userfaultfd, io_uring, kernel
// modules, kexec, reboot, swap, accounting, the kernel log and the clock.
// Each is answered EPERM (io_uring and clone3 ENOSYS, so libuv and glibc
// fall back to what they used before those existed); a system call of
// another architecture (x32 on amd64, say) kills the process.

// seccomp_data offsets (linux/seccomp.h).
const (
	offNR    = 0
	offArch  = 4
	offArgs0 = 16 // the low 32 bits of args[0] on a little-endian machine
)

// BPF opcodes (linux/filter.h) and seccomp's returns.
const (
	bpfLdWAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retErrno = unix.SECCOMP_RET_ERRNO
)

// refusedSyscalls are answered EPERM.
var refusedSyscalls = []uintptr{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_KCMP,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_SYSLOG,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_QUOTACTL, unix.SYS_VHANGUP,
	unix.SYS_FANOTIFY_INIT, unix.SYS_LOOKUP_DCOOKIE,
}

// missingSyscalls are answered ENOSYS: callers fall back.
var missingSyscalls = []uintptr{unix.SYS_CLONE3, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}

// cloneNamespaces are the clone flags that make a namespace.
const cloneNamespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// auditArch is this architecture's AUDIT_ARCH value, or 0 where the
// filter is not built.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// filter assembles the program. Jumps are relative and at most 255
// instructions long, which the fixed layout below keeps.
func filter() ([]unix.SockFilter, error) {
	arch := auditArch()
	if arch == 0 {
		return nil, fmt.Errorf("no filter for %s", runtime.GOARCH)
	}
	var p []unix.SockFilter
	op := func(code uint16, jt, jf uint8, k uint32) {
		p = append(p, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
	}
	// The returns sit at the end; each check jumps forward to one. Their
	// positions are known once the checks are counted.
	nChecks := len(refusedSyscalls) + len(missingSyscalls)
	// Layout: 0 ld arch; 1 jeq arch; 2 ld nr; [3 jge x32 on amd64];
	// checks; clone: jeq, ld arg0, jset, ld nr (restore); allow; eperm;
	// enosys; kill.
	op(bpfLdWAbs, 0, 0, offArch)
	archJump := len(p)
	op(bpfJeqK, 0, 0, arch) // jf patched to kill
	op(bpfLdWAbs, 0, 0, offNR)
	x32 := -1
	if runtime.GOARCH == "amd64" {
		x32 = len(p)
		op(bpfJgeK, 0, 0, 0x40000000) // the x32 ABI: jt patched to kill
	}
	checks := len(p)
	for _, nr := range refusedSyscalls {
		op(bpfJeqK, 0, 0, uint32(nr))
	}
	for _, nr := range missingSyscalls {
		op(bpfJeqK, 0, 0, uint32(nr))
	}
	cloneAt := len(p)
	op(bpfJeqK, 0, 0, unix.SYS_CLONE) // jf patched to allow
	op(bpfLdWAbs, 0, 0, offArgs0)
	op(bpfJsetK, 0, 0, cloneNamespaces) // jt patched to eperm, jf to allow
	allow := len(p)
	op(bpfRetK, 0, 0, retAllow)
	eperm := len(p)
	op(bpfRetK, 0, 0, retErrno|uint32(unix.EPERM))
	enosys := len(p)
	op(bpfRetK, 0, 0, retErrno|uint32(unix.ENOSYS))
	kill := len(p)
	op(bpfRetK, 0, 0, retKill)

	rel := func(from, to int) (uint8, error) {
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("jump from %d to %d out of range", from, to)
		}
		return uint8(d), nil
	}
	var err error
	set := func(dst *uint8, from, to int) {
		if err == nil {
			*dst, err = rel(from, to)
		}
	}
	set(&p[archJump].Jf, archJump, kill)
	if x32 >= 0 {
		set(&p[x32].Jt, x32, kill)
	}
	for i := 0; i < nChecks; i++ {
		at := checks + i
		if i < len(refusedSyscalls) {
			set(&p[at].Jt, at, eperm)
		} else {
			set(&p[at].Jt, at, enosys)
		}
	}
	set(&p[cloneAt].Jf, cloneAt, allow)
	set(&p[cloneAt+2].Jt, cloneAt+2, eperm)
	set(&p[cloneAt+2].Jf, cloneAt+2, allow)
	return p, err
}

// installSeccomp installs the filter on the calling thread, which must
// have no_new_privs set; the program it executes inherits it.
func installSeccomp() error {
	p, err := filter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
}
