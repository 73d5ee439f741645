// Package control is capbridge's control plane (docs/control.md): its typed
// requests and replies, the client the CLI and Go harnesses use, and the
// serve loop a bridge runs behind its owner-only socket.
package control

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/interchange"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/truncate"
)

// Request kinds, the "t" of a request, and the reply kinds that answer
// them. A call is answered with capwire's own "result" or "denied".
const (
	opGrant     = "grant"
	opRevoke    = "revoke"
	opStatus    = "status"
	opFacade    = "facade"
	opDescribe  = "describe"
	opSearch    = "search"
	opListing   = "listing"
	opResources = "resources"
	opCall      = "call"
	opMetrics   = "metrics"
	opSurface   = "surface"
	opReload    = "reload"

	replyGranted   = "granted"
	replyRevoked   = "revoked"
	replyStatus    = "status"
	replyFacade    = "facade"
	replyDescribed = "described"
	replyFound     = "found"
	replyListed    = "listed"
	replyResourced = "resource_list"
	replyMetrics   = "metrics"
	replySurface   = "surface"
	replyReloaded  = "reloaded"
	replyError     = "error"
)

// MaxFrame bounds one control frame's payload in either direction; a
// façade's source is the largest thing sent. The bridge uses it to learn,
// before it audits a call, whether the result fits in a reply.
const MaxFrame = bound.MaxMessage

// GrantRequest asks for a grant ("grant").
type GrantRequest struct {
	// Servers maps each server the grant reaches to the tools it may call
	// there; an empty list means every tool.
	Servers map[string][]string `msgpack:"servers"`
	// TTLMS is how long the grant lives, in milliseconds: from 1000 (a
	// second) to 86400000 (a day). Left out (nil) means the default, ten
	// minutes; any value given, 0 included, must be in range, so a
	// harness that computed 0 or a sub-millisecond TTL by mistake is
	// refused rather than handed a ten-minute grant.
	TTLMS   *uint64 `msgpack:"ttl_ms,omitempty"`
	PeerUID *uint32 `msgpack:"peer_uid,omitempty"` // only a call-socket peer with this uid may use the token
	// AllowDestructive lets the grant call the tools the operator
	// declared destructive without naming each one in Servers.
	AllowDestructive bool `msgpack:"allow_destructive,omitempty"`
	// Resources are the servers, among Servers, whose resources the
	// program may read (resources/read through the capbridge capability).
	Resources []string `msgpack:"resources,omitempty"`
	// Run, when set, makes the grant one program run's: the audit line of
	// every call made under it carries the run's id, and a revoke that
	// reports the run's end writes the run's own audit line.
	Run *Run `msgpack:"run,omitempty"`
	// Quotas bound what the grant's calls may use, each for the whole
	// grant, one server or one tool; each is set over the operator's
	// default for its scope (capbridge.toml's [quota] and [mcp.X.quota]),
	// quota by quota. A call beyond one is denied quota_exceeded.
	Quotas []Quota `msgpack:"quotas,omitempty"`
}

// Quota is one scope's quotas in a grant request; a field left out (0)
// keeps the operator's default for it.
type Quota struct {
	// Scope is what the quotas count: "" the grant's calls, "server" its
	// calls to that server, "server/tool" to that tool.
	Scope    string  `msgpack:"scope,omitempty" json:"scope,omitempty"`
	Rate     float64 `msgpack:"rate,omitempty" json:"rate,omitempty"`           // calls per second (a token bucket)
	Burst    uint32  `msgpack:"burst,omitempty" json:"burst,omitempty"`         // the bucket's size; default ceil(rate)
	Calls    uint64  `msgpack:"calls,omitempty" json:"calls,omitempty"`         // calls in all
	BytesIn  uint64  `msgpack:"bytes_in,omitempty" json:"bytes_in,omitempty"`   // arguments' JSON bytes in all
	BytesOut uint64  `msgpack:"bytes_out,omitempty" json:"bytes_out,omitempty"` // results' bytes in all
	TimeMS   uint64  `msgpack:"time_ms,omitempty" json:"time_ms,omitempty"`     // the calls' time in capbridge in all
}

