package bridge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/interchange"
)

// The control plane speaks capwire's framing (a 4-byte big-endian length,
// then one MessagePack map) with its own envelopes, documented in
// docs/control.md. It is the operator's: the socket is mode 0600 and the
// peer must be capbridge's own user (or root). Requests on one connection
// are answered in order, one at a time; a harness keeps a connection open
// for its whole life or dials per request, as it likes.
const (
	ctlGrant   = "grant"
	ctlRevoke  = "revoke"
	ctlStatus  = "status"
	ctlFacade  = "facade"
	ctlCall    = "call"
	ctlGranted = "granted"
	ctlRevoked = "revoked"
	ctlError   = "error"

	// maxControlFrame bounds one control frame; a façade's source is the
	// largest thing sent (a few hundred KiB for a large server).
	maxControlFrame = 16 << 20
	// controlIdle ends a control connection that sends nothing this long.
	controlIdle = 5 * time.Minute
)

// ControlRequest is one request on the control socket. Which fields
// matter depends on T; the rest are left zero.
type ControlRequest struct {
	T  string `msgpack:"t"`
	ID uint64 `msgpack:"id"`

	// grant
	Servers map[string][]string `msgpack:"servers,omitempty"`
	TTLMS   uint64              `msgpack:"ttl_ms,omitempty"`
	PeerUID *uint32             `msgpack:"peer_uid,omitempty"`
	// revoke: a grant id or a token
	Grant string `msgpack:"grant,omitempty"`
	// facade, call
	Server string `msgpack:"server,omitempty"`
	Lang   string `msgpack:"lang,omitempty"`
	// call
	Tool      string             `msgpack:"tool,omitempty"`
	Args      msgpack.RawMessage `msgpack:"args,omitempty"`
	TimeoutMS uint64             `msgpack:"timeout_ms,omitempty"`
}

// ControlReply is the answer to one request, T naming its kind: granted,
// revoked, status, facade, error, or, for call, capwire's result or denied
// (the same map a jailed program receives, with the same fields).
type ControlReply struct {
	T  string `msgpack:"t"`
	ID uint64 `msgpack:"id"`

	Message string `msgpack:"message,omitempty"` // error

	Token     string `msgpack:"token,omitempty"` // granted
	GrantID   string `msgpack:"grant,omitempty"` // granted
	ExpiresMS int64  `msgpack:"expires_ms,omitempty"`

	// Found, Grants and Connections are pointers so that they are sent
	// whenever their reply kind carries them, zero included.
	Found *bool `msgpack:"found,omitempty"` // revoked

	ServerStatus []serverStatus `msgpack:"servers,omitempty"` // status
	Grants       *int           `msgpack:"grants,omitempty"`
	Connections  *int           `msgpack:"connections,omitempty"`

	Module  string `msgpack:"module,omitempty"` // facade
	Source  string `msgpack:"source,omitempty"`
	Surface string `msgpack:"surface,omitempty"`
	Listing string `msgpack:"listing_sha256,omitempty"`

	// call: the fields of capwire's result and denied envelopes.
	IsError    bool               `msgpack:"is_error,omitempty"`
	Content    []map[string]any   `msgpack:"content,omitempty"`
	Structured msgpack.RawMessage `msgpack:"structured,omitempty"`
	Truncated  bool               `msgpack:"truncated,omitempty"`
	Code       string             `msgpack:"code,omitempty"`
	Path       string             `msgpack:"path,omitempty"`
	RPCCode    int                `msgpack:"rpc_code,omitempty"`
}

func (b *Bridge) serveControlConn(nc *net.UnixConn) {
	defer nc.Close()
	peer, err := peerCred(nc)
	if err != nil || (int(peer.UID) != os.Getuid() && peer.UID != 0) {
		b.log.Warn().Err(err).Uint32("peer_uid", peer.UID).Msg("control socket: refusing a peer that is not capbridge's user")
		return
	}
	stop := context.AfterFunc(b.ctx, func() { nc.Close() })
	defer stop()
	fr := capwire.NewFrameReader(nc, maxControlFrame)
	var buf []byte
	for {
		_ = nc.SetReadDeadline(time.Now().Add(controlIdle))
		frame, err := fr.ReadFrame(buf[:0])
		if err != nil {
			return
		}
		buf = frame
		var req ControlRequest
		var reply []byte
		if err := decodeControl(frame, &req); err != nil {
			reply = encodeReply(&ControlReply{T: ctlError, Message: "malformed control request: " + err.Error()})
		} else {
			ctx, stop := b.ctx, func() {}
			if req.T == ctlCall {
				ctx, stop = hangupContext(b.ctx, nc)
			}
			reply = b.control(ctx, &req, peer)
			stop()
		}
		_ = nc.SetWriteDeadline(time.Now().Add(b.cfg.Bridge.WriteTimeout))
		if _, err := nc.Write(reply); err != nil {
			return
		}
	}
}

