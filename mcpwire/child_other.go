//go:build !linux

package mcpwire

import (
	"errors"
	"time"
)

// spawn is only implemented on Linux: the custody it promises rests on
// Pdeathsig, which other systems lack.
func spawn(cmd Command) (Conn, error) {
	return nil, errors.New("mcpwire: spawning servers is only supported on Linux")
}

// Cgroups exists only on Linux; see OpenCgroups.
type Cgroups struct{}

// OpenCgroups always fails off Linux.
func OpenCgroups() (*Cgroups, int, error) { return nil, 0, errNoCgroups }

// Dir is empty off Linux.
func (g *Cgroups) Dir() string { return "" }

// Close does nothing off Linux.
func (g *Cgroups) Close(time.Duration) error { return nil }

// Subreap always fails off Linux: PR_SET_CHILD_SUBREAPER is Linux's.
func Subreap() error { return errors.New("mcpwire: a child subreaper is only supported on Linux") }