// Run describes the program run a grant is for.
type Run struct {
	ID         string `msgpack:"id"`          // the run's id, unique to the harness; at most 64 bytes
	Language   string `msgpack:"language"`    // the program's language
	CodeSHA256 string `msgpack:"code_sha256"` // the SHA-256 of the program's source, hex
}

// RunEnd reports how a run ended, for its audit line.
type RunEnd struct {
	Ended    string `msgpack:"ended"`     // how: exit, wall_clock, output_limit, cancelled, setup_failed
	ExitCode int    `msgpack:"exit_code"` // the program's exit status, -1 for a signal
	TookMS   int64  `msgpack:"took_ms"`   // from the run request to the program's end
}

// Granted answers a grant ("granted").
type Granted struct {
	Token     string `msgpack:"token"`      // the only copy: hand it into the jail
	Grant     string `msgpack:"grant"`      // the public grant id, for revoke and the audit trail
	ExpiresMS int64  `msgpack:"expires_ms"` // Unix ms
}

// RevokeRequest ends a grant ("revoke").
type RevokeRequest struct {
	// Grant names the grant by its public id (preferred: it is not a
	// secret, so it can be logged and typed) or by its token.
	Grant string `msgpack:"grant"`
	// Run, for a run's grant, is how the run ended: the bridge writes the
	// run's audit line with it.
	Run *RunEnd `msgpack:"run,omitempty"`
}

// Revoked answers a revoke ("revoked").
type Revoked struct {
	Found bool `msgpack:"found"` // whether a live grant was ended
	// What was done under the grant, when one was ended: calls retired
	// (denied ones included), denials among them, argument and result
	// bytes.
	Calls       int64 `msgpack:"calls,omitempty"`
	Denied      int64 `msgpack:"denied,omitempty"`
	ArgBytes    int64 `msgpack:"arg_bytes,omitempty"`
	ResultBytes int64 `msgpack:"result_bytes,omitempty"`
	TookMS      int64 `msgpack:"took_ms,omitempty"` // the calls' time in capbridge, summed
}

// Status answers a status request ("status"), which has no fields.
type Status struct {
	Servers     []ServerStatus `msgpack:"servers" json:"servers"`
	Grants      int            `msgpack:"grants" json:"grants"`           // live grants
	Connections int            `msgpack:"connections" json:"connections"` // open connections, both sockets
	// Procs is how many threads the bridge runs Go code on at once
	// (GOMAXPROCS: the procs setting, or the environment's). Absent from
	// a bridge that predates it.
	Procs int `msgpack:"procs,omitempty" json:"procs,omitempty"`
	// CallSocket is the call socket's path, for a front that attaches to
	// this bridge and hands the socket into its jails.
	CallSocket string `msgpack:"call_socket,omitempty" json:"call_socket,omitempty"`
	// GrantUsage is what the live grants have done, and their quotas:
	// the MaxGrantUsage grants with the most calls, most first.
	GrantUsage []GrantUsage `msgpack:"grant_usage,omitempty" json:"grant_usage,omitempty"`
	// GrantUsageOmitted counts the live grants left out of GrantUsage.
	GrantUsageOmitted int `msgpack:"grant_usage_omitted,omitempty" json:"grant_usage_omitted,omitempty"`
	// Reloaded is the last configuration reload's outcome, absent before
	// the first.
	Reloaded *Reloaded `msgpack:"reloaded,omitempty" json:"reloaded,omitempty"`
	// Draining is each server a reload took out of the set that still
	// runs calls entered before it: a removed server, or the old process
	// of a replaced one (its name then also stands in Servers, for the
	// new process). Each retires once its calls are done, by its
	// max_call_timeout and cancel_grace at the latest.
	Draining []ServerStatus `msgpack:"draining,omitempty" json:"draining,omitempty"`
}

// MaxGrantUsage bounds the grants a status lists one by one.
const MaxGrantUsage = 256

