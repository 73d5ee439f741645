package bridgetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A directory left by a process that is gone is removed; one of a live
// process is not.
func TestRemoveStaleDirs(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(cmd.Process.Pid)+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(gone)
	if err := os.WriteFile(filepath.Join(gone, "call.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(live)
	removeStaleDirs()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the directory of exited pid %d: %v, want it removed", cmd.Process.Pid, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("this process's directory: %v, want it kept", err)
	}
}
