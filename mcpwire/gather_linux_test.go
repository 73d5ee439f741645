package mcpwire

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syscount"
)

// With one processor, as the bridge runs, calls made together reach the
// server's stdin in a few writes, not one each: a caller that finds other
// calls in flight yields before writing, and the callers already
// runnable queue their lines behind it. Every call still gets its own
// answer.
func TestCallsGatherIntoFewWrites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c := startTest(t, mcptest.Scenario{}, Config{MaxInFlight: 64})
	defer closeClean(t, c)
	const n = 32
	start := make(chan struct{})
	var wg sync.WaitGroup
	before := syscount.Writes(t)
	for i := range n {
		wg.Go(func() {
			<-start
			want := fmt.Sprintf("call %d", i)
			r, err := callT(t, c, "echo", `{"text":"`+want+`"}`, CallOptions{})
			if err != nil || texts(r) != "text:"+want {
				t.Errorf("call %d: %v, %v", i, r, err)
			}
		})
	}
	close(start)
	wg.Wait()
	writes := syscount.Writes(t) - before
	t.Logf("%d calls made together: %d write system calls", n, writes)
	if writes > n/4 {
		t.Fatalf("%d calls made together took %d writes, want at most %d", n, writes, n/4)
	}
}
