package unixconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// streamPair returns an fdStream over one end of a connected Unix socket
// and the other end as a plain net.Conn.
func streamPair(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { peer.Close() })
	s, ok := Take(c).(*conn)
	if !ok {
		t.Fatal("newStream did not take the Unix socket out of the poller")
	}
	// newStream closed the net.Conn it was given: its descriptor is gone.
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the original conn is still open: %v", err)
	}
	return s, peer
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitErr waits for a blocked call's result; the bound is a backstop only.
func waitErr(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

func TestReadWrite(t *testing.T) {
	s, peer := streamPair(t)
	defer s.Close()
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	// A Read that has to wait for its bytes.
	done := make(chan error, 1)
	got := make([]byte, 16)
	var n int
	go func() {
		var err error
		n, err = s.Read(got)
		done <- err
	}()
	if _, err := peer.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "Read", done); err != nil || string(got[:n]) != "reply" {
		t.Fatalf("Read = %q, %v", got[:n], err)
	}
	peer.Close()
	if _, err := s.Read(got); err != io.EOF {
		t.Fatalf("Read after the peer closed = %v, want io.EOF", err)
	}
}

// A read deadline moved into the past wakes a blocked Read, as the
// Client's leader kick needs, and a cleared one lets it read on.
func TestReadDeadlineKick(t *testing.T) {
	s, peer := streamPair(t)
	defer s.Close()
	if err := s.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 8))
		done <- err
	}()
	// The kick may land before the Read polls or while it does; either
	// way the Read must see it.
	if err := s.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "kicked Read", done); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("kicked Read = %v, want os.ErrDeadlineExceeded", err)
	}
	// Cleared again, the stream reads on: the kick was consumed.
	if err := s.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := s.Read(make([]byte, 8))
		done <- err
	}()
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "Read after the kick", done); err != nil {
		t.Fatalf("Read after the kick = %v", err)
	}
}

// A Write that cannot finish (the peer never reads) ends at its
// deadline.
func TestWriteDeadline(t *testing.T) {
	s, _ := streamPair(t)
	defer s.Close()
	if err := s.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 64<<20))
		done <- err
	}()
	if err := waitErr(t, "Write to a peer that never reads", done); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write = %v, want os.ErrDeadlineExceeded", err)
	}
}

// Close wakes a blocked Read and a blocked Write, and every descriptor
// the stream made (the socket's duplicate, two epoll instances) is closed
// once both have returned.
func TestCloseWakesAndReleases(t *testing.T) {
	before := openFDs(t)
	s, peer := streamPair(t)
	reads, writes := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 8))
		reads <- err
	}()
	go func() {
		_, err := s.Write(make([]byte, 64<<20))
		writes <- err
	}()
	// The Write is blocked once the peer has a full buffer to read; the
	// Read has nothing to read. Wait until the peer sees the first bytes.
	if _, err := io.ReadFull(peer, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "Read across Close", reads); err == nil {
		t.Fatal("Read across Close returned no error")
	}
	if err := waitErr(t, "Write across Close", writes); err == nil {
		t.Fatal("Write across Close returned no error")
	}
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close = %v, want net.ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	peer.Close()
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open after Close, %d before", after, before)
	}
	// The peer saw the end of the stream.
	if _, err := io.Copy(io.Discard, peer); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("peer drain: %v", err)
	}
}

// A peer gone away makes Write fail with EPIPE, not kill the process with
// SIGPIPE.
func TestWriteAfterPeerGone(t *testing.T) {
	s, peer := streamPair(t)
	defer s.Close()
	peer.Close()
	var err error
	for i := 0; i < 8 && err == nil; i++ {
		_, err = s.Write(bytes.Repeat([]byte("x"), 4096))
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write to a closed peer = %v, want EPIPE", err)
	}
}

// The stream's input watcher holds the socket for input alone: room made
// by capbridge consuming a request is no event for this process. Its set
// is read back from the kernel (/proc/self/fdinfo).
func TestWatchesInputOnly(t *testing.T) {
	s, _ := streamPair(t)
	defer s.Close()
	var ep uintptr
	if err := s.inc.Control(func(fd uintptr) { ep = fd }); err != nil {
		t.Fatal(err)
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", ep))
	if err != nil {
		t.Fatal(err)
	}
	var watched []string
	for line := range strings.Lines(string(info)) {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "tfd:" && f[2] == "events:" {
			watched = append(watched, f[3])
		}
	}
	if len(watched) != 1 {
		t.Fatalf("input watcher's set: %v, want one descriptor", watched)
	}
	ev, err := strconv.ParseUint(watched[0], 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	if ev&syscall.EPOLLIN == 0 || ev&syscall.EPOLLOUT != 0 {
		t.Fatalf("input watcher's events %#x: want EPOLLIN without EPOLLOUT", ev)
	}
}

// CloseRead ends a blocked Read with io.EOF and leaves writing open, as
// the bridge needs to stop reading a connection and still send its last
// replies; CloseWrite then ends what the peer reads.
func TestCloseReadCloseWrite(t *testing.T) {
	s, peer := streamPair(t)
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 8))
		done <- err
	}()
	if err := s.CloseRead(); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "Read across CloseRead", done); err != io.EOF {
		t.Fatalf("Read across CloseRead = %v, want io.EOF", err)
	}
	if _, err := s.Write([]byte("last")); err != nil {
		t.Fatalf("Write after CloseRead = %v", err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "last" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	// CloseWrite: the peer reads the end of the stream.
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := peer.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("peer read after CloseWrite = %d, %v, want io.EOF", n, err)
	}
}
