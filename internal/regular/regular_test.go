package regular

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFile: a regular file of at most max bytes is read; a FIFO no
// one writes is refused at once, not waited on, and so are a directory,
// a device and a file too large.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "token")
	if err := os.WriteFile(ok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(ok, 7); err != nil || string(b) != "s3cret\n" {
		t.Fatalf("a token file: %q, %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		max  int64
		want string
	}{
		{ok, 6, "more than 6 bytes"},
		{fifo, 64, "not a regular file"},
		{dir, 64, "not a regular file"},
		{"/dev/zero", 64, "not a regular file"},
		{filepath.Join(dir, "absent"), 64, "no such file"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(tc.path, tc.max)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
			}
		case <-time.After(time.Minute): // a backstop: it answers at once
			t.Fatalf("%s: still reading", tc.path)
		}
	}
}
