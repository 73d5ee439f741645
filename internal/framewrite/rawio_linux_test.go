package framewrite

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestRawPathTaken: net connections and non-blocking pipes get the raw
// path; a blocking file does not.
func TestRawPathTaken(t *testing.T) {
	a, b := net.Pipe() // no descriptor at all
	defer a.Close()
	defer b.Close()
	if _, ok := RawReader(a).(*rawReader); ok {
		t.Error("net.Pipe took the raw path")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, ok := RawReader(r).(*rawReader); !ok {
		t.Error("a pipe from os.Pipe did not take the raw path")
	}
	f, err := os.Open(os.DevNull) // a regular descriptor, blocking
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := RawWriter(f).(*rawWriter); ok {
		t.Error("a blocking file took the raw path")
	}
}

// TestRawRoundTrip writes batches far larger than the socket's buffer, so
// writes are partial and wait for room, and reads them back whole.
func TestRawRoundTrip(t *testing.T) {
	c1, c2 := unixPair(t)
	vw := newVecWriter(c1)
	if vw == nil {
		t.Fatal("a Unix socket did not take the raw path")
	}
	var want []byte
	var bufs [][]byte
	for i := range 3 * maxBatch / 2 { // more buffers than one writev carries
		b := bytes.Repeat([]byte{byte(i)}, 1+i*997)
		want = append(want, b...)
		bufs = append(bufs, b, nil) // empty buffers are skipped
	}
	errc := make(chan error, 1)
	go func() { errc <- vw.writeVec(bufs); c1.CloseWrite() }()
	got, err := io.ReadAll(RawReader(c2))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(want))
	}
}

// TestRawReadErrors: a passed deadline and a closed connection give the
// errors the connection's own Read gives.
func TestRawReadErrors(t *testing.T) {
	c1, _ := unixPair(t)
	rd := RawReader(c1)
	c1.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := rd.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("past deadline: %v", err)
	}
	c1.Close()
	if _, err := rd.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("closed socket: %v", err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr := RawReader(r)
	w.Close()
	if _, err := pr.Read(make([]byte, 8)); err != io.EOF {
		t.Errorf("pipe's writer closed: %v, want io.EOF", err)
	}
	r.Close()
	if _, err := pr.Read(make([]byte, 8)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("closed pipe: %v", err)
	}
}

// unixPair returns a connected pair of Unix stream sockets with small
// send buffers, closed at the end of the test.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	path := t.TempDir() + "/s"
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c1, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	c1.SetWriteBuffer(4096)
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}

// TestRawPathAllocs: a write and a read on the raw path allocate
// nothing (the RawConn callbacks are bound once, not per call).
func TestRawPathAllocs(t *testing.T) {
	conns, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer conns[0].Close()
	defer conns[1].Close()
	w, r := RawWriter(conns[0]), RawReader(conns[1])
	if _, ok := w.(*rawWriter); !ok {
		t.Fatal("the socket did not take the raw path")
	}
	msg, buf := []byte("0123456789abcdef"), make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Read(buf); err != nil || n != len(msg) {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("a raw write and read: %v allocations, want 0", allocs)
	}
}
