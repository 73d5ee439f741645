package interop

import "syscall"

// groupAttr puts a server in a process group of its own, killed with
// the test binary should it die first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
