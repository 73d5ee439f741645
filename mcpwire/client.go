package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/readside"
)

// Defaults for Config's bounds (docs/mcpwire.md lists them all).
const (
	defaultHandshakeTimeout = 60 * time.Second // npx cold starts are slow
	defaultCallIdleTimeout  = 60 * time.Second
	defaultCallMaxTimeout   = 10 * time.Minute
	defaultWriteTimeout     = 10 * time.Second
	defaultMaxInFlight      = 256
	defaultMaxPages         = 64
	defaultMaxTools         = bound.MaxTools
	defaultMaxStrayLines    = 1000
	defaultMaxStrayBytes    = 1 << 20
	// strayPreview caps how much of a stray stdout line is logged.
	strayPreview = 120
	// eofExitWait bounds how long the reader, having seen stdout end,
	// waits for the transport to report the server's exit so the death
	// reason can carry the exit status.
	eofExitWait = 2 * time.Second
	// readBufSize is the size of each read from the server's stdout.
	readBufSize = 64 << 10
	// maxPooledLine: line buffers that grew past this are not pooled, so
	// one 16 MiB call does not pin 16 MiB forever.
	maxPooledLine = 64 << 10
)

// Config configures a Client. The zero value of every bound means its
// default.
type Config struct {
	// ClientName and ClientVersion are sent as clientInfo (required by
	// MCP; empty means "capbridge" / "0").
	ClientName, ClientVersion string
	// Logger receives stray-output, server-request, notification and
	// lifecycle events; nil logs nothing.
	Logger *zerolog.Logger

	MaxLineBytes     int           // stdout line cap (bound.MaxMessage)
	HandshakeTimeout time.Duration // initialize round trip (60 s)
	CallIdleTimeout  time.Duration // per call, reset by progress (60 s)
	CallMaxTimeout   time.Duration // per call, never extended (10 min)
	WriteTimeout     time.Duration // a write to stdin stalled this long (to 1.5×; 10 s) is death
	MaxInFlight      int           // concurrent calls (256); more fail with ErrBusy
	MaxPages         int           // tools/list pages (64)
	MaxTools         int           // tools in one listing (bound.MaxTools, 16384)
	MaxStrayLines    int           // non-JSON-RPC stdout lines tolerated (1000)
	MaxStrayBytes    int           // ...and their bytes (1 MiB)

	// Era chooses how the client meets its server: EraAuto (the zero
	// value) probes with server/discover and falls back to initialize;
	// EraLegacy only initializes; EraModern refuses a legacy server.
	Era               Era
	DiscoverTimeout   time.Duration // the probe's wait for an answer (HandshakeTimeout)
	MaxServerRequests int           // server requests tolerated where the era forbids them (64)
}

func (c *Config) defaults() {
	defD := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defI := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	if c.ClientName == "" {
		c.ClientName = "capbridge"
	}
	if c.ClientVersion == "" {
		c.ClientVersion = "0"
	}
	defI(&c.MaxLineBytes, bound.MaxMessage)
	defD(&c.HandshakeTimeout, defaultHandshakeTimeout)
	defD(&c.CallIdleTimeout, defaultCallIdleTimeout)
	defD(&c.CallMaxTimeout, defaultCallMaxTimeout)
	defD(&c.WriteTimeout, defaultWriteTimeout)
	defI(&c.MaxInFlight, defaultMaxInFlight)
	defI(&c.MaxPages, defaultMaxPages)
	defI(&c.MaxTools, defaultMaxTools)
	defI(&c.MaxStrayLines, defaultMaxStrayLines)
	defI(&c.MaxStrayBytes, defaultMaxStrayBytes)
	// The probe may be a cold npx start's first message: a short
	// fixed wait would misread a slow modern server as legacy.
	defD(&c.DiscoverTimeout, c.HandshakeTimeout)
	defI(&c.MaxServerRequests, defaultMaxServerRequests)
}