// hangupContext returns a context derived from parent that ends with
// errDisconnected when the control client hangs up, and a function that
// stops watching. A control call runs while nothing reads the connection
// (requests are answered one at a time), so a client that gives up on a
// call (capbridge call interrupted) would otherwise leave it running at
// the server until its timeout; issue 7: a client that disconnects
// cancels its in-flight calls. The watch polls for POLLHUP, which reads
// nothing, so a request the client sent ahead stays for the next
// ReadFrame.
func hangupContext(parent context.Context, nc *net.UnixConn) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	raw, err := nc.SyscallConn()
	if err != nil {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			hup := false
			cerr := raw.Control(func(fd uintptr) {
				// No event is asked for: POLLHUP and POLLERR come anyway,
				// and pending input does not make poll spin. POLLRDHUP is
				// not a hang-up: a client that half-closes after sending
				// its request (shutdown(SHUT_WR), nc -N) still reads the
				// reply. On a Unix socket POLLHUP means both directions
				// are shut, which a closed or dead client causes.
				p := []unix.PollFd{{Fd: int32(fd)}}
				if n, err := unix.Poll(p, 50); err == nil && n > 0 {
					hup = p[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
				}
			})
			if hup || cerr != nil {
				cancel(errDisconnected)
				return
			}
		}
	}()
	// Stopping does not wait for the watcher: it notices done within one
	// poll interval, and cancelling a context nobody uses is harmless.
	return ctx, func() { close(done); cancel(nil) }
}

// control answers one request and returns the whole reply frame. ctx
// bounds a call: it ends when the bridge stops or the client hangs up.
func (b *Bridge) control(ctx context.Context, req *ControlRequest, peer PeerCred) []byte {
	fail := func(format string, args ...any) []byte {
		return encodeReply(&ControlReply{T: ctlError, ID: req.ID, Message: fmt.Sprintf(format, args...)})
	}
	switch req.T {
	case ctlGrant:
		if req.TTLMS > uint64(MaxGrantTTL/time.Millisecond) {
			// Checked before the multiplication, which would wrap.
			return fail("ttl_ms %d is more than the %d a grant may live", req.TTLMS, MaxGrantTTL/time.Millisecond)
		}
		g, token, err := b.Grant(GrantSpec{Servers: req.Servers, TTL: time.Duration(req.TTLMS) * time.Millisecond, PeerUID: req.PeerUID})
		if err != nil {
			return fail("%v", err)
		}
		b.audit.Info().Str("event", "grant").Str("grant", g.ID).Strs("servers", g.Servers()).Time("expires", g.Expires).Msg("grant issued")
		return encodeReply(&ControlReply{T: ctlGranted, ID: req.ID, Token: token, GrantID: g.ID, ExpiresMS: g.Expires.UnixMilli()})
	case ctlRevoke:
		found := b.Revoke(req.Grant)
		id := grantIDOf(req.Grant)
		if id == "" && !strings.HasPrefix(req.Grant, tokenPrefix) {
			id = req.Grant // given as an id, which is public; a malformed token is never logged
		}
		b.audit.Info().Str("event", "revoke").Str("grant", clip(id, 64)).Bool("found", found).Msg("grant revoked")
		return encodeReply(&ControlReply{T: ctlRevoked, ID: req.ID, Found: &found})
	case ctlStatus:
		grants := b.grants.live()
		r := &ControlReply{T: ctlStatus, ID: req.ID, Grants: &grants}
		for _, name := range b.order {
			r.ServerStatus = append(r.ServerStatus, b.servers[name].status())
		}
		b.mu.Lock()
		conns := len(b.open)
		r.Connections = &conns
		b.mu.Unlock()
		return encodeReply(r)
	case ctlFacade:
		s, ok := b.servers[req.Server]
		if !ok {
			return fail("no server is called %q", req.Server)
		}
		if req.Lang != "" && req.Lang != "go" {
			return fail("no façade generator for language %q (this capbridge generates go)", req.Lang)
		}
		gen, err := s.facade()
		if err != nil {
			return fail("%s", unavailableMessage(err))
		}
		return encodeReply(&ControlReply{T: ctlFacade, ID: req.ID, Module: gen.ModuleName, Source: string(gen.Source), Surface: gen.Surface, Listing: gen.ListingSHA256})
	case ctlCall:
		start := time.Now()
		o := b.call(ctx, callRequest{server: req.Server, tool: req.Tool, args: req.Args, timeoutMS: req.TimeoutMS, peer: peer})
		var frame []byte
		if o.denial == nil {
			var err error
			frame, err = capwire.AppendFrame(nil, &capwire.ResultMsg{ID: req.ID, Result: *o.result}, maxControlFrame)
			if err != nil {
				// Audited as what the operator receives, not as the
				// result that could not be sent.
				o = deny(capwire.CodeResultTooLarge, "the result cannot be sent: "+err.Error())
			}
		}
		if o.denial != nil {
			var err error
			if frame, err = capwire.AppendFrame(nil, &capwire.DeniedMsg{ID: req.ID, Denial: *o.denial}, maxControlFrame); err != nil {
				frame = fail("the denial cannot be encoded: %v", err)
			}
		}
		b.auditCall(nil, peer, req.Server, req.Tool, o, time.Since(start))
		return frame
	default:
		return fail("unknown control request %q (known: grant, revoke, status, facade, call)", req.T)
	}
}

