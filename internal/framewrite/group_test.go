package framewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recordSink keeps what was written, failing every write once told to.
type recordSink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	fail   error
}

func (s *recordSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	s.writes++
	return s.buf.Write(p)
}

func (s *recordSink) SetWriteDeadline(time.Time) error { return nil }

// owner is the state a Group's user keeps: stopped once, with a reason.
type owner struct {
	mu    sync.Mutex
	err   error
	done  chan struct{}
	fails int
}

func newOwner() *owner { return &owner{done: make(chan struct{})} }

func (o *owner) stopped() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *owner) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fails++
	if o.err == nil {
		o.err = fmt.Errorf("owner stopped: %w", err)
		close(o.done)
	}
}

func (o *owner) config(max int) GroupConfig {
	return GroupConfig{Timeout: time.Minute, MaxQueued: max, Done: o.done, Stopped: o.stopped, Fail: o.fail}
}

// Every message goes out whole and each caller's in the order it wrote
// them, however many write at once.
func TestGroupKeepsMessagesWhole(t *testing.T) {
	sink, o := &recordSink{}, newOwner()
	g := NewGroup(sink, o.config(1<<10))
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := g.Write(context.Background(), fmt.Appendf(nil, "%d:%d\n", w, i), true, i%2 == 0); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	next := make([]int, writers)
	lines := bytes.Split(bytes.TrimSuffix(sink.buf.Bytes(), []byte("\n")), []byte("\n"))
	for _, l := range lines {
		var w, i int
		if _, err := fmt.Sscanf(string(l), "%d:%d", &w, &i); err != nil || w >= writers || i != next[w] {
			t.Fatalf("line %q out of order or torn (next for writer %d is %d)", l, w, next[w])
		}
		next[w]++
	}
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
}

// A failed write stops the owner once; that Write and every later one
// return the owner's reason, and a caller that may not wait for room is
// told ErrNoRoom rather than queued past the bound.
func TestGroupFailureAndRoom(t *testing.T) {
	sink, o := &recordSink{fail: errors.New("broken pipe")}, newOwner()
	g := NewGroup(sink, o.config(8))
	err := g.Write(context.Background(), []byte("hello\n"), true, false)
	if err == nil || err != o.stopped() {
		t.Fatalf("Write over a failing sink = %v, want the owner's reason %v", err, o.stopped())
	}
	if err := g.Write(context.Background(), []byte("again\n"), true, false); err != o.stopped() {
		t.Fatalf("Write after the failure = %v, want %v", err, o.stopped())
	}
	if o.fails != 1 {
		t.Fatalf("Fail called %d times, want once", o.fails)
	}

	// Room: hold the writer by queueing behind a holder that cannot
	// finish until released.
	block := &blockSink{release: make(chan struct{}), entered: make(chan struct{})}
	o2 := newOwner()
	g2 := NewGroup(block, o2.config(8))
	first := make(chan error, 1)
	go func() { first <- g2.Write(context.Background(), []byte("first\n"), true, false) }()
	<-block.entered // the holder is writing
	if err := g2.Write(context.Background(), []byte("queued\n"), false, false); err != nil {
		t.Fatalf("queueing into an empty queue: %v", err)
	}
	if err := g2.Write(context.Background(), []byte("too much\n"), false, false); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("past the bound without waiting = %v, want ErrNoRoom", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g2.Write(ctx, []byte("too much\n"), true, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting for room with a cancelled ctx = %v, want context.Canceled", err)
	}
	close(block.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := block.buf.String(); got != "first\nqueued\n" {
		t.Fatalf("written %q, want the holder's line then the queued one", got)
	}
}

// blockSink's first write waits for release.
type blockSink struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	buf     bytes.Buffer
	writeMu sync.Mutex
}

func (s *blockSink) Write(p []byte) (int, error) {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.buf.Write(p)
}

func (s *blockSink) SetWriteDeadline(time.Time) error { return nil }
