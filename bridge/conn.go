package bridge

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/capserver"
)

// callConn is one connection on the call socket: a jailed program's.
//
// One goroutine (serve) reads frames; each call runs in its own goroutine
// and answers through the ServerConn's serialized writer. The calls in
// flight live in one map behind one lock; each is retired exactly once, by
// the goroutine that ran it, which removes its id before sending the reply
// so that a client reusing the id after the reply is never refused.
type callConn struct {
	b     *Bridge
	sc    *capserver.Conn
	nc    *net.UnixConn // sc's connection, for CloseRead
	peer  PeerCred
	grant *Grant

	mu       sync.Mutex
	inflight map[uint64]context.CancelCauseFunc
	calls    sync.WaitGroup
}

// serveCallConn runs one call-socket connection to its end. It returns
// once the connection is closed and every call it started has replied.
func (b *Bridge) serveCallConn(nc *net.UnixConn) {
	sc := capserver.New(nc, capserver.Config{
		MaxFrame:     b.cfg.Bridge.MaxFrame,
		WriteTimeout: b.cfg.Bridge.WriteTimeout,
	})
	defer sc.Close()
	peer, err := peerCred(nc)
	if err != nil {
		b.log.Warn().Err(err).Msg("call socket: cannot read peer credentials; refusing the connection")
		_ = sc.Fatal(capwire.CodeBadToken, "capbridge could not identify this peer")
		return
	}
	uids := b.cfg.Bridge.AllowedUIDs
	c := &callConn{b: b, sc: sc, nc: nc, peer: peer, inflight: map[uint64]context.CancelCauseFunc{}}
	// The client learns only bad_token; the audit trail gets the real
	// cause and the grant id the token named (never the token itself), so
	// an operator can see a revoked grant still being tried.
	var refusal error
	var tokenGrant string
	_, err = sc.Handshake(b.ctx, func(h *capwire.HelloMsg) ([]string, error) {
		tokenGrant = grantIDOf(h.Token)
		// A peer outside allowed_uids is refused only once its hello is
		// read: refused and closed before, its write of the hello could
		// fail (EPIPE) and it would never read why.
		if len(uids) > 0 && !slices.Contains(uids, peer.UID) {
			refusal = errors.New("bridge: uid not in allowed_uids")
			return nil, &capwire.FatalMsg{Code: capwire.CodeBadToken, Message: "this user may not use capbridge's call socket"}
		}
		g, err := b.grants.lookup(h.Token)
		if err != nil {
			refusal = err
			return nil, err
		}
		if g.PeerUID != nil && *g.PeerUID != peer.UID {
			refusal = errors.New("bridge: peer uid is not the grant's peer_uid")
			return nil, ErrBadToken
		}
		c.grant = g
		return g.Servers(), nil
	})
	if err != nil {
		if refusal == nil {
			refusal = err
		}
		b.audit.Info().Str("event", "refused").Str("grant", tokenGrant).Int32("peer_pid", peer.PID).Uint32("peer_uid", peer.UID).Err(refusal).Msg("handshake failed")
		return
	}
	b.audit.Info().Str("event", "connect").Str("grant", c.grant.ID).Int32("peer_pid", peer.PID).Uint32("peer_uid", peer.UID).Msg("connected")
	c.serve()
}

