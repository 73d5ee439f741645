//go:build !race

package interchange

const raceEnabled = false
