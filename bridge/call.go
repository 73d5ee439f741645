package bridge

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/internal/quota"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/interchange"
	"github.com/capbridge/capbridge/internal/telemetry"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/mcpwire"
)

// Causes that end a call's context; the call path turns each into its
// denial code.
var (
	errCancelled    = errors.New("bridge: call cancelled by the caller")
	errDisconnected = errors.New("bridge: caller disconnected")
	errShuttingDown = errors.New("bridge: shutting down")
	errCallTimeout  = errors.New("bridge: call deadline passed")
)

// callRequest is one call after the envelope was decoded, from either
// socket: the call socket (under a grant) or the control socket (with
// operator authority, grant nil).
type callRequest struct {
	server, tool string
	args         []byte // raw MessagePack map
	timeoutMS    uint64
	grant        *Grant // nil: operator authority
	peer         PeerCred
	// traceparent is the program's, passed on to the server when traces
	// are off; span is the call's span when they are on (trace.go).
	traceparent string
	span        *telemetry.Call
}

// outcome is what a call produced: exactly one of result and denial.
type outcome struct {
	result *capwire.Result
	denial *capwire.Denied
	// msg, when not nil, is the message whose Result result is, so that
	// sending the reply allocates no message of its own (reduce).
	msg *capwire.ResultMsg
	// argBytes and resultBytes are for the audit line; argValues is a
	// copy of the converted arguments, kept only when audit_values is set.
	argBytes, resultBytes int
	argValues             []byte
	// policy is the policy decision that applied (policy.go), for the
	// audit line; "" when the call never reached a tool.
	policy string
	// transport is how the call reached its server, and httpStatus the
	// HTTP status of a remote server's failed answer (0: none), for the
	// audit line.
	transport  string
	httpStatus int
	// from is the server's result that result's strings are cut from,
	// whose memory may be leased (mcpwire.CallToolResult.Release). Only
	// a caller that is done with every string of the outcome may free
	// it; one that keeps the outcome (an async call's) leaves it to the
	// collector.
	from *mcpwire.CallToolResult
}

// free gives back the memory o's result strings share, if it is leased.
// It must be o's last use.
func (o *outcome) free() {
	if o.from != nil {
		o.from.Release()
		o.from = nil
	}
}

func deny(code, msg string) outcome {
	return outcome{denial: &capwire.Denied{Code: code, Message: msg}}
}

// jsonBufs holds the buffers arguments are converted into. A buffer that
// grew past maxPooledBuf is dropped rather than kept, so one huge call does
// not pin its memory for ever.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledBuf = 1 << 20

// call runs one tool call through the whole path: checks, conversion,
// admission, the MCP call, and reduction. ctx carries the caller's
// lifetime (connection, grant, bridge); its cause decides the denial when
// it ends. call never panics on anything a caller or server sends, and
// always returns exactly one outcome.
func (b *Bridge) call(ctx context.Context, req callRequest) outcome {
	// Admitted here, once, whichever socket the call came from: from now
	// until it returns, the call is in the account Shutdown waits on.
	if !b.flight.Admit() {
		return deny(capwire.CodeShuttingDown, "capbridge is shutting down")
	}
	defer b.flight.Retire()
	o, again := b.checkedCall(ctx, req)
	if again {
		// A reload changed the server's policy, or removed the server,
		// while the call waited for its slot: checked again, once.
		if o, again = b.checkedCall(ctx, req); again {
			return deny(capwire.CodeServerUnavailable, "server "+quote(req.server)+" changed its policy twice while the call waited; try again")
		}
	}
	return o
}