// CallOptions tune one call; zero fields take the Config's values.
type CallOptions struct {
	// IdleTimeout ends the call if neither its response nor a progress
	// notification for it arrives in this long.
	IdleTimeout time.Duration
	// MaxTimeout ends the call this long after it started, progress or
	// not (the spec's "SHOULD always enforce a maximum timeout").
	MaxTimeout time.Duration
	// Abandoned, when set, is called (synchronously, before the call
	// returns) if the call is given up after its request was written:
	// the server got notifications/cancelled, but MCP cancellation is
	// advisory and the server may still be working. answered is closed
	// when the server's late response for the call arrives, when the
	// client dies or is closed, or when the client stops tracking it:
	// at most Config.MaxInFlight abandoned calls are remembered and the
	// oldest is forgotten (its channel closed) beyond that. An owner that
	// bounds a server's concurrent work keeps the call's slot until
	// answered closes, with its own time limit.
	Abandoned func(answered <-chan struct{})
	// Traceparent, when not "", is the W3C trace context of the caller's
	// span for this call (a valid version-00 traceparent; the caller
	// checks it). The tools/call request carries it as
	// _meta.traceparent, the convention of MCP's SEP-414, and, over
	// Streamable HTTP, as the traceparent header too (W3C Trace Context
	// §3). A legacy HTTP+SSE message may share its POST with others, so
	// it carries it in _meta only.
	Traceparent string

	// task is the "task" member CallToolTask adds to tools/call.
	task []byte
}

// Client is an MCP client over one Conn. It is live from a successful
// Connect (or Start) until it dies; death is final and idempotent.
//
// All methods are safe for concurrent use; any number of calls may be in
// flight at once (up to Config.MaxInFlight), each bounded by its own
// context, idle timeout and maximum timeout. The client owns the Conn:
// Close (or death) shuts the server down. The owner must call Close
// exactly to release resources, even after death.
type Client struct {
	// car carries the messages: a Conn's byte stream or Streamable HTTP
	// (carrier.go). Set before the first request.
	car  carrier
	cfg  Config
	log  zerolog.Logger
	init *InitializeResult
	m    modern // the era and the modern era's state (era.go)

	// mu guards the in-flight and reader state below. Every call is
	// retired exactly once: whoever removes it from calls (the reader
	// with its response, its own waiter on timeout or cancel, or die)
	// settles it.
	mu     sync.Mutex
	calls  map[int64]*call
	nextID int64
	dead   *DeadError
	// abandoned holds the calls given up after their request was
	// written, each with the channel closed when the server's late
	// reply arrives; at most Config.MaxInFlight, oldest first in
	// abandonOrder (which may hold ids already answered, and is
	// compacted past 2×MaxInFlight).
	abandoned    map[int64]chan struct{}
	abandonOrder []int64

	deadc        chan struct{} // closed on death
	shutdownDone chan struct{} // closed when the transport's Shutdown returned
	toolsChanged chan struct{} // 1-buffered, coalescing
	batch        atomic.Bool   // 2025-03-26 negotiated: accept batches

	strayLines, strayBytes atomic.Int64

	// hdr is each tool's x-mcp-header annotations, from the last listing
	// over Streamable HTTP in the 2026-07-28 era (xheader.go); dropped
	// the tools that listing left out for an invalid annotation, with
	// why. relisting, a one-slot semaphore, makes the calls refused
	// -32020 on one listing share one re-listing (headerRetry); a call
	// waits for it no longer than its own deadline.
	hdr       atomic.Pointer[map[string][]headerParam]
	dropped   atomic.Pointer[map[string]string]
	relisting chan struct{}

	exit    Exit
	exitErr error
}

// call is one request in flight. Pooled: it is reused only after its
// settlement has been consumed by its waiter.
type call struct {
	// Waiter expires at the idle/max deadline (under Client.mu) and is
	// settled when the call is retired.
	readside.Waiter
	id   int64
	idle time.Duration
	hard time.Time
	// tool: a tools/call, whose result is copied out of the read
	// buffer as an owned Value (one string its texts share). Set
	// before the call is in Client.calls.
	tool   bool
	result jsonlex.Value // the result, owned (copied out of the read buffer)
	err    error
	// timer ends the call at its idle deadline over a carrier whose
	// caller does not read through a readside.Side (HTTP); progress
	// moves it as it moves the Waiter's expiry. Under Client.mu.
	timer *time.Timer
}

