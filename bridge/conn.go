package bridge

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capbridge/capbridge/bridge/internal/capserver"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/truncate"
)

// callConn is one connection on the call socket: a jailed program's.
//
// One goroutine, the reader, reads its frames for its whole life: it
// answers cancels and refusals itself and hands each call it admits to
// the bridge's workers (workerPool), which run it and write its reply, so
// a cancel or a further call is read at once while calls run. The reader
// never runs a call, so its stack stays small and an idle connection
// holds that one goroutine; the workers, whose stacks have grown through
// the call path, are shared by every connection and kept between calls,
// so a call starts no goroutine and grows no stack. At most
// max_conn_inflight calls run. The last of the reader and the calls to
// end, after reading has ended, closes the connection.
//
// The calls in flight live in one map behind mu; each is retired exactly
// once, by the worker that ran it, which removes its id before sending the
// reply so that a client reusing the id after the reply is never refused.
type callConn struct {
	b     *Bridge
	sc    *capserver.Conn
	nc    net.Conn // sc's connection, for stopReading
	peer  PeerCred
	grant *Grant
	// ctx is the connection's lifetime, under the grant's; it ends with
	// the grant's cause, or errDisconnected when reading ends.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	inflight map[uint64]context.CancelCauseFunc
	ended    bool // reading has ended
	// running counts the reader, until reading ends, and the calls whose
	// reply is not yet sent; the one that takes it to zero calls finish.
	running int
	// idleTimer ends the connection once it has had no call in flight
	// for idle_timeout. It is never stopped or moved per call: the last
	// call to retire records quietSince, and the timer, when it fires,
	// checks that and arms itself again for whatever is left.
	idleTimer  *time.Timer
	quietSince time.Time

	stop func() bool // unregisters stopReading from ctx
	done func()      // the caller's, called once the connection is closed
}

// serveCallConn runs one call-socket connection: the hello (within
// hello_timeout, its frame at most capserver.MaxHello), the authenticated
// budgets, then the calls. It calls done once the connection is closed and
// every call it started has replied: before it returns if the handshake
// fails, else from whichever of the reader and the calls ends last.
func (b *Bridge) serveCallConn(nc net.Conn, peer PeerCred, st *stranger, done func()) {
	sc := capserver.New(nc, capserver.Config{
		MaxFrame:         b.cfg.Bridge.MaxFrame,
		WriteTimeout:     b.cfg.Bridge.WriteTimeout,
		HandshakeTimeout: b.cfg.Bridge.HelloTimeout,
		FrameTimeout:     b.cfg.Bridge.FrameTimeout,
		Budget:           b.partial,
		Traffic:          b.metrics.trafficFunc(),
	})
	c := &callConn{b: b, sc: sc, nc: nc, peer: peer, inflight: map[uint64]context.CancelCauseFunc{}, done: done}
	// The client learns only bad_token; the audit trail gets the real
	// cause and the grant id the token named (never the token itself), so
	// an operator can see a revoked grant still being tried. Only a hello
	// whose token names a grant is audited: a connection that sends no
	// hello, or garbage, is counted in the refusal summary instead, so a
	// flood of those cannot flood the audit trail.
	var refusal error
	var tokenGrant string
	verified := false // the token's secret was the grant's
	_, err := sc.Handshake(b.ctx, func(h *capwire.HelloMsg) ([]string, error) {
		tokenGrant = grantIDOf(h.Token)
		g, err := b.grants.lookup(h.Token)
		if err != nil {
			refusal = err
			return nil, err
		}
		verified = true
		if g.PeerUID != nil && *g.PeerUID != peer.UID {
			refusal = errors.New("bridge: peer uid is not the grant's peer_uid")
			return nil, ErrBadToken
		}
		if err := b.authenticate(st, g.ID); err != nil {
			refusal = err
			return nil, &capwire.FatalMsg{Code: capwire.CodeBadToken, Message: "capbridge has as many connections open as it allows for this grant or user: " + strings.TrimPrefix(err.Error(), "bridge: ")}
		}
		c.grant = g
		return g.Servers(), nil
	})
	if err != nil {
		b.metrics.handshakeRefused(refusal, err)
		if refusal == nil {
			refusal = err
		}
		if !errors.Is(refusal, errEvicted) {
			b.refusals.hello.Add(1)
		}
		if tokenGrant != "" {
			b.refusedAudit(tokenGrant, verified).Str("event", "refused").Str("grant", tokenGrant).Int32("peer_pid", peer.PID).Uint32("peer_uid", peer.UID).Err(refusal).Msg("handshake failed")
		}
		sc.Close()
		done()
		return
	}
	if b.charge(c.grant, auditLineCost) {
		b.audit.Info().Str("event", "connect").Str("grant", c.grant.ID).Int32("peer_pid", peer.PID).Uint32("peer_uid", peer.UID).Msg("connected")
	}
	c.serve()
}