// GrantUsage is one live grant's accounting in Status.
type GrantUsage struct {
	Grant       string       `msgpack:"grant" json:"grant"`
	Run         string       `msgpack:"run,omitempty" json:"run,omitempty"`
	ExpiresMS   int64        `msgpack:"expires_ms" json:"expires_ms"`
	Calls       int64        `msgpack:"calls" json:"calls"`               // retired, denied ones included
	Denied      int64        `msgpack:"denied" json:"denied"`             // of which denied
	ArgBytes    int64        `msgpack:"arg_bytes" json:"arg_bytes"`       // arguments' JSON bytes
	ResultBytes int64        `msgpack:"result_bytes" json:"result_bytes"` // results' bytes
	TookMS      int64        `msgpack:"took_ms" json:"took_ms"`           // the calls' time in capbridge
	Quotas      []QuotaUsage `msgpack:"quotas,omitempty" json:"quotas,omitempty"`
}

// QuotaUsage is one scope's quotas and what the grant's calls charged
// against them: the calls they admitted (a call refused by a quota is
// not charged), their arguments' and results' bytes and their time.
type QuotaUsage struct {
	Scope        string  `msgpack:"scope,omitempty" json:"scope,omitempty"`
	Rate         float64 `msgpack:"rate,omitempty" json:"rate,omitempty"`
	Burst        uint32  `msgpack:"burst,omitempty" json:"burst,omitempty"`
	Calls        uint64  `msgpack:"calls,omitempty" json:"calls,omitempty"`
	BytesIn      uint64  `msgpack:"bytes_in,omitempty" json:"bytes_in,omitempty"`
	BytesOut     uint64  `msgpack:"bytes_out,omitempty" json:"bytes_out,omitempty"`
	TimeMS       uint64  `msgpack:"time_ms,omitempty" json:"time_ms,omitempty"`
	UsedCalls    int64   `msgpack:"used_calls" json:"used_calls"`
	UsedBytesIn  int64   `msgpack:"used_bytes_in" json:"used_bytes_in"`
	UsedBytesOut int64   `msgpack:"used_bytes_out" json:"used_bytes_out"`
	UsedTimeMS   int64   `msgpack:"used_time_ms" json:"used_time_ms"`
	Tokens       float64 `msgpack:"tokens,omitempty" json:"tokens,omitempty"` // the rate bucket's level now
}

// ServerStatus is one server's line in Status. State is one of the
// bridge's server states (starting, ready, failed, dead, retired).
type ServerStatus struct {
	Name       string `msgpack:"name" json:"name"`
	State      string `msgpack:"state" json:"state"`
	PID        int    `msgpack:"pid,omitempty" json:"pid,omitempty"`
	Reason     string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	Tools      int    `msgpack:"tools" json:"tools"`
	Inflight   int64  `msgpack:"inflight" json:"inflight"` // abandoned included
	Abandoned  int64  `msgpack:"abandoned" json:"abandoned"`
	Queued     int64  `msgpack:"queued" json:"queued"`
	Calls      int64  `msgpack:"calls" json:"calls"`
	Errors     int64  `msgpack:"errors" json:"errors"`
	StderrTail string `msgpack:"stderr_tail,omitempty" json:"stderr_tail,omitempty"`
	// The restart record: the policy, restarts so far, the last exit's
	// wait status, and while in backoff the wait and when it ends (Unix
	// milliseconds).
	Restart       string `msgpack:"restart" json:"restart"`
	Restarts      int64  `msgpack:"restarts" json:"restarts"`
	LastExit      string `msgpack:"last_exit,omitempty" json:"last_exit,omitempty"`
	BackoffMS     int64  `msgpack:"backoff_ms,omitempty" json:"backoff_ms,omitempty"`
	NextAttemptMS int64  `msgpack:"next_attempt_ms,omitempty" json:"next_attempt_ms,omitempty"`
	// Withheld is each tool the lock withholds because it differs from
	// the lock, as "name: drift classes".
	Withheld []string `msgpack:"withheld,omitempty" json:"withheld,omitempty"`
	// Transport is how the server is reached (stdio, streamable-http,
	// sse, or auto before a remote server's first connection); URL a
	// remote server's address, without query or credentials.
	Transport string `msgpack:"transport,omitempty" json:"transport,omitempty"`
	URL       string `msgpack:"url,omitempty" json:"url,omitempty"`
	// The MCP era ("legacy" or "modern") and protocol revision the
	// server speaks, and its serverInfo, while it is ready.
	Era           string `msgpack:"era,omitempty" json:"era,omitempty"`
	Protocol      string `msgpack:"protocol,omitempty" json:"protocol,omitempty"`
	ServerName    string `msgpack:"server_name,omitempty" json:"server_name,omitempty"`
	ServerVersion string `msgpack:"server_version,omitempty" json:"server_version,omitempty"`
	// Login, when set, says that a person's login must be renewed, and
	// the command: calls need scopes the login's token lacks.
	Login string `msgpack:"login,omitempty" json:"login,omitempty"`
}

