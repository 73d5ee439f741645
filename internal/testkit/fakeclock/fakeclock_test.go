package fakeclock

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestAdvance: the bubble's clock moves by exactly d, a timer due within
// it has fired and its goroutine finished by the time Advance returns,
// and one due after it has not.
func TestAdvance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var early, late bool
		time.AfterFunc(time.Second, func() { early = true })
		time.AfterFunc(3*time.Second, func() { late = true })
		Advance(2 * time.Second)
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("the clock moved %v, want 2s", got)
		}
		if !early || late {
			t.Errorf("after 2s: the 1s timer fired %v, the 3s one %v; want true, false", early, late)
		}
	})
}

// TestAdvanceOutsideABubble: outside a bubble Advance panics rather than
// wait in real time.
func TestAdvanceOutsideABubble(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Advance outside a bubble did not panic")
		}
	}()
	Advance(time.Hour)
}