// errIdle ends a connection that had no call in flight for idle_timeout.
var errIdle = errors.New("bridge: connection idle")

// serve reads the connection's frames in this goroutine until reading
// ends: the client goes away, breaks the framing, stays idle for
// idle_timeout, or the grant or the bridge ends. Then the calls still
// running are cancelled, and the last of them, once each call's single
// reply was sent (or dropped, if the connection is gone), closes the
// connection (finish). serve returns when reading ends, which may be
// before the connection's calls do.
func (c *callConn) serve() {
	c.ctx, c.cancel = context.WithCancelCause(c.grant.Context())
	// Ending the grant (revoke, expiry) or the bridge closes only the
	// read side, which unblocks Read: the calls in flight, cancelled with
	// the grant's cause, must still send their revoked or shutting_down
	// denial (docs/capwire.md §5) before serveCallConn closes the
	// connection. Closing it outright here dropped those replies.
	c.stop = context.AfterFunc(c.ctx, c.stopReading)
	c.quietSince = time.Now()
	c.idleTimer = time.AfterFunc(c.b.cfg.Bridge.IdleTimeout, c.idleOut)
	c.running = 1
	c.read()
}

// finish closes the connection, once: the last of the reader and the
// calls to end calls it (release).
func (c *callConn) finish() {
	c.stop()
	c.idleTimer.Stop()
	c.sc.Close()
	c.done()
}

// stopReading unblocks the read loop for good. A connection that cannot
// close only its read side (net.Pipe) is closed.
func (c *callConn) stopReading() {
	if cr, ok := c.nc.(interface{ CloseRead() error }); ok {
		_ = cr.CloseRead()
		return
	}
	_ = c.nc.Close()
}

// idleOut ends the connection if it has had no call in flight for
// idle_timeout; otherwise it arms the timer again for the rest of it (the
// whole of it while calls are in flight: the last to retire starts the
// count again).
func (c *callConn) idleOut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	timeout := c.b.cfg.Bridge.IdleTimeout
	if len(c.inflight) > 0 {
		c.idleTimer.Reset(timeout)
		return
	}
	if rest := timeout - time.Since(c.quietSince); rest > 0 {
		c.idleTimer.Reset(rest)
		return
	}
	c.b.refusals.idle.Add(1)
	c.cancel(errIdle)
}

// read is the reader's loop: it reads frames until reading ends,
// answering cancels and refusals itself and handing each call it admits
// to the bridge's workers.
func (c *callConn) read() {
	maxInflight := c.b.cfg.Bridge.MaxConnInflight
	for {
		m, err := c.sc.Read()
		if err != nil {
			var we *capwire.WireError
			switch {
			case errors.As(err, &we) && !we.Fatal:
				c.reply(we.Denial(), false)
				continue
			case errors.As(err, &we):
				_ = c.sc.Fatal(we.Code, we.Msg)
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			default:
				c.b.log.Debug().Err(err).Str("grant", c.grant.ID).Msg("call connection ended")
			}
			c.end()
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
				callCtx, callCancel = context.WithCancelCause(c.ctx)
				c.inflight[m.ID] = callCancel
				c.running++
				c.grant.usage.begin()
			}
			c.mu.Unlock()
			switch {
			case dup:
				// The spec makes ids unique among a connection's calls in
				// flight; a second one cannot be told apart from the first.
				c.reply(&capwire.DeniedMsg{ID: m.ID, Denial: capwire.Denied{Code: capwire.CodeBadRequest, Message: "call id is already in flight on this connection"}}, false)
				m.Release()
			case full:
				c.reply(&capwire.DeniedMsg{ID: m.ID, Denial: capwire.Denied{Code: capwire.CodeOverloaded, Message: "this connection already has the most calls in flight that capbridge allows"}}, false)
				m.Release()
			default:
				c.b.workers.run(job{c: c, ctx: callCtx, m: m})
			}
		}
	}
}

// end is reading's end, called by the reader: the calls still running
// are cancelled (with the grant's or the bridge's cause if that is what
// closed the read side), and the connection is closed now if none is.
func (c *callConn) end() {
	c.cancel(errDisconnected)
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.release()
}

// release ends the reader's or one call's share of the connection; the
// last to end closes it.
func (c *callConn) release() {
	c.mu.Lock()
	c.running--
	last := c.running == 0
	c.mu.Unlock()
	if last {
		c.finish()
	}
}