// FacadeRequest asks for a server's façade ("facade").
type FacadeRequest struct {
	Server string `msgpack:"server"`
	Lang   string `msgpack:"lang,omitempty"` // "go", the default
}

// Facade answers a facade request ("facade").
type Facade struct {
	Module  string `msgpack:"module"`  // the package name
	Source  string `msgpack:"source"`  // the verified source file
	Surface string `msgpack:"surface"` // the model's text for this server
	// Preamble is the fixed text a model reads once before the surfaces of
	// any number of servers: the same for every server of a language.
	Preamble      string `msgpack:"preamble"`
	ListingSHA256 string `msgpack:"listing_sha256"`
	// JS and DTS are, for TypeScript, the module as JavaScript and its
	// declarations: what Node runs as it is. Empty for other languages.
	JS  string `msgpack:"js,omitempty"`
	DTS string `msgpack:"dts,omitempty"`
}

// DescribeRequest asks for the full declarations of some of a server's
// tools ("describe"): what a lean rung of the surface leaves out.
type DescribeRequest struct {
	Server string `msgpack:"server"`
	// Tools names the tools by function name or wire name, in the order
	// wanted; none means every tool.
	Tools []string `msgpack:"tools,omitempty"`
	Lang  string   `msgpack:"lang,omitempty"` // "go", the default
}

// Described answers a describe request ("described").
type Described struct {
	Module       string `msgpack:"module"`       // the package name
	Declarations string `msgpack:"declarations"` // the tools' declarations, in the order asked
}

// SearchRequest asks which tools match a query ("search").
type SearchRequest struct {
	// Servers limits the search to these servers; none means every server
	// that has a façade. A harness passes the servers it granted.
	Servers []string `msgpack:"servers,omitempty"`
	Query   string   `msgpack:"query"`
	Limit   uint32   `msgpack:"limit,omitempty"` // 0: DefaultSearchLimit; at most MaxSearchLimit
	Lang    string   `msgpack:"lang,omitempty"`  // "go", the default
}

// Search bounds.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 100
	MaxSearchQuery     = 1 << 10 // bytes
)

// Found answers a search request ("found").
type Found struct {
	Matches []Match `msgpack:"matches"` // best first
}

// Match is one tool a search found.
type Match struct {
	Server    string `msgpack:"server" json:"server"`
	Func      string `msgpack:"func" json:"func"`           // the façade function
	Tool      string `msgpack:"tool" json:"tool"`           // the tool's wire name
	Signature string `msgpack:"signature" json:"signature"` // "pkg.F(ctx, pkg.FArgs{Field T; …})"
	Score     int    `msgpack:"score" json:"score"`         // higher is better; comparable across servers
}

// ListingRequest asks for the tools/list a server's façade was generated
// from ("listing").
type ListingRequest struct {
	Server string `msgpack:"server"`
}

// Listed answers a listing request ("listed").
type Listed struct {
	// Listing is a JSON tools/list result, {"tools": […]}: the server's
	// callable tools (after tools.allow and tools.deny) in the server's
	// order, each re-encoded from what the server sent. It is what
	// `capbridge gen --listing` reads, and carries each tool's inputSchema
	// for clients that type arguments.
	Listing string `msgpack:"listing"`
}

// ResourcesRequest asks for a server's resources and resource templates
// ("resources"), for a harness deciding what to grant or show.
type ResourcesRequest struct {
	Server string `msgpack:"server"`
}