var callPool = sync.Pool{New: func() any { return new(call) }}

// linePool holds line buffers: requests being built, and JSON bodies of
// responses being read (the client copies whatever it keeps of a line it
// handles, so a body's buffer is free once the line is handled).
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Start spawns the server described by cmd and connects to it. ctx
// bounds only the handshake: the server lives until Close or death,
// never until ctx ends (tying the process to a start context is a known
// footgun of other clients).
func Start(ctx context.Context, cmd Command, cfg Config) (*Client, error) {
	if cmd.Logger == nil {
		cmd.Logger = cfg.Logger
	}
	conn, err := spawn(cmd)
	if err != nil {
		return nil, err
	}
	return Connect(ctx, conn, cfg)
}

// Connect performs the MCP handshake over conn: initialize (requesting
// the newest revision this client speaks, declaring capabilities {}),
// version check, notifications/initialized. It is for an embedder with
// its own Conn; Start is Connect over a spawned child. On failure the server is shut down and
// the error is a *DeadError carrying the reason and the stderr tail.
func Connect(ctx context.Context, conn Conn, cfg Config) (*Client, error) {
	c := newClient(cfg)
	c.car = newStream(c, conn)
	return c.connect(ctx)
}

func newClient(cfg Config) *Client {
	cfg.defaults()
	c := &Client{
		cfg: cfg, log: zerolog.Nop(),
		calls: make(map[int64]*call), abandoned: make(map[int64]chan struct{}),
		deadc:        make(chan struct{}),
		shutdownDone: make(chan struct{}), toolsChanged: make(chan struct{}, 1),
		relisting: make(chan struct{}, 1),
	}
	if cfg.Logger != nil {
		c.log = *cfg.Logger
	}
	return c
}

// connect runs the handshake over c's carrier; on failure the client is
// closed and the error is a *DeadError.
func (c *Client) connect(ctx context.Context) (*Client, error) {
	if err := c.handshake(ctx); err != nil {
		var de *DeadError
		if !errors.As(err, &de) {
			de = &DeadError{Reason: err, Stderr: c.car.tail()}
		}
		c.die(de.Reason)
		c.Close()
		return nil, de
	}
	return c, nil
}

// handshake meets the server in its era: the server/discover probe
// first (unless Config.Era is EraLegacy), then initialize when the
// server is not modern.
func (c *Client) handshake(ctx context.Context) error {
	if c.cfg.Era != EraLegacy {
		isModern, err := c.probe(ctx)
		if err != nil {
			return err
		}
		if isModern {
			if err := c.startModern(ctx); err != nil {
				return err
			}
			c.car.established(ctx)
			return nil
		}
	}
	c.m.era.Store(uint32(EraLegacy))
	if err := c.initialize(ctx); err != nil {
		return err
	}
	c.car.established(ctx)
	return nil
}

