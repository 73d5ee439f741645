package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
)

// A program may start a call and collect its result later (the capbridge
// capability's start and collect): the call runs in the background under
// the program's grant, with the same checks, admission, deadlines and
// audit as any call, and lives as long as the grant, whatever happens to
// the connection that started it. A task tool's long wait is the usual
// reason.

// maxStartedPerGrant bounds the calls one grant has started and not yet
// collected; each holds its outcome until collected or the grant ends.
const maxStartedPerGrant = 16

// startedCalls holds the started calls of every grant. Its zero value is
// ready; it is safe for concurrent use.
type startedCalls struct {
	mu      sync.Mutex
	byGrant map[*Grant]map[string]*startedCall
}

// startedCall is one call running or done in the background: done closes
// once o holds its outcome.
type startedCall struct {
	done chan struct{}
	o    outcome
	stop context.CancelCauseFunc
}

type startArgs struct {
	Server    string             `msgpack:"server"`
	Tool      string             `msgpack:"tool"`
	Args      msgpack.RawMessage `msgpack:"args"`
	TimeoutMS uint64             `msgpack:"timeout_ms"`
}

type handleArgs struct {
	Handle string `msgpack:"handle"`
}

// start runs the call a in the background under grant g and answers its
// handle at once (text, and structured {"handle": h}). The call has a
// span of its own (traces on), child of the start's traceparent, from
// now until it ends; its MCP request's is under it.
func (b *Bridge) start(g *Grant, peer PeerCred, a startArgs, traceparent string) outcome {
	if g == nil {
		return deny(capwire.CodeNotGranted, "only a program holding a grant may start calls")
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return deny(capwire.CodeServerUnavailable, "capbridge could not make a handle: "+err.Error())
	}
	h := hex.EncodeToString(id[:])
	ctx, stop := context.WithCancelCause(g.Context())
	sc := &startedCall{done: make(chan struct{}), stop: stop}
	t := &b.started
	t.mu.Lock()
	if len(t.byGrant[g]) >= maxStartedPerGrant {
		t.mu.Unlock()
		stop(nil)
		return deny(capwire.CodeOverloaded, "this grant already has "+strconv.Itoa(maxStartedPerGrant)+" started calls not collected; collect or drop one first")
	}
	if t.byGrant == nil {
		t.byGrant = map[*Grant]map[string]*startedCall{}
	}
	if t.byGrant[g] == nil {
		t.byGrant[g] = map[string]*startedCall{}
		// The grant's end takes its started calls with it.
		context.AfterFunc(g.Context(), func() {
			t.mu.Lock()
			delete(t.byGrant, g)
			t.mu.Unlock()
		})
	}
	t.byGrant[g][h] = sc
	t.mu.Unlock()
	// The frame a.Args came in goes back to its pool when this returns.
	args := bytes.Clone(a.Args)
	tp, span := b.startCallTrace(traceparent, capwire.CapPrefix+a.Server)
	// Counted as running under the grant until accounted, as a call on
	// a connection is: a revoke waits for it, so its totals have it.
	g.usage.begin()
	b.startedCalls.Go(func() {
		defer stop(nil)
		begun := time.Now()
		o := b.call(ctx, callRequest{server: a.Server, tool: a.Tool, args: args, timeoutMS: a.TimeoutMS, grant: g, peer: peer, traceparent: tp, span: span})
		// Kept until collected, perhaps by two collects at once, each
		// of which frees what it answers and sends it under its own id:
		// its memory must never be given back, nor its message shared.
		o.from, o.msg = nil, nil
		sc.o = o
		took := time.Since(begun)
		account(g, sc.o, took)
		g.usage.end()
		close(sc.done)
		b.auditCall(g, peer, a.Server, a.Tool, sc.o, took)
		endCallTrace(span, g, a.Server, a.Tool, &sc.o)
	})
	o := textOutcome(h)
	mp, _ := msgpack.Marshal(map[string]string{"handle": h})
	o.result.Structured = mp
	return o
}

// collect waits, within ctx and timeoutMS (0: until the call ends, which
// its own deadline bounds), for the started call h of grant g and answers
// its outcome, forgetting it; a wait that ends first leaves the call
// running, to collect again.
func (b *Bridge) collect(ctx context.Context, g *Grant, h string, timeoutMS uint64) outcome {
	sc, o, ok := b.startedCall(g, h)
	if !ok {
		return o
	}
	if timeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(timeoutMS)*time.Millisecond, errCallTimeout)
		defer cancel()
	}
	select {
	case <-sc.done:
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errCancelled) || errors.Is(context.Cause(ctx), errDisconnected) {
			return deny(capwire.CodeCancelled, "the collect was cancelled; the call goes on")
		}
		return b.ended(context.Cause(ctx), callRequest{server: "capbridge", tool: "collect"})
	}
	b.started.mu.Lock()
	delete(b.started.byGrant[g], h)
	b.started.mu.Unlock()
	return sc.o
}

// drop cancels the started call h of grant g and forgets it.
func (b *Bridge) drop(g *Grant, h string) outcome {
	sc, o, ok := b.startedCall(g, h)
	if !ok {
		return o
	}
	sc.stop(errCancelled)
	b.started.mu.Lock()
	delete(b.started.byGrant[g], h)
	b.started.mu.Unlock()
	return textOutcome("dropped")
}

// startedCall finds grant g's started call h, or the denial that says it
// has none.
func (b *Bridge) startedCall(g *Grant, h string) (*startedCall, outcome, bool) {
	b.started.mu.Lock()
	sc := b.started.byGrant[g][h]
	b.started.mu.Unlock()
	if sc == nil {
		o := deny(capwire.CodeBadArguments, "this grant started no call with handle "+quote(h)+" (or it was collected)")
		o.denial.Path = "/handle"
		return nil, o, false
	}
	return sc, outcome{}, true
}
