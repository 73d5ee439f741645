package leakcheck

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestChildrenSeesAndForgetsAChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	found := false
	for _, k := range Children() {
		if strings.HasPrefix(k, "pid "+pid+" ") {
			found = true
		}
	}
	if !found {
		t.Fatalf("Children() = %v, want it to list pid %s", Children(), pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if kids := waitChildren(); len(kids) != 0 {
		t.Fatalf("after reaping, Children() = %v", kids)
	}
}

// The check must notice what it exists to notice: a goroutine and a
// descriptor that outlive the test.
func TestCheckDetectsLeaks(t *testing.T) {
	before := goroutines()
	fds := openFDs()
	stop := make(chan struct{})
	go func() { <-stop }()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if g := leakedNow(before); len(g) != 1 {
		t.Errorf("leaked goroutines = %d, want 1", len(g))
	}
	if n := len(fdsNow(fds)); n != 1 {
		t.Errorf("leaked fds = %d, want 1", n)
	}
	close(stop)
	f.Close()
	if g := waitGoroutines(before); len(g) != 0 {
		t.Errorf("after cleanup, leaked goroutines = %v", g)
	}
	if n := waitFDs(fds); len(n) != 0 {
		t.Errorf("after cleanup, leaked fds = %v", n)
	}
}