// ResourceList answers a resources request ("resource_list").
type ResourceList struct {
	// Resources is a JSON array of the server's resources/list entries,
	// and Templates of its resources/templates/list entries, each as the
	// server sent it; "[]" when it has none (or no resources capability).
	Resources string `msgpack:"resources"`
	Templates string `msgpack:"templates"`
}

// SurfaceRequest asks for the tool surface the bridge serves, locked
// ("surface"): what capbridge lock writes, taken from a running bridge
// instead of servers started for the purpose. It has no fields.
type SurfaceRequest struct{}

// Surface answers a surface request ("surface").
type Surface struct {
	// Lock is a lock file (internal/lock's format, version and digests)
	// of every ready server's tools as it lists them now, after
	// tools.allow and tools.deny and before any lock the bridge holds
	// them to: what locking those servers would approve.
	Lock string `msgpack:"lock"`
	// Down names each server that is not ready, with why; the lock has
	// no entry for it.
	Down map[string]string `msgpack:"down,omitempty"`
	// Dropped names, per server, each tool the server lists but its
	// client dropped from the listing, with why (Bridge.Dropped).
	Dropped map[string]map[string]string `msgpack:"dropped,omitempty"`
}

// CallRequest calls a tool with operator authority ("call"). It is
// answered with capwire's result or denied envelope.
type CallRequest struct {
	Server string `msgpack:"server"`
	Tool   string `msgpack:"tool"`
	// Args is one MessagePack map; nil means {}.
	Args      msgpack.RawMessage `msgpack:"args,omitempty"`
	TimeoutMS uint64             `msgpack:"timeout_ms,omitempty"` // 0: the server's call_timeout
}

// MetricsRequest asks for the bridge's metrics ("metrics"). It has no
// fields.
type MetricsRequest struct{}

// Metrics answers a metrics request ("metrics").
type Metrics struct {
	// Text is every series in the Prometheus text exposition format
	// (version 0.0.4), as the metrics_listen listener serves it.
	Text string `msgpack:"text"`
}

// ReloadRequest asks capbridge to read its configuration again and apply
// it without a restart ("reload"). It has no fields: capbridge reads the
// files it was started with.
type ReloadRequest struct{}

// Reloaded answers a reload ("reloaded"): what the new configuration
// changed, each list a set of server names. Status carries the last one,
// a refused reload included (with Error).
type Reloaded struct {
	AtMS int64 `msgpack:"at_ms" json:"at_ms"` // when it was applied (or refused), Unix ms
	// Trigger is what asked for it: "control" (capbridge reload) or
	// "watch" (serve --watch saw a file change).
	Trigger string `msgpack:"trigger" json:"trigger"`
	// Added servers are booting; Removed ones drain their calls and
	// stop; Replaced ones (command, args, env, cwd, a remote's
	// connection, limits) boot anew and the old process stops once its
	// calls are done; Changed ones keep their process and take the new
	// policy (tools, destructive, restrict, timeouts, quotas, the lock)
	// for the next call; Unchanged ones are untouched.
	Added     []string `msgpack:"added,omitempty" json:"added,omitempty"`
	Removed   []string `msgpack:"removed,omitempty" json:"removed,omitempty"`
	Replaced  []string `msgpack:"replaced,omitempty" json:"replaced,omitempty"`
	Changed   []string `msgpack:"changed,omitempty" json:"changed,omitempty"`
	Unchanged []string `msgpack:"unchanged,omitempty" json:"unchanged,omitempty"`
	// Defaults says the grant quota defaults ([quota]) changed: they
	// apply to grants issued from now on.
	Defaults bool `msgpack:"defaults,omitempty" json:"defaults,omitempty"`
	// Error, in Status only, is why the last reload was refused (the
	// running configuration stayed); a refused reload request is
	// answered with an error reply coded bad_config instead.
	Error string `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Control error codes: the closed set an "error" reply carries
// (docs/control.md, "Error codes"). A call's refusals are not among them:
// those are capwire denials.
const (
	CodeBadRequest     = "bad_request"     // the frame or a field of it is malformed or out of range
	CodeUnknownRequest = "unknown_request" // "t" names no request this capbridge knows
	CodeUnknownServer  = "unknown_server"  // no server is called that
	CodeUnknownTool    = "unknown_tool"    // the server has no such tool
	CodeUnavailable    = "unavailable"     // the server is not serving (boot failed, dead, retired)
	CodeTooManyGrants  = "too_many_grants" // the live-grant budget is spent
	CodeBusy           = "busy"            // the control socket's connections are all open; the connection is closed
	CodeTooLarge       = "too_large"       // the reply does not fit in a control frame
	CodeBadConfig      = "bad_config"      // a reload found a configuration that does not validate; the running one stays
	CodeInternal       = "internal"        // capbridge failed in a way the request did not cause
)

// codes is the closed set, for the encoder's check and the doc test.
var codes = map[string]bool{
	CodeBadRequest: true, CodeUnknownRequest: true, CodeUnknownServer: true, CodeUnknownTool: true,
	CodeUnavailable: true, CodeTooManyGrants: true, CodeTooLarge: true, CodeBadConfig: true, CodeInternal: true,
	CodeBusy: true,
}

// Error is an "error" reply: the request was refused or failed. A Handler
// returns it to choose the code; a Client returns it as the error of the
// request it answers. errors.Is(err, &Error{Code: c}) matches by code.
type Error struct {
	Code    string `msgpack:"code"`
	Message string `msgpack:"message"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "control: " + e.Code
	}
	return "control: " + e.Code + ": " + e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// errorf returns an *Error with code and a formatted message.
