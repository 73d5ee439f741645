//go:build race

package interchange

// raceEnabled: the race detector's sync.Pool drops items at random, so
// allocation counts are only asserted without it.
const raceEnabled = true
