//go:build !linux

package jail

import (
	"context"
	"os"
	"syscall"
)

// MaybeInit does nothing off Linux, where there is no built-in jail.
func MaybeInit(Transformer) {}

func (c *Config) runBuiltin(context.Context, *Program) (*Outcome, error) {
	return nil, ErrUnsupported
}

// wrapAttr puts a wrapper in a process group of its own.
func wrapAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// DetectCgroup finds none off Linux.
func DetectCgroup() (*Cgroup, CgroupStatus) {
	return nil, noCgroup("cgroups are Linux's")
}

// Prepare fails off Linux.
func (c *Cgroup) Prepare() error { return ErrUnsupported }

func (c *Config) intoCgroup(*syscall.SysProcAttr) (started, done, kill func(), err error) {
	return func() {}, func() {}, func() {}, nil
}

// RunIDs are capbridge's own ids off Linux.
func (c *Config) RunIDs() (uid, gid int) { return os.Getuid(), os.Getgid() }

// Warm is a prestarted jail, which there is none of off Linux.
type Warm struct{}

// Prestart fails off Linux.
func (c *Config) Prestart(*Program) (*Warm, error) { return nil, ErrUnsupported }

// Run fails off Linux.
func (w *Warm) Run(context.Context, *Program) (*Outcome, error) { return nil, ErrUnsupported }

// Close does nothing off Linux.
func (w *Warm) Close() {}
