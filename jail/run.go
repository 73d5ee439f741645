package jail

import (
	"context"
	"errors"
)

// Run runs p in a jail of its own and returns once the program and
// everything it started have ended. An error means the jail could not be
// built or the program not started (it matches ErrSetup when the jail's
// init reported why, ErrUnsupported off Linux); every way the program
// itself ends is an Outcome. ctx ending kills the run (EndedCancelled).
func (c *Config) Run(ctx context.Context, p *Program) (*Outcome, error) {
	if p.WallClock <= 0 {
		return nil, errors.New("jail: a program needs a wall clock")
	}
	if len(p.Argv) == 0 {
		return nil, errors.New("jail: a program needs an argv")
	}
	if len(c.Wrap) > 0 {
		return c.runWrapped(ctx, p)
	}
	return c.runBuiltin(ctx, p)
}
