// Package fakeclock moves the clock of a testing/synctest bubble, for
// tests of timers that must not wait in real time.
package fakeclock

import (
	"testing/synctest"
	"time"
)

// Advance moves the calling bubble's clock on by d once every goroutine
// in it is blocked, and returns once they are blocked again, so a test
// reads what its timers made happen only when it has all happened. The
// wait is on a timer of the bubble's, which fires as soon as nothing else
// can run: the fake time passes at once. Outside a bubble synctest.Wait
// panics, so Advance can never become a real wait.
func Advance(d time.Duration) {
	synctest.Wait()
	t := time.NewTimer(d)
	<-t.C
	synctest.Wait()
}