// checkedCall checks and makes one call, or reports (again) that the
// policy it was checked under changed while it waited for admission,
// having given back its slot and its quota.
func (b *Bridge) checkedCall(ctx context.Context, req callRequest) (outcome, bool) {
	if o, blocked := b.auditBlocked(req.grant); blocked {
		return o, false
	}
	s, ok := b.lookup(req.server)
	switch {
	case !ok:
		return deny(capwire.CodeUnknownCapability, "no MCP server is called "+quote(req.server)), false
	case req.grant != nil && !req.grant.Reaches(req.server):
		return deny(capwire.CodeNotGranted, "this grant does not reach server "+quote(req.server)), false
	}
	s, t, refused := b.enter(req.server, s)
	if refused != nil {
		return *refused, false
	}
	defer s.leave()
	tool, ok := t.tools[req.tool]
	if !ok {
		if d, withheld := t.drift[req.tool]; withheld {
			o := deny(capwire.CodeSurfaceChanged, "tool "+quote(req.tool)+" of server "+quote(req.server)+" is withheld: it differs from the lock ("+d+"); the operator must review it (capbridge skew) and lock it again")
			o.policy = policyWithheld
			return o, false
		}
		return deny(capwire.CodeUnknownTool, "server "+quote(req.server)+" has no tool "+quote(req.tool)), false
	}
	if req.grant != nil && !req.grant.Allows(req.server, req.tool) {
		return deny(capwire.CodeNotGranted, "this grant does not allow tool "+quote(req.tool)+" on server "+quote(req.server)), false
	}
	if req.grant != nil && !sameSurface(req.grant.seen[req.server], t, tool) {
		return deny(capwire.CodeSurfaceChanged, "server "+quote(req.server)+" re-listed its tools since this grant was issued, and "+quote(req.tool)+" is not the tool this grant's façade describes; get a new grant"), false
	}
	policy, ok := destructiveDecision(t, req.grant, req.server, req.tool)
	if !ok {
		o := deny(capwire.CodeNotGranted, "tool "+quote(req.tool)+" of server "+quote(req.server)+" is destructive: only a grant that names it, or allows destructive tools, may call it")
		o.policy = policy
		return o, false
	}

	if len(req.args) == 0 {
		req.args = emptyMap // the control socket's call may leave args out
	}
	if !isMsgPackMap(req.args[0]) {
		// The call socket's decoder guarantees a map; the control
		// socket's does not. MCP's tools/call arguments are an object.
		o := deny(capwire.CodeBadArguments, "args must be a map of argument names to values")
		o.denial.Path = ""
		return o, false
	}

	bufp := jsonBufs.Get().(*[]byte)
	defer func() {
		if cap(*bufp) <= maxPooledBuf {
			jsonBufs.Put(bufp)
		}
	}()
	// Converted by mcpwire itself, so the JSON is sent without a second
	// check: the converter's output is valid by construction.
	callArgs, err := mcpwire.ConvertArgs((*bufp)[:0], req.args)
	if err != nil {
		return conversionDenial(capwire.CodeBadArguments, "the arguments cannot be converted to JSON", "", err), false
	}
	args := callArgs.JSON()
	*bufp = args[:0]
	// One configuration for the whole call, though a reload may publish
	// another meanwhile: its guards and its timeouts agree.
	conf := s.cfg()
	if t.conf != conf || t.lock != s.lock.Load() {
		// A reload set a policy its server has not rebuilt its table
		// under yet (its supervisor is busy re-listing, within
		// startup_timeout): the table's tools, allow and deny lists and
		// destructive decisions are the old policy's, and no call goes
		// out under them once the reload has returned.
		return deny(capwire.CodeServerUnavailable, "server "+quote(req.server)+" is taking a new policy from a reload; try again"), false
	}
	guards := conf.Guards(req.tool)
	if v := config.CheckArgs(guards, args); v != nil {
		o := deny(capwire.CodeNotGranted, "the arguments break the operator's policy at "+quote(v.Pointer)+": "+v.Rule)
		o.denial.Path = v.Pointer
		o.policy = policyGuardRefused
		return o, false
	}
	if f := t.check(req.tool).Check(req.args); f != nil {
		// The server never sees arguments its own schema refuses (the
		// operator's guards, above, speak first); the program learns
		// where, and what was wanted.
		o := deny(capwire.CodeBadArguments, "the arguments do not fit the input schema of tool "+quote(req.tool)+" at "+quote(f.Path)+": want "+f.Want+", got "+f.Got)
		o.denial.Path = f.Path
		return o, false
	}
	switch {
	case t.drift[req.tool] != "":
		policy = policyWarnDrift
	case policy == "" && len(guards) > 0:
		policy = policyGuarded
	case policy == "":
		policy = policyAllowed
	}

	// Quotas last among the checks: a call refused for its arguments or
	// by policy spends none, and one that passes them is charged before
	// it waits for admission.
	m, denied, ok := b.meter(ctx, s, req, conf, len(args))
	if !ok {
		return denied, false
	}
	if m.waited && !s.still(t, conf) {
		// The checks above were made under a policy a reload replaced
		// while the call waited (one that did not wait was checked an
		// instant ago).
		m.release()
		if m.q != nil {
			m.q.Refund(m.charge)
		}
		return outcome{}, true
	}
	s.calls.Add(1)
	// A call given up on after it reached the server keeps its slot
	// (holdSlot) while the caller is answered at once.
	var answered <-chan struct{}
	opts := mcpwire.CallOptions{IdleTimeout: m.idle, MaxTimeout: m.hard, Abandoned: func(a <-chan struct{}) { answered = a },
		Traceparent: requestTrace(req.span, req.traceparent, req.server, req.tool, t)}
	var res *mcpwire.CallToolResult
	if tool.NeedsTasks() {
		// The server answers with a task handle; the call follows it to
		// the result, within the same deadline.
		res, err = t.client.CallToolTask(ctx, req.tool, callArgs, opts, nil)
	} else {
		res, err = t.client.CallTool(ctx, req.tool, callArgs, opts)
	}
	if answered != nil {
		s.holdSlot(answered, m.release)
	} else {
		m.release()
	}
	var o outcome
	if err != nil {
		s.errs.Add(1)
		o = b.failed(ctx, s, req, err)
		o.httpStatus = httpStatus(err)
	} else {
		o = b.reduce(res)
	}
	endRequestTrace(req.span, o.denial, o.result)
	o.transport = t.client.Transport()
	o.argBytes = len(args)
	o.policy = policy
	if b.cfg.Bridge.AuditValues && len(args) <= maxAuditValue {
		o.argValues = append([]byte(nil), args...)
	}
	m.settle(b, o.resultBytes)
	return o, false
}

