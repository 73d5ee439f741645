package framewrite

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/syscount"
)

// sendAll has n goroutines, released together, each send one frame
// through send, and returns how many write system calls the process made
// meanwhile; the frames must all arrive, in some order, whole.
func sendAll(t *testing.T, n int, gather bool) int {
	t.Helper()
	fds, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer fds[0].Close()
	defer fds[1].Close()
	w := NewInline(fds[0], n, time.Minute)
	defer w.Stop()
	send := w.Send
	if gather {
		send = w.SendGathering
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	before := syscount.Writes(t)
	for i := range n {
		wg.Go(func() {
			buf := GetBuf()
			*buf = append((*buf)[:0], byte('a'+i%26))
			<-start
			if err := send(context.Background(), buf); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	writes := syscount.Writes(t) - before
	got := make([]byte, n)
	if _, err := io.ReadFull(fds[1], got); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 0, n)
	for i := range n {
		want = append(want, byte('a'+i%26))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !bytes.Equal(got, want) {
		t.Fatalf("peer read %q, want the bytes %q in some order", got, want)
	}
	return writes
}

// socketPair returns both ends of a connected Unix socket as net.Conns,
// so that Inline takes its raw path.
func socketPair() ([2]net.Conn, error) {
	var out [2]net.Conn
	dir, err := os.MkdirTemp("", "fw")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		return out, err
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	if out[0], err = net.Dial("unix", dir+"/s"); err != nil {
		return out, err
	}
	out[1] = <-acc
	return out, nil
}

// With one processor, senders released together each find the writer
// idle and write alone through Send; through SendGathering the first
// yields and the rest join its write.
func TestSendGathering(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 32
	alone := sendAll(t, n, false)
	gathered := sendAll(t, n, true)
	t.Logf("%d senders: %d write system calls through Send, %d through SendGathering", n, alone, gathered)
	if alone < n {
		t.Fatalf("through Send, %d writes for %d senders: the test no longer shows senders writing alone", alone, n)
	}
	if gathered > n/4 {
		t.Fatalf("through SendGathering, %d writes for %d senders, want at most %d", gathered, n, n/4)
	}
}
