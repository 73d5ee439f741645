package mcpwire

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capbridge/capbridge/internal/mcptest"
)

// syscw reads this process's count of write-family system calls.
func syscw(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("/proc/self/io has no syscw line")
	return 0
}

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
	before := syscw(t)
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
	writes := syscw(t) - before
	t.Logf("%d calls made together: %d write system calls", n, writes)
	if writes > n/4 {
		t.Fatalf("%d calls made together took %d writes, want at most %d", n, writes, n/4)
	}
}