func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// head is what every control frame carries.
type head struct {
	T  string `msgpack:"t"`
	ID uint64 `msgpack:"id"`
}

// appendFrame appends one control frame: "t" and "id", then body's fields
// (a struct, encoded as a map by its msgpack tags). The envelope keys are
// written ahead of the body's, so no body type repeats them.
func appendFrame(dst []byte, t string, id uint64, body any) ([]byte, error) {
	fields, err := msgpack.Marshal(body)
	if err != nil {
		return dst, fmt.Errorf("control: encoding %s: %w", t, err)
	}
	r := bytes.NewReader(fields)
	n, err := msgpack.NewDecoder(r).DecodeMapLen()
	if err != nil || n < 0 {
		return dst, fmt.Errorf("control: encoding %s: the body is not a map", t)
	}
	entries := fields[len(fields)-r.Len():]
	return capwire.AppendFramed(dst, MaxFrame, func(b []byte) ([]byte, error) {
		w := bytes.NewBuffer(b)
		enc := msgpack.NewEncoder(w)
		if err := errors.Join(enc.EncodeMapLen(n+2),
			enc.EncodeString("t"), enc.EncodeString(t),
			enc.EncodeString("id"), enc.EncodeUint(id)); err != nil {
			return b, err
		}
		w.Write(entries)
		return w.Bytes(), nil
	})
}

// appendError appends an "error" frame. Its body is two strings, so it
// fits in any frame and cannot fail to encode once the message is
// clipped to valid UTF-8.
func appendError(dst []byte, id uint64, e *Error) []byte {
	code := e.Code
	if !codes[code] {
		code = CodeInternal
	}
	out, err := appendFrame(dst, replyError, id, &Error{Code: code, Message: truncate.Ellipsis(e.Message, maxMessage)})
	if err != nil {
		// Unreachable: a map of two short strings.
		panic("control: encoding an error reply: " + err.Error())
	}
	return out
}

// maxMessage caps an error's message, which may quote what a client sent.
const maxMessage = 4 << 10

// decode decodes a control frame's payload into v. The frame is first
// checked by interchange's total, bounded converter: msgpack's reflective
// decoder trusts a map or array header's count when it allocates, so only
// a frame whose every count is backed by bytes actually present may reach
// it (a 16 MiB frame can then describe at most a few million elements).
// The check also refuses what JSON cannot carry (binary, non-string keys,
// invalid UTF-8), none of which a control frame has a use for.
func decode(frame []byte, v any) error {
	var scratch [512]byte
	if _, err := interchange.AppendJSON(scratch[:0], frame); err != nil {
		return err
	}
	return msgpack.Unmarshal(frame, v)
}
