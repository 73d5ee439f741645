//go:build !linux

package mcpwire

import "errors"

// spawn is only implemented on Linux: the custody it promises rests on
// Pdeathsig, which other systems lack.
func spawn(cmd Command) (Conn, error) {
	return nil, errors.New("mcpwire: spawning servers is only supported on Linux")
}