// serve is the read loop. It ends when the client goes away, breaks the
// framing, or the grant or the bridge ends; then it cancels what is still
// running and waits for each call's single reply to be sent (or dropped,
// if the connection is gone).
func (c *callConn) serve() {
	ctx, cancel := context.WithCancelCause(c.grant.Context())
	defer func() {
		cancel(errDisconnected)
		c.calls.Wait()
	}()
	// Ending the grant (revoke, expiry) or the bridge closes only the
	// read side, which unblocks Read: the calls in flight, cancelled with
	// the grant's cause, must still send their revoked or shutting_down
	// denial (docs/capwire.md §5) before serveCallConn closes the
	// connection. Closing it outright here dropped those replies.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.CloseRead() })
	defer stop()
	maxInflight := c.b.cfg.Bridge.MaxConnInflight
	for {
		m, err := c.sc.Read()
		if err != nil {
			var we *capwire.WireError
			switch {
			case errors.As(err, &we) && !we.Fatal:
				c.reply(context.Background(), we.Denial())
				continue
			case errors.As(err, &we):
				_ = c.sc.Fatal(we.Code, we.Msg)
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			default:
				c.b.log.Debug().Err(err).Str("grant", c.grant.ID).Msg("call connection ended")
			}
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, errDisconnected) {
				cancel(cause)
			}
			return
		}
		switch m := m.(type) {
		case *capwire.CancelMsg:
			c.mu.Lock()
			if f, ok := c.inflight[m.ID]; ok {
				f(errCancelled)
			}
			c.mu.Unlock()
		case *capserver.Call:
			c.mu.Lock()
			_, dup := c.inflight[m.ID]
			full := len(c.inflight) >= maxInflight
			var callCtx context.Context
			if !dup && !full {
				var callCancel context.CancelCauseFunc
				callCtx, callCancel = context.WithCancelCause(ctx)
				c.inflight[m.ID] = callCancel
				c.calls.Add(1)
			}
			c.mu.Unlock()
			switch {
			case dup:
				// The spec makes ids unique among a connection's calls in
				// flight; a second one cannot be told apart from the first.
				c.reply(ctx, &capwire.DeniedMsg{ID: m.ID, Denial: capwire.Denied{Code: capwire.CodeBadRequest, Message: "call id is already in flight on this connection"}})
				m.Release()
			case full:
				c.reply(ctx, &capwire.DeniedMsg{ID: m.ID, Denial: capwire.Denied{Code: capwire.CodeOverloaded, Message: "this connection already has the most calls in flight that capbridge allows"}})
				m.Release()
			default:
				go c.run(callCtx, m)
			}
		}
	}
}

// run executes one call and sends its one reply.
func (c *callConn) run(ctx context.Context, m *capserver.Call) {
	defer c.calls.Done()
	start := time.Now()
	server, hasPrefix := strings.CutPrefix(m.Cap, capwire.CapPrefix)
	var o outcome
	if !hasPrefix {
		o = deny(capwire.CodeUnknownCapability, "capability "+quote(m.Cap)+" is not an MCP server capability (mcp.<server>)")
	} else {
		o = c.b.call(ctx, callRequest{server: server, tool: m.Op, args: m.Args, timeoutMS: m.TimeoutMS, grant: c.grant, peer: c.peer})
	}
	m.Release()
	c.mu.Lock()
	cancel := c.inflight[m.ID]
	delete(c.inflight, m.ID)
	c.mu.Unlock()
	cancel(nil)
	o = c.send(m.ID, o)
	c.b.auditCall(c.grant, c.peer, server, m.Op, o, time.Since(start))
}

// send writes the reply for id, turning a result too large for a frame
// into a result_too_large denial. It returns the outcome the client was
// sent, which is what the audit line must record.
func (c *callConn) send(id uint64, o outcome) outcome {
	if o.denial != nil {
		c.reply(context.Background(), &capwire.DeniedMsg{ID: id, Denial: *o.denial})
		return o
	}
	ctx, cancel := c.sendCtx()
	err := c.sc.Send(ctx, &capwire.ResultMsg{ID: id, Result: *o.result})
	cancel()
	if errors.Is(err, capwire.ErrFrameTooLarge) {
		o.denial = &capwire.Denied{Code: capwire.CodeResultTooLarge, Message: "the result is larger than a frame may be (" + strconv.Itoa(c.b.cfg.Bridge.MaxFrame) + " bytes)"}
		c.reply(context.Background(), &capwire.DeniedMsg{ID: id, Denial: *o.denial})
	}
	return o
}

// sendCtx bounds how long a reply may wait for room in the write queue.
// The writer's own deadline ends a connection whose reader has stalled;
// this only keeps a call goroutine from waiting longer than that. The
// caller cancels it as soon as Send returns, so a reply does not keep a
// timer and a context alive for the whole bound after it was queued.
func (c *callConn) sendCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*c.b.cfg.Bridge.WriteTimeout)
}

func (c *callConn) reply(_ context.Context, m capwire.Message) {
	// A failed send means the connection is gone; the client then sees
	// every unanswered call fail, which is the spec's rule for a broken
	// connection, so there is nothing more to do here.
	ctx, cancel := c.sendCtx()
	defer cancel()
	_ = c.sc.Send(ctx, m)
}
