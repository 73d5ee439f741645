//go:build !linux

package jail

import (
	"context"
	"syscall"
)

// MaybeInit does nothing off Linux, where there is no built-in jail.
func MaybeInit(Transformer) {}

func (c *Config) runBuiltin(context.Context, *Program) (*Outcome, error) {
	return nil, ErrUnsupported
}

// wrapAttr puts a wrapper in a process group of its own.
func wrapAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
