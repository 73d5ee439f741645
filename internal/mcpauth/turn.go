package mcpauth

import "context"

// A turn is a lock whose waiters give up when their context ends. An
// authorizer holds its turn across a network request (a token's fetch or
// refresh, bounded by loginFetchTimeout), and a request with a deadline
// must not wait behind it past that deadline.
type turn chan struct{}

func newTurn() turn { return make(turn, 1) }

// take waits for the turn until ctx ends, and then returns its cause.
func (t turn) take(ctx context.Context) error {
	select {
	case t <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// give hands the turn on; only its holder calls it.
func (t turn) give() { <-t }