func (c *Client) initialize(ctx context.Context) error {
	// The declared client capabilities are exactly {}: no sampling (a
	// server must not spend our model), no roots (it learns nothing of
	// our filesystem), no elicitation (it must not question a human).
	params := append([]byte(`{"protocolVersion":"`+requestedVersion+`","capabilities":{},"clientInfo":{"name":`), nil...)
	params = jsonlex.AppendQuoted(params, c.cfg.ClientName)
	params = append(params, `,"version":`...)
	params = jsonlex.AppendQuoted(params, c.cfg.ClientVersion)
	params = append(params, `}}`...)
	hs := c.cfg.HandshakeTimeout
	// initialize MUST NOT be cancelled (lifecycle spec), so no
	// notifications/cancelled on timeout: the client just dies.
	raw, err := c.request(ctx, "initialize", params, Args{}, "", CallOptions{IdleTimeout: hs, MaxTimeout: hs}, false)
	if err != nil {
		return err
	}
	ir, err := mcpproto.DecodeInitializeResult(raw.Bytes())
	if err != nil {
		return err
	}
	if !versionSupported(ir.ProtocolVersion) {
		return &VersionError{Requested: requestedVersion, Offered: ir.ProtocolVersion}
	}
	c.init = ir
	c.car.negotiated(ir.ProtocolVersion)
	c.batch.Store(ir.ProtocolVersion == batchVersion)
	c.log.Info().Str("version", previewString(ir.ProtocolVersion)).Str("server_name", previewString(ir.ServerInfo.Name)).Str("server_version", previewString(ir.ServerInfo.Version)).Msg("mcpwire: initialized")
	return c.notify(ctx, "notifications/initialized", nil)
}

// Initialize returns the server's initialize result; nil in the modern
// era, which has none (see Discover).
func (c *Client) Initialize() *InitializeResult { return c.init }

// ToolsChanged delivers a signal (coalesced: at most one pending) each
// time the server sends notifications/tools/list_changed; the owner
// should re-run ListTools.
func (c *Client) ToolsChanged() <-chan struct{} { return c.toolsChanged }

// Done is closed when the client dies; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.deadc }

// Err returns the *DeadError once the client is dead, else nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead == nil {
		return nil
	}
	return c.dead
}

// Stray reports how many non-JSON-RPC lines (and their bytes) the
// server has written to stdout so far.
func (c *Client) Stray() (lines, bytes int64) { return c.strayLines.Load(), c.strayBytes.Load() }

// StderrTail returns a copy of the last bytes the server wrote to stderr
// (bounded by Command.StderrTailBytes), for an operator's status view.
func (c *Client) StderrTail() []byte { return c.car.tail() }

// Transport names how the client reaches its server: "stdio" (a child
// process), "streamable-http", "sse" (the legacy HTTP+SSE transport), or
// "stream" over an embedder's Conn.
func (c *Client) Transport() string { return c.car.kind() }

// Pid returns the server's process id (the leader of its process group),
// or 0 when the transport is not a process.
func (c *Client) Pid() int { return c.car.pid() }

// Close kills the client (in-flight calls settle with ErrClosed) and
// shuts the server down, returning the shutdown's evidence. Idempotent;
// bounded by the transport's shutdown waits.
func (c *Client) Close() (Exit, error) {
	c.endModern()
	c.die(ErrClosed)
	<-c.shutdownDone
	<-c.car.readersDone()
	return c.exit, c.exitErr
}

// ListTools lists every tool, following nextCursor for at most
// Config.MaxPages pages; a repeated cursor is ErrTooManyPages at once.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	var all []Tool
	seen := map[string]bool{}
	var params []byte
	if c.Era() == EraModern {
		params = c.metaParams(nil)
	}
	for page := 0; ; page++ {
		if page == c.cfg.MaxPages {
			return nil, fmt.Errorf("%w: more than %d pages", ErrTooManyPages, c.cfg.MaxPages)
		}
		raw, err := c.request(ctx, "tools/list", params, Args{}, "", CallOptions{}, true)
		if err != nil {
			return nil, err
		}
		if err := c.checkResult("tools/list", raw); err != nil {
			return nil, err
		}
		p, err := mcpproto.DecodeToolsPage(raw.Bytes())
		if err != nil {
			return nil, err
		}
		all = append(all, p.Tools...)
		if len(all) > c.cfg.MaxTools {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyTools, c.cfg.MaxTools)
		}
		if !p.HasNext {
			c.armRelist(p.TTLMs)
			return c.mirrored(all), nil
		}
		if seen[p.NextCursor] {
			return nil, fmt.Errorf("%w: cursor %q repeated on page %d", ErrTooManyPages, p.NextCursor, page+1)
		}
		seen[p.NextCursor] = true
		if c.Era() == EraModern {
			params = c.metaParams(jsonlex.AppendQuoted([]byte(`"cursor":`), p.NextCursor))
			continue
		}
		params = jsonlex.AppendQuoted([]byte(`{"cursor":`), p.NextCursor)
		params = append(params, '}')
	}
}