// metered is a call's (or a resource read's) passage through its grant's
// quotas and its server's admission: the charge to settle once it is
// done, the slot to release, and what is left of its deadlines.
type metered struct {
	q          *quota.Set // nil: no quota applies
	charge     quota.Charge
	began      time.Time
	release    func()
	idle, hard time.Duration
	waited     bool // admission queued it
}

// meter charges req's grant's quotas for a call of req.tool on s with
// argBytes of arguments, then has s admit it, or returns the call's
// denial (the charge refunded when admission refuses it). The deadline
// has one timer: mcpwire's, for the call at the server, which
// admission's queue, when a call waits there, shortens by the wait. A
// caller's timeout_ms is a deadline (capped by max_call_timeout) that
// progress does not stretch; without one, call_timeout is an idle
// deadline that each progress notification renews (MCP 2025-11-25,
// "Timeouts": a client MAY reset its timeout on progress and SHOULD
// always enforce a maximum), up to max_call_timeout.
func (b *Bridge) meter(ctx context.Context, s *server, req callRequest, conf *config.Server, argBytes int) (metered, outcome, bool) {
	var m metered
	if req.grant != nil && req.grant.quota != nil {
		m.q, m.began = req.grant.quota, b.grants.now()
		var ex *quota.Exceeded
		if m.charge, ex = m.q.Take(req.server, req.tool, int64(argBytes), m.began); ex != nil {
			return m, b.quotaDenial(ex), false
		}
	}
	idle, hard := conf.CallTimeout, conf.MaxCallTimeout
	if req.timeoutMS > 0 {
		idle = time.Duration(min(req.timeoutMS, uint64(hard/time.Millisecond))) * time.Millisecond
		hard = idle
	}
	release, waited, err := s.admit(ctx, req.grant, idle)
	if err != nil {
		if m.q != nil {
			m.q.Refund(m.charge)
		}
		if oe := (*overloadError)(nil); errors.As(err, &oe) {
			return m, deny(capwire.CodeOverloaded, oe.message()), false
		}
		return m, b.ended(err, req), false
	}
	// Zero would mean mcpwire's default: at least a millisecond is left.
	m.release, m.idle, m.hard = release, max(idle-waited, time.Millisecond), max(hard-waited, time.Millisecond)
	m.waited = waited > 0
	return m, outcome{}, true
}