// decodeControl decodes one control frame into v. The frame is first
// checked by interchange's total, bounded converter: msgpack's reflective
// decoder trusts a map or array header's count when it allocates, so only
// a frame whose every count is backed by bytes actually present may reach
// it (a 16 MiB frame can then describe at most a few million elements).
func decodeControl(frame []byte, v any) error {
	var scratch [512]byte
	if _, err := interchange.AppendJSON(scratch[:0], frame); err != nil {
		return err
	}
	return msgpack.Unmarshal(frame, v)
}

func encodeReply(r *ControlReply) []byte {
	var buf bytes.Buffer
	buf.Write([]byte{0, 0, 0, 0})
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("msgpack")
	if err := enc.Encode(r); err != nil {
		// Every field is a plain value; this cannot fail.
		panic(fmt.Sprintf("bridge: encoding a control reply: %v", err))
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// ControlClient speaks the control plane. It is what the CLI uses; a
// harness written in Go may use it too. Not safe for concurrent use.
type ControlClient struct {
	c   net.Conn
	fr  *capwire.FrameReader
	seq uint64
}

// DialControl connects to the control socket at path.
func DialControl(ctx context.Context, path string) (*ControlClient, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("bridge: control socket %s: %w (is capbridge serve running?)", path, err)
	}
	return &ControlClient{c: c, fr: capwire.NewFrameReader(c, maxControlFrame)}, nil
}

// Close closes the connection.
func (cc *ControlClient) Close() error { return cc.c.Close() }

// Do sends req (its ID is set here) and returns the reply. An error
// reply is returned as an error. ctx bounds the whole exchange.
func (cc *ControlClient) Do(ctx context.Context, req *ControlRequest) (*ControlReply, error) {
	cc.seq++
	req.ID = cc.seq
	if d, ok := ctx.Deadline(); ok {
		_ = cc.c.SetDeadline(d)
	} else {
		_ = cc.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = cc.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	body, err := msgpack.Marshal(req)
	if err != nil {
		return nil, err
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	if _, err := cc.c.Write(append(frame, body...)); err != nil {
		return nil, fmt.Errorf("bridge: control: %w", err)
	}
	payload, err := cc.fr.ReadFrame(nil)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("bridge: control: %w", err)
	}
	var r ControlReply
	if err := decodeControl(payload, &r); err != nil {
		return nil, fmt.Errorf("bridge: control: malformed reply: %w", err)
	}
	if r.T == ctlError && (r.ID == req.ID || r.ID == 0) {
		// Id 0: the request could not be decoded far enough to name it.
		return nil, errors.New(r.Message)
	}
	if r.ID != req.ID {
		return nil, fmt.Errorf("bridge: control: reply for request %d, want %d", r.ID, req.ID)
	}
	return &r, nil
}