// Ping sends ping and waits for its (empty object) result. The modern
// era removed ping: there it is ErrNotInEra, and nothing is sent.
func (c *Client) Ping(ctx context.Context) error {
	if c.Era() == EraModern {
		return fmt.Errorf("%w: ping (%s)", ErrNotInEra, mcpproto.ModernVersion)
	}
	raw, err := c.request(ctx, "ping", nil, Args{}, "", CallOptions{}, true)
	if err != nil {
		return err
	}
	return mcpproto.DecodePingResult(raw.Bytes())
}

// CallTool calls a tool with args (JSONArgs or ConvertArgs, which say
// whether the bytes still need checking). A tool failure is a result with IsError set; an error
// return means the call itself failed: an *RPCError from the server,
// ErrTimeout, the context's error, a protocol fault, or a *DeadError.
// On timeout or cancellation the server gets notifications/cancelled
// and a late reply is ignored.
func (c *Client) CallTool(ctx context.Context, name string, args Args, opt CallOptions) (*CallToolResult, error) {
	deadline := time.Now().Add(c.maxTimeout(opt))
	seen := c.hdr.Load()
	raw, err := c.request(ctx, "tools/call", nil, args, name, opt, true)
	if err != nil && c.Era() == EraModern && isHeaderMismatch(err) && c.car.kind() == "streamable-http" {
		if left := time.Until(deadline); left > 0 {
			// The re-listing and the second attempt are this same call:
			// its hard deadline holds them both.
			rctx, cancel := context.WithDeadline(ctx, deadline)
			opt.MaxTimeout = left
			raw, err = c.headerRetry(rctx, name, args, opt, seen, err)
			cancel()
		}
	}
	if err != nil {
		if c.Era() == EraModern {
			err = requirement("tools/call", err)
		}
		return nil, err
	}
	return c.callResult(ctx, raw, deadline, nil)
}

// isHeaderMismatch reports whether err is the server's -32020
// HeaderMismatch.
func isHeaderMismatch(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Code == mcpproto.CodeHeaderMismatch
}

// headerRetry answers a -32020 HeaderMismatch to a tools/call over
// Streamable HTTP in 2026-07-28: the Mcp-Param headers mirrored from the
// listing this client saw (seen) do not match what the server expects,
// which means its tool's x-mcp-header annotations moved since. The tools
// are listed again, once for all the calls refused on that listing, the
// owner is told (ToolsChanged) so its own listing follows, and the call
// is sent once more: the server refuses a mismatched request before it
// runs it, so nothing is done twice. A second refusal is the call's
// answer; a failed re-listing leaves the first one.
func (c *Client) headerRetry(ctx context.Context, name string, args Args, opt CallOptions, seen *map[string][]headerParam, first error) (jsonlex.Value, error) {
	select {
	case c.relisting <- struct{}{}:
	case <-ctx.Done():
		return jsonlex.Value{}, first // another call's re-listing outlasted this call
	}
	if c.hdr.Load() == seen {
		if _, err := c.ListTools(ctx); err != nil {
			<-c.relisting
			c.log.Warn().Err(err).Str("tool", preview([]byte(name))).Msg("mcpwire: re-listing after a header mismatch failed")
			return jsonlex.Value{}, first
		}
		c.signalToolsChanged()
	}
	<-c.relisting
	c.log.Info().Str("tool", preview([]byte(name))).Msg("mcpwire: the server refused the call's headers (-32020); listed the tools again and sending it once more")
	return c.request(ctx, "tools/call", nil, args, name, opt, true)
}

