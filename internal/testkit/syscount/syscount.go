// Package syscount reads how many write system calls this process has
// made, for tests that prove writes are gathered.
package syscount

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Writes returns this process's count of write-family system calls
// (syscw in /proc/self/io). It skips the test where the kernel does not
// keep one.
func Writes(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("/proc/self/io: %v", err)
			}
			return n
		}
	}
	t.Fatal("/proc/self/io has no syscw line")
	return 0
}
