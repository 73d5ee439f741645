// Package need lets a test ask for a tool or file that the test command
// installs: under the test command a missing one fails the test, since a
// skip there would prove nothing; run by hand, it skips, saying how to
// install it.
package need

import (
	"os"
	"os/exec"
	"testing"
)

// StrictEnv, set by the Makefile's test targets (and CI's CI), turns a
// missing tool from a skip into a failure.
const StrictEnv = "CAPBRIDGE_TEST_STRICT"

// Missing ends the test for want of what: failed under the test command,
// skipped otherwise. fix says how to install it.
func Missing(t testing.TB, what, fix string, err error) {
	t.Helper()
	if os.Getenv(StrictEnv) != "" || os.Getenv("CI") != "" {
		t.Fatalf("%s is missing, and the test command must run this test: %s (%v)", what, fix, err)
	}
	t.Skipf("%s is missing (%s): %v", what, fix, err)
}

// Command returns the path of the program name, or ends the test as
// Missing does.
func Command(t testing.TB, name, fix string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, fix, err)
	}
	return p
}

// File ends the test as Missing does unless path exists.
func File(t testing.TB, path, what, fix string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, what, fix, err)
	}
}