// request performs one round trip. For tools/call the line is built from
// name and args; for other methods from params. It returns the
// result, validated and owned by the caller.
func (c *Client) request(ctx context.Context, method string, params []byte, args Args, name string, opt CallOptions, cancellable bool) (jsonlex.Value, error) {
	idle, maxT := opt.IdleTimeout, opt.MaxTimeout
	if idle <= 0 {
		idle = c.cfg.CallIdleTimeout
	}
	if maxT <= 0 {
		maxT = c.cfg.CallMaxTimeout
	}
	if idle > maxT {
		idle = maxT
	}
	cl := callPool.Get().(*call)
	now := time.Now()
	c.mu.Lock()
	switch {
	case c.dead != nil:
		err := c.dead
		c.mu.Unlock()
		callPool.Put(cl)
		return jsonlex.Value{}, err
	case len(c.calls) >= c.cfg.MaxInFlight:
		c.mu.Unlock()
		callPool.Put(cl)
		return jsonlex.Value{}, fmt.Errorf("%w (%d)", ErrBusy, c.cfg.MaxInFlight)
	}
	id := int64(discoverID)
	if method != "server/discover" {
		c.nextID++
		id = c.nextID
	}
	cl.id, cl.idle, cl.hard = id, idle, now.Add(maxT)
	cl.tool = method == "tools/call"
	cl.ExpireLocked(now.Add(idle), idle/4)
	c.calls[id] = cl
	// Other calls in flight: their lines may be about to be written too.
	gather := len(c.calls) > 1
	c.mu.Unlock()

	bp := linePool.Get().(*[]byte)
	var line []byte
	var err error
	if method == "tools/call" {
		line, err = appendCallTool((*bp)[:0], id, name, args, c.callMeta(), opt.task, opt.Traceparent)
	} else {
		line = appendRequest((*bp)[:0], id, method, params)
	}
	sent, why := false, err
	if err == nil {
		ob := outbound{method: method, name: name, args: args}
		if method == "tools/call" {
			copy(ob.traceparent[:], opt.Traceparent) // its shape checked by appendCallTool
		}
		sent, why = c.car.roundTrip(ctx, cl, ob, line, gather)
	}
	if cap(line) <= maxPooledLine {
		*bp = line[:0]
		linePool.Put(bp)
	}
	if !sent {
		if c.take(id) == cl { // still ours: nothing reached the server
			return c.finish(cl, why)
		}
		return c.finish(cl, nil) // settled concurrently (death)
	}
	if why == nil {
		return c.finish(cl, nil)
	}
	if !cancellable {
		if c.take(id) != cl {
			// The response (or death) won the race: honour it.
			return c.finish(cl, nil)
		}
		return c.finish(cl, fmt.Errorf("mcpwire: %s: %w", method, why))
	}
	answered, ours := c.abandon(id, cl)
	if !ours {
		return c.finish(cl, nil) // the response (or death) won the race
	}
	if c.car.cancels() {
		c.sendCancelled(id, why)
	}
	if opt.Abandoned != nil {
		opt.Abandoned(answered)
	}
	return c.finish(cl, fmt.Errorf("mcpwire: %s: %w", method, why))
}

// finish consumes a retired call's settlement, returns it to the pool and
// yields (result, error); an override error wins.
func (c *Client) finish(cl *call, override error) (jsonlex.Value, error) {
	cl.Reset() // retired, so nothing else touches it
	res, err := cl.result, cl.err
	cl.result, cl.err = jsonlex.Value{}, nil
	callPool.Put(cl)
	if override != nil {
		return jsonlex.Value{}, override
	}
	return res, err
}

// take removes the live call with this id and marks it retired, or
// returns nil if no such call is in flight. A waiter giving up may have
// been the one woken to read next, so the reader is re-elected.
func (c *Client) take(id int64) *call {
	c.mu.Lock()
	cl := c.calls[id]
	if cl != nil {
		cl.SettleLocked()
		delete(c.calls, id)
		c.car.electLocked()
	}
	c.mu.Unlock()
	return cl
}

