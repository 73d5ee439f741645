package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
)

// Era is the family of protocol revisions a Client speaks with its
// server. It is decided once, at Connect, and fixed for the life of the
// server process (the 2026-07-28 versioning rule: cache the era for the
// process's lifetime).
type Era uint32

const (
	// EraAuto (Config only) probes with server/discover and falls back to
	// initialize when the server is not modern. It is the zero value.
	EraAuto Era = iota
	// EraLegacy is the initialize handshake: revisions 2024-11-05 through
	// 2025-11-25. As a Config value it skips the probe.
	EraLegacy
	// EraModern is the stateless revision 2026-07-28: no handshake, the
	// client's revision, capabilities and identity in every request's
	// _meta. As a Config value it refuses a server that is not modern.
	EraModern
)

func (e Era) String() string {
	switch e {
	case EraLegacy:
		return "legacy"
	case EraModern:
		return "modern"
	}
	return "auto"
}

// Defaults for the modern era's bounds (docs/mcpwire.md).
const (
	defaultMaxServerRequests = 64
	// minRelist floors the re-list cadence a listing's ttlMs asks for, so
	// a server answering ttlMs 1 cannot make its owner re-list in a loop.
	minRelist = time.Second
	// discoverID is the probe's request id. Ids minted by the client
	// start at 1, so the probe never shares an id with a later request
	// and a late answer to it after the fallback matches nothing. 0 is
	// the first id of most SDK clients, so servers handle it.
	discoverID = 0
)

// Errors of the modern era.
var (
	// ErrInputRequired: a 2026-07-28 server answered a call with
	// resultType "input_required" (it wants elicitation, sampling or
	// roots first). This client declares no capabilities, so it cannot
	// supply the input; the call fails with an *InputRequiredError.
	ErrInputRequired = errors.New("mcpwire: server requires client input")
	// ErrNotInEra: the method does not exist in the era the server
	// speaks (ping in 2026-07-28).
	ErrNotInEra = errors.New("mcpwire: method does not exist in this protocol era")
)

// InputRequiredError is a call a 2026-07-28 server answered with
// resultType "input_required". Requests lists the keys of the server's
// inputRequests with each one's method (at most a few), for the caller's
// message.
type InputRequiredError struct {
	Method   string
	Requests []string
}

func (e *InputRequiredError) Error() string {
	s := "mcpwire: " + e.Method + ": the server requires client input this client cannot give (it declares no capabilities)"
	if len(e.Requests) > 0 {
		s += ": " + strings.Join(e.Requests, ", ")
	}
	return s
}

// Is makes every InputRequiredError match ErrInputRequired.
func (e *InputRequiredError) Is(target error) bool { return target == ErrInputRequired }

// RequirementError is a 2026-07-28 refusal that names what the server
// requires: -32020 (a header it needed did not match), -32021 (client
// capabilities it requires; Required is data.requiredCapabilities, raw)
// or -32022 (the protocol versions it supports, Supported). It unwraps
// to the server's *RPCError.
type RequirementError struct {
	Method    string
	RPC       *RPCError
	Required  []byte
	Supported []string
}

func (e *RequirementError) Error() string {
	s := "mcpwire: " + e.Method + ": "
	switch e.RPC.Code {
	case mcpproto.CodeMissingRequiredClientCapability:
		s += "the server requires client capabilities this client does not declare"
		if e.Required != nil {
			s += ": " + preview(e.Required)
		}
	case mcpproto.CodeUnsupportedProtocolVersion:
		s += "the server does not support protocol version " + mcpproto.ModernVersion
		if e.Supported != nil {
			s += "; it supports " + strings.Join(e.Supported, ", ")
		}
	default:
		s += "the server refused a request header (-32020 header mismatch)"
	}
	return s + " (" + e.RPC.Error() + ")"
}

// Unwrap exposes the server's error.
func (e *RequirementError) Unwrap() error { return e.RPC }

