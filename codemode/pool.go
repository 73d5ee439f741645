package codemode

import (
	"context"
	"sync"
	"time"

	"github.com/capbridge/capbridge/jail"
)

// A pool keeps up to size warm jails of one language ready: built, the
// runtime started and the client loaded, waiting for a program. A run
// takes one if one is ready (and runs cold otherwise); every jail runs one
// program and is never reused, and the pool makes another in the
// background. The filler stops with the Runner's context, closing what it
// holds.
type pool struct {
	rt    *runtimeInfo
	jail  *jail.Config
	ready chan *jail.Warm
	wake  chan struct{}
	done  chan struct{}
	// lastErr is why the last prestart failed, for a caller's log.
	mu      sync.Mutex
	lastErr error
}

// retryWarm is how long the filler waits after a failed prestart: a
// runtime that cannot start warm keeps running cold, without a busy loop.
const retryWarm = 5 * time.Second

// startPool starts a pool of size for rt, whose jails bind callSocket.
func startPool(ctx context.Context, rt *runtimeInfo, jc *jail.Config, callSocket string, size int) *pool {
	p := &pool{rt: rt, jail: jc, ready: make(chan *jail.Warm, size), wake: make(chan struct{}, 1), done: make(chan struct{})}
	static := rt.base(callSocket)
	static.Env = append(static.Env, "CAPBRIDGE_WARM=1")
	go p.fill(ctx, static)
	p.wake <- struct{}{}
	return p
}

func (p *pool) fill(ctx context.Context, static *jail.Program) {
	defer close(p.done)
	defer func() {
		for {
			select {
			case w := <-p.ready:
				w.Close()
			default:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		for len(p.ready) < cap(p.ready) && ctx.Err() == nil {
			w, err := p.jail.Prestart(static)
			p.mu.Lock()
			p.lastErr = err
			p.mu.Unlock()
			if err != nil {
				t := time.NewTimer(retryWarm)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				continue
			}
			p.ready <- w
		}
	}
}

// take returns a warm jail, or nil when none is ready; either way the
// filler makes more.
func (p *pool) take() *jail.Warm {
	defer func() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}()
	select {
	case w := <-p.ready:
		return w
	default:
		return nil
	}
}