// settle records against the grant's quotas what the call came to: its
// result's bytes and the time since it was charged.
func (m *metered) settle(b *Bridge, resultBytes int) {
	if m.q != nil {
		m.q.Settle(m.charge, int64(resultBytes), b.grants.now().Sub(m.began))
	}
}

// quotaDenial is the quota_exceeded denial of a call ex refused: which
// quota, and, for a rate, when it refills.
func (b *Bridge) quotaDenial(ex *quota.Exceeded) outcome {
	b.metrics.quotaExceeded(ex.Kind)
	o := deny(capwire.CodeQuotaExceeded, ex.Message())
	o.denial.Quota = ex.Name()
	if ex.RefillIn > 0 {
		// Rounded up, so a caller that waits this long finds its token.
		o.denial.RetryMS = uint64((ex.RefillIn + time.Millisecond - 1) / time.Millisecond)
	}
	return o
}

// httpStatus is the HTTP status a failed remote call was answered with,
// 0 when there was none. Apart from the call path, so that a call that
// succeeded does not pay for errors.As's target escaping to the heap.
func httpStatus(err error) int {
	var he *mcpwire.HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// maxAuditValue caps each value written to the audit trail when
// audit_values is set, so one huge call cannot flood the log: larger
// arguments are not logged (their size is), and result text is cut.
const maxAuditValue = 16 << 10

var emptyMap = []byte{0x80}

// isMsgPackMap reports whether a MessagePack value starting with b is a
// map (fixmap, map 16 or map 32).
func isMsgPackMap(b byte) bool { return b&0xf0 == 0x80 || b == 0xde || b == 0xdf }

// failed translates an error from the MCP call into a denial. What the
// server said, or what was said about it, is passed through s.redactor():
// none of its env's values reaches the caller.
func (b *Bridge) failed(ctx context.Context, s *server, req callRequest, err error) outcome {
	var rpc *mcpwire.RPCError
	var dead *mcpwire.DeadError
	var reqErr *mcpwire.RequirementError
	switch {
	case ctx.Err() != nil:
		return b.ended(context.Cause(ctx), req)
	case errors.Is(err, mcpwire.ErrInputRequired):
		return deny(capwire.CodeInputRequired, "server "+quote(req.server)+" asked for client input capbridge cannot give: "+s.redactor().Cut(err.Error(), 1024))
	case errors.As(err, &reqErr):
		// A 2026-07-28 refusal naming what the server requires (client
		// capabilities, a protocol version): its own words say more
		// than the bare code.
		o := deny(capwire.CodeServerError, "server "+quote(req.server)+" refused "+quote(req.tool)+": "+s.redactor().Cut(reqErr.Error(), 1024))
		o.denial.RPCCode = int(reqErr.RPC.Code)
		return o
	case errors.As(err, &rpc):
		o := deny(capwire.CodeServerError, "server "+quote(req.server)+" answered error "+strconv.FormatInt(rpc.Code, 10)+": "+s.redactor().Cut(rpc.Message, 1024))
		o.denial.RPCCode = int(rpc.Code)
		return o
	case errors.As(err, &dead):
		return deny(capwire.CodeServerUnavailable, "server "+quote(req.server)+" died: "+s.redactor().Text(dead.Reason.Error())+s.callerStderr(dead.Stderr))
	case errors.Is(err, mcpwire.ErrTimeout):
		return deny(capwire.CodeTimeout, "server "+quote(req.server)+" did not answer "+quote(req.tool)+" in time")
	case errors.Is(err, mcpwire.ErrInvalidArgument):
		return deny(capwire.CodeBadArguments, "the arguments cannot be sent: "+err.Error())
	case errors.Is(err, mcpwire.ErrTaskCancelled):
		return deny(capwire.CodeCancelled, "server "+quote(req.server)+" cancelled the task running "+quote(req.tool)+": "+s.redactor().Cut(err.Error(), 1024))
	case errors.Is(err, mcpwire.ErrBusy):
		return deny(capwire.CodeOverloaded, "server "+quote(req.server)+" has too many calls in flight")
	case errors.Is(err, mcpwire.ErrProtocol):
		o := deny(capwire.CodeResultMalformed, "server "+quote(req.server)+" sent a malformed result: "+s.redactor().Text(err.Error()))
		var pf *mcpwire.ProtocolFault
		if errors.As(err, &pf) {
			o.denial.Path = pf.Path
		}
		return o
	default:
		return deny(capwire.CodeServerUnavailable, "server "+quote(req.server)+": "+s.redactor().Text(withoutTail(err)))
	}
}

// ended translates why a call ended before its server answered (its
// context's cause, or errCallTimeout from admission) into a denial.
func (b *Bridge) ended(cause error, req callRequest) outcome {
	switch {
	case errors.Is(cause, errCallTimeout):
		return deny(capwire.CodeTimeout, "call to "+quote(req.tool)+" on server "+quote(req.server)+" timed out")
	case errors.Is(cause, ErrRevoked):
		return deny(capwire.CodeRevoked, "the grant was revoked during the call")
	case errors.Is(cause, ErrGrantExpired):
		return deny(capwire.CodeRevoked, "the grant expired during the call")
	case errors.Is(cause, errShuttingDown):
		return deny(capwire.CodeShuttingDown, "capbridge is shutting down")
	case errors.Is(cause, errCancelled), errors.Is(cause, errDisconnected):
		return deny(capwire.CodeCancelled, "the call was cancelled")
	default:
		return deny(capwire.CodeCancelled, "the call ended: "+cause.Error())
	}
}

// reduce turns an MCP result into the capability result: text blocks
// survive (up to max_result_text in all, beyond which the text is cut at a
// character boundary and truncated is set), every other block becomes
// {"type":"other","kind":…} with what the program can use of it
// (blockOf), structuredContent becomes MessagePack, and isError is
// carried.
func (b *Bridge) reduce(res *mcpwire.CallToolResult) outcome {
	// The result, its content when that is one block (what most tools
	// answer) and the message the reply is sent in are one allocation.
	one := &struct {
		m   capwire.ResultMsg
		blk [1]capwire.Block
	}{}
	r := &one.m.Result
	r.IsError, r.Content = res.IsError, one.blk[:0]
	if len(res.Content) > len(one.blk) {
		r.Content = make([]capwire.Block, 0, len(res.Content))
	}
	budget := resultBudget{text: b.cfg.Bridge.MaxResultText, data: b.cfg.Bridge.MaxResultData}
	size := 0
	for i, c := range res.Content {
		if c.Type != "text" {
			blk, n, err := budget.blockOf(c)
			if err != nil {
				return err.deny("result", "/content/"+strconv.Itoa(i))
			}
			r.Content = append(r.Content, blk)
			r.Truncated = r.Truncated || budget.cut
			size += n
			continue
		}
		text := budget.keepText(c.Text)
		r.Truncated = r.Truncated || budget.cut
		size += len(text)
		r.Content = append(r.Content, capwire.Block{Type: capwire.BlockText, Text: text})
	}
	if res.StructuredContent != nil {
		mp, err := interchange.ToMsgPack(res.StructuredContent)
		if err != nil {
			return conversionDenial(capwire.CodeResultMalformed, "the server's structuredContent cannot cross", "/structuredContent", err)
		}
		r.Structured = mp
		size += len(mp)
	}
	return outcome{result: r, msg: &one.m, resultBytes: size, from: res}
}

// conversionDenial denies a value interchange could not convert. The
// denial is built from the *interchange.Fault's fields: its kind (a
// stable identifier) and its path, under prefix, which also becomes the
// denial's path. Any other error is reported as it is.
func conversionDenial(code, what, prefix string, err error) outcome {
	var f *interchange.Fault
	if !errors.As(err, &f) {
		return deny(code, what+": "+err.Error())
	}
	path := prefix + f.Path
	o := deny(code, what+": "+f.Kind.String()+" at "+quote(path))
	o.denial.Path = path
	return o
}

// kindOf bounds a server-chosen block type before it is echoed to a
// program: a kind is short, printable ASCII, or it is reported as "unknown".
func kindOf(t string) string {
	if t == "" || len(t) > 64 {
		return "unknown"
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 0x21 || t[i] > 0x7e {
			return "unknown"
		}
	}
	return t
}

// quote renders a name a client or server chose for a message: valid
// UTF-8, at most 128 bytes, in double quotes.
func quote(s string) string { return `"` + truncate.Ellipsis(s, 128) + `"` }
