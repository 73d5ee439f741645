//go:build !linux

package interop

import "syscall"

// groupAttr puts a server in a process group of its own (there is no
// parent-death signal outside Linux: the test's cleanup kills it).
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