// requirement wraps a modern-era error code in a *RequirementError;
// other errors pass through.
func requirement(method string, err error) error {
	var rpc *RPCError
	if !errors.As(err, &rpc) {
		return err
	}
	switch rpc.Code {
	case mcpproto.CodeHeaderMismatch:
		return &RequirementError{Method: method, RPC: rpc}
	case mcpproto.CodeMissingRequiredClientCapability:
		return &RequirementError{Method: method, RPC: rpc, Required: mcpproto.RequiredCapabilities(rpc.Data)}
	case mcpproto.CodeUnsupportedProtocolVersion:
		sup, _, _ := mcpproto.UnsupportedVersion(rpc.Data)
		return &RequirementError{Method: method, RPC: rpc, Supported: sup}
	}
	return err
}

// DiscoverResult is the server's answer to server/discover
// (Client.Discover).
type DiscoverResult = mcpproto.DiscoverResult

// modern is a Client's era state. era is written once by the handshake
// (before Connect returns) but read by the reading side, which runs
// during the handshake, so it is atomic; disc and meta are written
// before any request that uses them and only read after.
type modern struct {
	era  atomic.Uint32 // Era; EraAuto while the probe is out
	disc *DiscoverResult
	// meta is the three reserved _meta members every modern request
	// carries, as `"k":v,"k":v,"k":v` (no braces), built once.
	meta []byte
	// callMeta is meta with the tasks extension declared, for tools/call.
	callMeta []byte

	// The subscriptions/listen stream: subID is its request id (0: none
	// open). It is not a call: no timeout, no in-flight slot.
	subID    atomic.Int64
	subAcked atomic.Bool

	serverRequests atomic.Int64 // requests a modern server sent (a fault)

	relistMu sync.Mutex
	relist   *time.Timer // ttlMs cadence; nil when none armed
	closed   bool        // under relistMu: no new timer after close
}

// Era reports the era the client speaks with its server.
func (c *Client) Era() Era { return Era(c.m.era.Load()) }

// Discover returns the server's server/discover answer in the modern
// era; nil in the legacy era, and nil in the modern era when the server
// answered the probe with -32022 instead.
func (c *Client) Discover() *DiscoverResult { return c.m.disc }

// ProtocolVersion is the revision in use: 2026-07-28 in the modern era,
// the negotiated one in the legacy era.
func (c *Client) ProtocolVersion() string {
	if c.Era() == EraModern {
		return mcpproto.ModernVersion
	}
	if c.init != nil {
		return c.init.ProtocolVersion
	}
	return ""
}

// ServerInfo is the server's identity: serverInfo of initialize, or
// _meta's serverInfo of server/discover (zero when it sent none).
func (c *Client) ServerInfo() Implementation {
	switch {
	case c.init != nil:
		return c.init.ServerInfo
	case c.m.disc != nil:
		return c.m.disc.ServerInfo
	}
	return Implementation{}
}

// ServerRequests reports how many JSON-RPC requests the server sent
// where the era forbids them (2026-07-28: "The server MUST NOT write
// JSON-RPC requests"); none was answered.
func (c *Client) ServerRequests() int64 { return c.m.serverRequests.Load() }

// buildMeta renders the three reserved members once.
func (c *Client) buildMeta() {
	b := jsonlex.AppendQuoted(nil, mcpproto.MetaProtocolVersion)
	b = append(b, ':')
	b = jsonlex.AppendQuoted(b, mcpproto.ModernVersion)
	b = append(b, ',')
	b = jsonlex.AppendQuoted(b, mcpproto.MetaClientCapabilities)
	info := jsonlex.AppendQuoted([]byte{','}, mcpproto.MetaClientInfo)
	info = append(info, `:{"name":`...)
	info = jsonlex.AppendQuoted(info, c.cfg.ClientName)
	info = append(info, `,"version":`...)
	info = jsonlex.AppendQuoted(info, c.cfg.ClientVersion)
	info = append(info, '}')
	// {} exactly, as in the legacy initialize: no sampling, roots or
	// elicitation. tools/call alone also declares the tasks extension
	// (SEP-2663), which lets the server answer it with a task handle,
	// followed to the result (followTask): the extension is declared per
	// request, and only tools/call may be answered with a task.
	c.m.meta = append(append(append([]byte(nil), b...), ":{}"...), info...)
	c.m.callMeta = append(append(append([]byte(nil), b...), `:{"extensions":{"`+mcpproto.TasksExtension+`":{}}}`...), info...)
}