// abandon is take for a waiter giving up on a written call: in the same
// critical section it records id as abandoned, so a late reply cannot
// slip between the two unseen. It reports false (and records nothing)
// if the call was already settled. Past MaxInFlight entries the oldest
// is forgotten and its channel closed; after death the channel is
// closed at once.
func (c *Client) abandon(id int64, cl *call) (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls[id] != cl {
		return nil, false
	}
	cl.SettleLocked()
	delete(c.calls, id)
	c.car.electLocked()
	ch := make(chan struct{})
	if c.dead != nil {
		close(ch)
		return ch, true
	}
	for len(c.abandoned) >= c.cfg.MaxInFlight {
		old := c.abandonOrder[0]
		c.abandonOrder = c.abandonOrder[1:]
		if och, ok := c.abandoned[old]; ok {
			delete(c.abandoned, old)
			close(och)
		}
	}
	if len(c.abandonOrder) >= 2*c.cfg.MaxInFlight {
		live := make([]int64, 0, len(c.abandoned)+1)
		for _, a := range c.abandonOrder {
			if _, ok := c.abandoned[a]; ok {
				live = append(live, a)
			}
		}
		c.abandonOrder = live
	}
	c.abandoned[id] = ch
	c.abandonOrder = append(c.abandonOrder, id)
	return ch, true
}

// answerAbandoned closes the answered channel of abandoned call id, if
// it is one, reporting whether it was.
func (c *Client) answerAbandoned(id int64) bool {
	c.mu.Lock()
	ch, ok := c.abandoned[id]
	if ok {
		delete(c.abandoned, id)
		close(ch)
	}
	c.mu.Unlock()
	return ok
}

// settle retires call id with its outcome and wakes its waiter; a reply
// for no call in flight reports false.
func (c *Client) settle(id int64, result jsonlex.Value, err error) bool {
	c.mu.Lock()
	cl := c.calls[id]
	if cl == nil {
		c.mu.Unlock()
		return false
	}
	delete(c.calls, id)
	cl.result, cl.err = result, err
	cl.SettleLocked()
	c.mu.Unlock()
	return true
}

// isToolCall reports whether id is a tools/call in flight. Ids are never
// reused, so the answer holds until the call is settled.
func (c *Client) isToolCall(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Under mu: once the call is settled its struct goes back to the
	// pool, and the next call to take it sets tool under mu.
	cl := c.calls[id]
	return cl != nil && cl.tool
}

// sendCancelled tells the server to stop a call we gave up on: best
// effort, never holding the caller past a write the transport bounds by
// WriteTimeout (sendAside).
func (c *Client) sendCancelled(id int64, why error) {
	reason := "cancelled"
	if errors.Is(why, ErrTimeout) || errors.Is(why, context.DeadlineExceeded) {
		reason = "timed out"
	}
	p := strconv.AppendInt([]byte(`{"requestId":`), id, 10)
	p = append(p, `,"reason":"`+reason+`"}`...)
	c.car.sendAside(outbound{method: "notifications/cancelled"}, appendNotification(nil, "notifications/cancelled", p))
}

func (c *Client) notify(ctx context.Context, method string, params []byte) error {
	return c.car.send(ctx, outbound{method: method}, appendNotification(nil, method, params))
}

// die makes the client dead with reason: latched once, every in-flight
// call settles with the *DeadError at once, and the server is shut down
// in the background. Later calls fail fast with the same error.
func (c *Client) die(reason error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return
	}
	c.dead = &DeadError{Reason: reason, Stderr: c.car.tail()}
	for id, cl := range c.calls {
		cl.err = c.dead
		delete(c.calls, id)
		cl.SettleLocked()
	}
	for id, ch := range c.abandoned {
		delete(c.abandoned, id)
		close(ch)
	}
	c.abandonOrder = nil
	c.car.endLocked()
	c.mu.Unlock()
	close(c.deadc)
	if !errors.Is(reason, ErrClosed) {
		c.log.Error().Err(reason).Msg("mcpwire: server connection died")
	}
	go func() {
		c.exit, c.exitErr = c.car.shutdown()
		close(c.shutdownDone)
	}()
}
