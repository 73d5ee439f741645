package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestSdNotify(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, abstract := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "notify")
		name, listen := path, path
		if abstract {
			name = "@capbridge-test-" + filepath.Base(t.TempDir())
			listen = "\x00" + name[1:]
		}
		l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: listen, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		if err := notify(name, "READY=1"); err != nil {
			t.Fatal(err)
		}
		_ = l.SetReadDeadline(time.Now().Add(time.Minute)) // a backstop: the datagram is queued before Read
		buf := make([]byte, 64)
		n, err := l.Read(buf)
		if err != nil || string(buf[:n]) != "READY=1" {
			t.Errorf("abstract=%v: read %q, %v", abstract, buf[:n], err)
		}
		l.Close()
	}
	if err := notify("", "READY=1"); err != nil {
		t.Errorf("unset NOTIFY_SOCKET: %v", err)
	}
	if err := notify(filepath.Join(t.TempDir(), "absent"), "READY=1"); err == nil {
		t.Error("a missing notify socket gave no error")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ready.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(path, []byte(`{"ready":true}`), 0o640); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if err != nil || string(b) != `{"ready":true}` || fi.Mode().Perm() != 0o640 {
		t.Errorf("got %q mode %v, %v", b, fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries left in the directory, want 1", len(ents))
	}
	if err := writeFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