// callMeta is the _meta members a tools/call carries in the client's era
// (nil in the legacy era): the other requests' meta, with the tasks
// extension declared.
func (c *Client) callMeta() []byte {
	if c.Era() == EraModern {
		return c.m.callMeta
	}
	return nil
}

// metaParams renders params {"_meta":{…}} plus rest (members without
// braces, may be empty).
func (c *Client) metaParams(rest []byte) []byte {
	p := append([]byte(`{"_meta":{`), c.m.meta...)
	p = append(p, '}')
	if len(rest) > 0 {
		p = append(p, ',')
		p = append(p, rest...)
	}
	return append(p, '}')
}

// probe sends server/discover and reports whether the server is modern.
// A DiscoverResult naming 2026-07-28, or -32022 whose data.supported
// names it, is modern; any other error, or no answer within
// DiscoverTimeout, is legacy (the fallback is keyed to no one error
// code, as the stdio binding requires). A modern server that cannot
// serve this client (versions we do not speak, capabilities it
// requires, a header mismatch) fails the handshake with the reason.
func (c *Client) probe(ctx context.Context) (bool, error) {
	c.buildMeta()
	dt := c.cfg.DiscoverTimeout
	raw, err := c.request(ctx, "server/discover", c.metaParams(nil), Args{}, "", CallOptions{IdleTimeout: dt, MaxTimeout: dt}, false)
	var rpc *RPCError
	switch {
	case err == nil:
	case errors.Is(err, ErrTimeout):
		if c.cfg.Era == EraModern {
			return false, err
		}
		c.log.Info().Dur("waited", dt).Msg("mcpwire: no answer to server/discover; speaking the legacy era")
		return false, nil
	case errors.As(err, &rpc):
		return c.probeRefused(rpc)
	case errors.Is(err, ErrAuthorization):
		// Refused for want of authorization: that says nothing of the
		// era, and initialize would only be refused too.
		return false, err
	case errors.Is(err, ErrHTTP):
		// Over HTTP a legacy server refuses the probe with an error
		// status and no modern JSON-RPC error (the Streamable HTTP
		// binding's fallback rule).
		if c.cfg.Era == EraModern {
			return false, err
		}
		c.log.Info().Err(err).Msg("mcpwire: server/discover refused over HTTP; speaking the legacy era")
		return false, nil
	default:
		return false, err // dead, or ctx ended
	}
	d, err := mcpproto.DecodeDiscoverResult(raw.Bytes())
	if err != nil && c.cfg.Era != EraModern && !hasMember(raw.Bytes(), "supportedVersions") {
		// A result that names no versions at all is no 2026-07-28
		// answer: a legacy server that answers every method it does not
		// know with an empty result (some mock and gateway servers do).
		// Meet it with initialize; a result that names versions and is
		// malformed still fails.
		c.log.Info().Msg("mcpwire: server/discover answered without supportedVersions; speaking the legacy era")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !d.Supports(mcpproto.ModernVersion) {
		if anyLegacy(d.SupportedVersions) && c.cfg.Era != EraModern {
			// A server that answers discover but speaks only revisions of
			// the initialize era (go-sdk v1.8.0 does): meet it there.
			c.log.Info().Strs("supported", d.SupportedVersions).Msg("mcpwire: server/discover names only initialize-era revisions; speaking the legacy era")
			return false, nil
		}
		return false, &VersionError{Requested: mcpproto.ModernVersion, Supported: d.SupportedVersions}
	}
	c.m.disc = d
	return true, nil
}

// probeRefused judges an error answer to the probe.
func (c *Client) probeRefused(rpc *RPCError) (bool, error) {
	switch rpc.Code {
	case mcpproto.CodeUnsupportedProtocolVersion:
		sup, _, ok := mcpproto.UnsupportedVersion(rpc.Data)
		switch {
		case !ok:
		case slicesContains(sup, mcpproto.ModernVersion):
			return true, nil
		case !anyLegacy(sup):
			// Modern, but in revisions this client does not speak:
			// falling back would only be refused again.
			return false, &VersionError{Requested: mcpproto.ModernVersion, Supported: sup}
		}
	case mcpproto.CodeMissingRequiredClientCapability, mcpproto.CodeHeaderMismatch:
		return false, requirement("server/discover", rpc)
	}
	if c.cfg.Era == EraModern {
		return false, fmt.Errorf("mcpwire: server/discover: %w", rpc)
	}
	c.log.Info().Int64("code", rpc.Code).Msg("mcpwire: server/discover refused; speaking the legacy era")
	return false, nil
}

// hasMember reports whether the JSON object obj has the member key.
func hasMember(obj []byte, key string) bool {
	found := false
	_ = jsonlex.EachMember(obj, func(k, _ []byte) error {
		found = found || jsonlex.KeyIs(k, key)
		return nil
	})
	return found
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func anyLegacy(sup []string) bool {
	for _, v := range sup {
		if versionSupported(v) {
			return true
		}
	}
	return false
}

// startModern completes the modern handshake: there is none on the
// wire, only the list_changed stream to open when the server offers it.
func (c *Client) startModern(ctx context.Context) error {
	c.m.era.Store(uint32(EraModern))
	info := c.ServerInfo()
	c.log.Info().Str("version", mcpproto.ModernVersion).Str("server_name", previewString(info.Name)).Str("server_version", previewString(info.Version)).Msg("mcpwire: speaking the modern era")
	if d := c.m.disc; d != nil && d.ToolsListChanged {
		return c.listen(ctx)
	}
	return nil
}

// listen opens the subscriptions/listen stream for tools/list_changed.
// The request is not a call: it stays open for the server's life, so it
// takes no in-flight slot and has no timeout; Close cancels it.
func (c *Client) listen(ctx context.Context) error {
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	c.m.subID.Store(id)
	params := c.metaParams([]byte(`"notifications":{"toolsListChanged":true}`))
	return c.car.listen(ctx, id, appendRequest(nil, id, "subscriptions/listen", params))
}

// modernResponse handles the answer to the listen request: the stream's
// end. The server ends it only when it stops the subscription; the
// ttlMs cadence, if any, still runs.
func (c *Client) modernResponse(m *mcpproto.Message) bool {
	id := c.m.subID.Load()
	if id == 0 || !m.ID.IsInt || m.ID.Int != id {
		return false
	}
	c.m.subID.Store(0)
	if m.Error != nil {
		c.log.Warn().Int64("code", m.Error.Code).Str("message", previewString(m.Error.Message)).Msg("mcpwire: subscriptions/listen refused; tools/list_changed will not arrive")
	} else {
		c.log.Info().Msg("mcpwire: server ended the subscriptions/listen stream")
	}
	return true
}

// modernNotification handles the notifications whose meaning the modern
// era changes; it reports false for the rest.
func (c *Client) modernNotification(m *mcpproto.Message) bool {
	if c.Era() != EraModern {
		return false
	}
	switch string(m.Method) {
	case "notifications/subscriptions/acknowledged":
		if c.onStream(m) {
			c.m.subAcked.Store(true)
			c.log.Debug().Msg("mcpwire: subscriptions/listen acknowledged")
		}
		return true
	case "notifications/tools/list_changed":
		if c.onStream(m) {
			c.signalToolsChanged()
			c.log.Info().Msg("mcpwire: server tools changed")
		}
		return true
	}
	return false
}

// onStream reports whether a notification belongs to the open listen
// stream, by its _meta subscriptionId; one that does not is dropped
// (2026-07-28 delivers list_changed only on the stream), at debug level
// as other dropped notifications are: a server may send any number.
func (c *Client) onStream(m *mcpproto.Message) bool {
	id, ok := mcpproto.SubscriptionID(m.Params)
	sub := c.m.subID.Load()
	if ok && sub != 0 && id.IsInt && id.Int == sub {
		return true
	}
	c.log.Debug().Str("method", preview(m.Method)).Str("subscription", preview(id.Raw)).Msg("mcpwire: notification for no open subscription dropped")
	return false
}

// signalToolsChanged raises the coalescing ToolsChanged signal.
func (c *Client) signalToolsChanged() {
	select {
	case c.toolsChanged <- struct{}{}:
	default:
	}
}

// modernRequest handles a server request outside the legacy era: the
// modern era forbids both the request and any response to it, and while
// the probe is out the era is not known, so nothing is written. Each
// one is counted and logged; past MaxServerRequests the server is dead.
func (c *Client) modernRequest(m *mcpproto.Message) bool {
	if c.Era() == EraLegacy {
		return false
	}
	n := c.m.serverRequests.Add(1)
	c.log.Warn().Str("method", preview(m.Method)).Int64("count", n).Msg("mcpwire: server request where the era forbids one; not answered")
	if n > int64(c.cfg.MaxServerRequests) {
		c.die(fmt.Errorf("%w: %d server requests in the %s era, which forbids them", ErrProtocol, n, mcpproto.ModernVersion))
	}
	return true
}

// checkResult applies the modern era's resultType rule to a result:
// absent or "complete" is a result, "input_required" an
// *InputRequiredError (only tools/call and resources/read may ask;
// elsewhere it is a fault), anything else a *ProtocolFault at /resultType.
func (c *Client) checkResult(method string, raw jsonlex.Value) error {
	if c.Era() != EraModern {
		return nil
	}
	rt, err := mcpproto.DecodeResultTypeValue(method, raw)
	if err != nil || rt == mcpproto.ResultComplete {
		return err
	}
	if method != "tools/call" && method != "resources/read" {
		return &mcpproto.ProtocolFault{What: method, Path: "/resultType", Index: -1, Reason: "input_required is not allowed for " + method}
	}
	return &InputRequiredError{Method: method, Requests: mcpproto.InputRequestMethods(raw.Bytes(), 4)}
}

// armRelist makes a modern listing's ttlMs a re-list cadence: when it
// passes, ToolsChanged fires as for list_changed, so the owner re-lists.
// ttlMs 0 (the SDK default, and "do not cache") arms nothing: the
// listen stream says when to re-list.
func (c *Client) armRelist(ttlMs int64) {
	if c.Era() != EraModern || ttlMs <= 0 {
		return
	}
	d := max(time.Duration(min(ttlMs, int64(24*time.Hour/time.Millisecond)))*time.Millisecond, minRelist)
	c.m.relistMu.Lock()
	defer c.m.relistMu.Unlock()
	if c.m.closed {
		return
	}
	if c.m.relist != nil {
		c.m.relist.Stop()
	}
	c.m.relist = time.AfterFunc(d, c.signalToolsChanged)
}

// endModern runs at Close: it stops the re-list cadence and cancels the
// listen stream (notifications/cancelled is how a client ends a
// subscription), best effort and bounded by WriteTimeout.
func (c *Client) endModern() {
	c.m.relistMu.Lock()
	c.m.closed = true
	if c.m.relist != nil {
		c.m.relist.Stop()
	}
	c.m.relistMu.Unlock()
	id := c.m.subID.Swap(0)
	if id == 0 || c.Err() != nil {
		return
	}
	c.car.unlisten(id)
}