// run executes one call, sends its one reply, and releases the call's
// share of the connection.
func (c *callConn) run(ctx context.Context, m *capserver.Call) {
	defer c.release()
	start := time.Now()
	tp, span := c.b.startCallTrace(m.Traceparent, m.Cap)
	server, hasPrefix := strings.CutPrefix(m.Cap, capwire.CapPrefix)
	op := m.Op
	var o outcome
	switch {
	case hasPrefix:
		o = c.b.call(ctx, callRequest{server: server, tool: m.Op, args: m.Args, timeoutMS: m.TimeoutMS, grant: c.grant, peer: c.peer, traceparent: tp, span: span})
	case m.Cap == capwire.CapBridge:
		o, server, op = c.b.meta(ctx, c.grant, c.peer, m.Op, m.Args, m.TimeoutMS, m.Traceparent)
	default:
		o = deny(capwire.CodeUnknownCapability, "capability "+quote(m.Cap)+" is neither an MCP server's (mcp.<server>) nor capbridge's")
	}
	m.Release()
	c.mu.Lock()
	cancel := c.inflight[m.ID]
	delete(c.inflight, m.ID)
	others := len(c.inflight) > 0
	if !others {
		c.quietSince = time.Now()
	}
	c.mu.Unlock()
	cancel(nil)
	took := time.Since(start)
	account(c.grant, o, took)
	sent := c.send(m.ID, o, others)
	if o.denial == nil && sent.denial != nil {
		// The result could not be sent (too large for a frame): the
		// program was denied it.
		c.grant.usage.denied.Add(1)
	}
	c.b.auditCall(c.grant, c.peer, server, op, sent, took)
	c.grant.usage.end()
	endCallTrace(span, c.grant, server, op, &sent)
	// The reply is written (encoded, at least) and audited: nothing
	// holds the result's strings any more.
	o.free()
}

// send writes the reply for id, turning a result too large for a frame
// into a result_too_large denial and a result that cannot be encoded at
// all into a result_malformed one. It returns the outcome the client was
// sent, which is what the audit line must record. With other calls in
// flight on the connection, replies answered together are gathered into
// one write (capserver.Conn.SendGathering).
//
// Sending needs no timer of its own: a reply waits only for room in the
// connection's bounded queue or for a write, and every write carries the
// connection's deadline, whose expiry ends the connection and every wait.
func (c *callConn) send(id uint64, o outcome, others bool) outcome {
	if o.denial != nil {
		o.denial = c.reply(&capwire.DeniedMsg{ID: id, Denial: *o.denial}, others)
		return o
	}
	send := c.sc.Send
	if others {
		send = c.sc.SendGathering
	}
	msg := o.msg
	if msg == nil || &msg.Result != o.result {
		msg = &capwire.ResultMsg{Result: *o.result}
	}
	msg.ID = id
	err := send(context.Background(), msg)
	switch {
	case err == nil, errors.Is(err, capwire.ErrClosed):
		return o
	case errors.Is(err, capwire.ErrFrameTooLarge):
		o.denial = &capwire.Denied{Code: capwire.CodeResultTooLarge, Message: "the result is larger than a frame may be (" + strconv.Itoa(c.b.cfg.Bridge.MaxFrame) + " bytes)"}
	default:
		o.denial = &capwire.Denied{Code: capwire.CodeResultMalformed, Message: "capbridge could not encode the result: " + truncate.Ellipsis(err.Error(), 256)}
	}
	o.denial = c.reply(&capwire.DeniedMsg{ID: id, Denial: *o.denial}, others)
	return o
}

// reply sends a denial, gathered with other replies when others are in
// flight (capserver.Conn.SendGathering), and returns the denial the
// client was sent.
//
// Every call gets exactly one reply whatever its denial says: a denial
// that does not encode (text that is not UTF-8) is sent again sanitized,
// so no text from a client or a server can leave a call unanswered.
func (c *callConn) reply(d *capwire.DeniedMsg, gather bool) *capwire.Denied {
	c.b.metrics.denied(d.Denial.Code)
	send := c.sc.Send
	if gather {
		send = c.sc.SendGathering
	}
	err := send(context.Background(), d)
	// A failed send otherwise means the connection is gone; the client
	// then sees every unanswered call fail, which is the spec's rule for
	// a broken connection, so there is nothing more to do here.
	if err == nil || errors.Is(err, capwire.ErrClosed) {
		return &d.Denial
	}
	// The denial quoted text that is not UTF-8: send it again with that
	// text made valid. Should that fail too, only a code outside the
	// closed set, a defect in capbridge, is left to blame; the fixed
	// denial after it always encodes.
	c.b.log.Error().Err(err).Msg("a denial did not encode; sending it sanitized")
	safe := d.Denial
	safe.Message, safe.Path = strings.ToValidUTF8(safe.Message, "\uFFFD"), strings.ToValidUTF8(safe.Path, "\uFFFD")
	if err := send(context.Background(), &capwire.DeniedMsg{ID: d.ID, NoID: d.NoID, Denial: safe}); err != nil && !errors.Is(err, capwire.ErrClosed) {
		safe = capwire.Denied{Code: capwire.CodeBadRequest, Message: "capbridge could not encode its denial: " + truncate.Ellipsis(err.Error(), 256)}
		_ = send(context.Background(), &capwire.DeniedMsg{ID: d.ID, NoID: d.NoID, Denial: safe})
	}
	return &safe
}
