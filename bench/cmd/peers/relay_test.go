package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestPumpWritesEachRead checks the relay's copy loop passes on every read
// before the next one: a request must reach the server while the client
// is still waiting on its reply, not when a buffer fills or the stream
// ends.
func TestPumpWritesEachRead(t *testing.T) {
	srcR, srcW := io.Pipe()
	dstR, dstW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- pump(dstW, srcR) }()
	got := make([]byte, 64)
	for _, msg := range []string{"{\"id\":1}\n", "a", strings.Repeat("x", 1000)} {
		go func() { _, _ = srcW.Write([]byte(msg)) }()
		read := make(chan string, 1)
		go func() {
			var b []byte
			for len(b) < len(msg) {
				n, err := dstR.Read(got)
				if err != nil {
					break
				}
				b = append(b, got[:n]...)
			}
			read <- string(b)
		}()
		select {
		case s := <-read:
			if s != msg {
				t.Fatalf("pump passed on %q, want %q", s, msg)
			}
		case <-time.After(30 * time.Second): // a backstop; a working pump takes microseconds
			t.Fatalf("pump held %q back", msg)
		}
	}
	srcW.Close()
	if err := <-done; err != nil {
		t.Errorf("pump at EOF: %v", err)
	}
}
