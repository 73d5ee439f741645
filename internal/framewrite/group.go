package framewrite

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"
)

// ErrNoRoom is Group.Write's answer when the queue is full and the caller
// may not wait for room.
var ErrNoRoom = errors.New("framewrite: write queue full")

// Sink is what a Group writes to: a byte stream taking whole batches of
// messages, with a write deadline the Group moves.
type Sink interface {
	Write(p []byte) (int, error)
	SetWriteDeadline(t time.Time) error
}

// GroupConfig is a Group's bounds and its owner's state.
type GroupConfig struct {
	// Timeout bounds each write: the deadline is moved only when less
	// than Timeout of it is left, to Timeout and a half from now, so a
	// write always has at least Timeout and at most half as much again,
	// and back-to-back writes do not each pay for a deadline.
	Timeout time.Duration
	// MaxQueued bounds the bytes queued behind the writer: past it a
	// message waits for room (one message is always accepted into an
	// empty queue, whatever its size).
	MaxQueued int
	// Done is closed once the owner has stopped; Stopped then says why,
	// and every Write returns that.
	Done    <-chan struct{}
	Stopped func() error
	// Fail is called with a write's failure. It must stop the owner
	// (close Done): nothing may follow a half-written message.
	Fail func(error)
}

// Group is a group-commit writer of whole messages (frames, lines) with
// no goroutine of its own: the writer is a token passed between callers.
// A caller that finds it free writes its own message at once; one that
// finds it held appends its message to the queue and returns, and the
// holder writes everything queued, in order, before letting go. So N
// concurrent callers cost far fewer than N write system calls, and a lone
// caller no hand-over at all.
//
// Concurrency: Write may be called from any number of goroutines.
//
// Bounds: see GroupConfig.
type Group struct {
	sink Sink
	cfg  GroupConfig

	mu    sync.Mutex
	busy  bool
	q     []byte        // messages queued behind the holder
	spare []byte        // the previous round's buffer, reused
	room  chan struct{} // closed when the holder takes q; nil unless someone waits
	dl    time.Time     // the deadline in force; the holder's alone
}

// NewGroup returns a Group writing to sink.
func NewGroup(sink Sink, cfg GroupConfig) *Group {
	return &Group{sink: sink, cfg: cfg}
}

// Write writes msg, or queues it behind the holder, in order with every
// other message. It returns once msg is written or queued. When the queue
// is full it waits for room, bounded by ctx, if wait is set, and
// otherwise returns ErrNoRoom. Once the owner has stopped it returns
// Stopped's error; a write that fails calls Fail and returns the same.
//
// gather says other messages may be about to be written (the caller
// knows of other calls in flight): if it takes the writer it first
// yields its processor once, so that callers already runnable queue
// behind it and go out in the same write. With one processor each would
// otherwise find the writer free and write alone, waking the reader once
// per message; a lone caller does not yield.
func (g *Group) Write(ctx context.Context, msg []byte, wait, gather bool) error {
	g.mu.Lock()
	for g.busy && len(g.q) > 0 && len(g.q)+len(msg) > g.cfg.MaxQueued {
		if !wait {
			g.mu.Unlock()
			return ErrNoRoom
		}
		if g.room == nil {
			g.room = make(chan struct{})
		}
		room := g.room
		g.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.cfg.Done:
			return g.cfg.Stopped()
		}
		g.mu.Lock()
	}
	select {
	case <-g.cfg.Done:
		g.mu.Unlock()
		return g.cfg.Stopped()
	default:
	}
	if g.busy {
		g.q = append(g.q, msg...)
		g.mu.Unlock()
		return nil
	}
	g.busy = true
	g.mu.Unlock()
	var taken []byte
	if gather {
		runtime.Gosched()
		g.mu.Lock()
		if len(g.q) > 0 {
			// This message first, then those queued while it yielded,
			// in one buffer: the spare is the holder's alone.
			taken = append(append(g.spare[:0], msg...), g.q...)
			msg, g.spare = taken, nil
			g.q = g.q[:0]
			if cap(g.q) > g.cfg.MaxQueued {
				g.q = nil // one huge message does not stay pinned
			}
			g.roomLocked()
		}
		g.mu.Unlock()
	}
	for {
		if err := g.out(msg); err != nil {
			// The token is never given back: nothing may follow a
			// half-written message.
			g.cfg.Fail(err)
			return g.cfg.Stopped()
		}
		g.mu.Lock()
		if taken != nil && cap(taken) <= g.cfg.MaxQueued {
			g.spare = taken[:0]
		}
		if len(g.q) == 0 {
			g.busy = false
			g.mu.Unlock()
			return nil
		}
		taken, g.q, g.spare = g.q, g.spare, nil
		g.roomLocked()
		g.mu.Unlock()
		msg = taken
	}
}

// roomLocked wakes the callers waiting for room: the queue was taken.
func (g *Group) roomLocked() {
	if g.room != nil {
		close(g.room)
		g.room = nil
	}
}

// out writes b under the write deadline, moving it as GroupConfig.Timeout
// says. A sink that cannot take a deadline (it is closed, and the write
// fails; or it has none) is written without one. Only the holder calls
// it.
func (g *Group) out(b []byte) error {
	now := time.Now()
	if g.dl.Sub(now) < g.cfg.Timeout {
		g.dl = now.Add(g.cfg.Timeout + g.cfg.Timeout/2)
		_ = g.sink.SetWriteDeadline(g.dl)
	}
	_, err := g.sink.Write(b)
	return err
}
