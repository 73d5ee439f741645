package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/truncate"
)

// The audit trail cannot be flooded, and does not fail silently:
//
//   - every string a client or a server chose is clipped where the trail
//     and the logs repeat it (clip);
//   - each grant may cause at most audit_grant_budget bytes of lines
//     (charge); the lines no grant pays for (a refused handshake whose
//     token names no live grant) are rate-limited (b.strangerAudit);
//   - every line lost, to a failed write, a spent budget or the rate, is
//     counted (capbridge_audit_lines_lost_total) and the failure logged,
//     rate-limited;
//   - under audit_fail = "closed" (the default) no call is made while the
//     trail cannot be written, nor under a grant whose budget is spent
//     (auditBlocked), so nothing a program does goes unrecorded for more
//     than the batch in flight when the disk filled.

// maxAuditString bounds each string a client or a server chose (a
// server or tool name a call named, a tool name a listing gave) where the
// audit trail and the logs repeat it, as the metrics labels are bounded:
// a program that names a tool of 16 MiB writes 128 bytes of it, not 16
// MiB a line.
const maxAuditString = 128

// auditLineCost is what a call, connect or refusal line costs a grant's
// budget beyond its values: more than such a line takes (about 320
// bytes, with both names at maxAuditString), so the budget is an upper
// bound on the bytes written.
const auditLineCost = 640

// clip renders such a string for the audit trail and the logs: valid
// UTF-8, at most maxAuditString bytes and a "…" where it was cut.
func clip(s string) string { return truncate.Ellipsis(s, maxAuditString) }

// clipAll is clip of each.
func clipAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clip(s)
	}
	return out
}

// maxAuditNames bounds the names one audit line lists: a server's
// listing may hold thousands of tools, all of them changed at each
// announcement.
const maxAuditNames = 64

// auditNames is clip of each of the first maxAuditNames of ss, and then
// how many more there are.
func auditNames(ss []string) []string { return auditFirst(clipAll(ss)) }

// auditFirst is the first maxAuditNames of ss, and then how many more
// there are.
func auditFirst(ss []string) []string {
	if len(ss) <= maxAuditNames {
		return ss
	}
	return append(ss[:maxAuditNames:maxAuditNames], fmt.Sprintf("… and %d more", len(ss)-maxAuditNames))
}

// charge takes cost bytes of g's audit budget and reports whether its
// line may be written: always for the operator (g nil), and for a grant
// while its budget lasts (the line that spends it included). A line
// refused is counted; the first one refused is announced once, in a line
// no budget pays for.
func (b *Bridge) charge(g *Grant, cost int) bool {
	if g == nil {
		return true
	}
	if g.auditLeft.Add(-int64(cost))+int64(cost) > 0 {
		return true
	}
	g.auditDropped.Add(1)
	b.metrics.auditLost(lostBudget, 1)
	if g.auditSpent.CompareAndSwap(false, true) {
		action := "its calls are refused (audit_fail closed)"
		if !b.auditClosed {
			action = "its calls are served and their lines dropped (audit_fail open)"
		}
		b.audit.Warn().Str("event", "audit_budget_spent").Str("grant", g.ID).Int("budget", b.cfg.Bridge.AuditGrantBudget).
			Str("action", action).Msg("the grant has spent its audit budget")
		b.log.Warn().Str("grant", g.ID).Int("audit_grant_budget", b.cfg.Bridge.AuditGrantBudget).Str("action", action).
			Msg("a grant has spent its audit budget")
	}
	return false
}

// auditEnded writes, when g ends, how many of its lines its spent budget
// dropped, if any; and, when it expired or capbridge shut down, its
// totals (a revoke's line carries them, control.go), so every grant's
// end is recorded with what it did.
func (b *Bridge) auditEnded(g *Grant) {
	context.AfterFunc(g.Context(), func() {
		if n := g.auditDropped.Load(); n > 0 {
			b.audit.Warn().Str("event", "audit_lines_dropped").Str("grant", g.ID).Int64("lines", n).Msg("lines the grant's audit budget dropped")
		}
		reason := "expired"
		switch cause := context.Cause(g.Context()); {
		case errors.Is(cause, ErrRevoked):
			return
		case errors.Is(cause, errShuttingDown):
			reason = "shutdown"
		case !errors.Is(cause, ErrGrantExpired):
			reason = "other"
		}
		u := g.Usage()
		b.audit.Info().Str("event", "grant_end").Str("grant", g.ID).Str("reason", reason).
			Int64("calls", u.Calls).Int64("denied", u.Denied).Int64("arg_bytes", u.ArgBytes).Int64("result_bytes", u.ResultBytes).
			Int64("took_ms", u.Took.Milliseconds()).Msg("grant ended")
	})
}

// auditBlocked reports, under audit_fail = "closed", why a call under g
// (nil: the operator's) must not be made: the trail cannot be written,
// or the grant's budget is spent. It costs a call two atomic loads, and
// nothing under "open".
func (b *Bridge) auditBlocked(g *Grant) (outcome, bool) {
	if !b.auditClosed {
		return outcome{}, false
	}
	if b.auditOut != nil && b.auditOut.Broken() {
		return deny(capwire.CodeOverloaded, "capbridge cannot write its audit trail, and makes no call it cannot record (audit_fail = \"closed\"); try again later"), true
	}
	if g != nil && g.auditLeft.Load() <= 0 {
		return deny(capwire.CodeNotGranted, "this grant has spent its audit budget (audit_grant_budget, "+strconv.Itoa(b.cfg.Bridge.AuditGrantBudget)+" bytes of audit lines), and no call is made that cannot be recorded; ask for a new grant"), true
	}
	return outcome{}, false
}

// auditLost is what the audit writer reports of a failed write: counted,
// and logged at the logs' rate.
func (b *Bridge) auditLost(lines int, err error) {
	b.metrics.auditLost(lostWrite, lines)
	b.log.Error().Err(err).Int("lines", lines).Msg("cannot write the audit trail; lines lost")
}

// Reasons audit lines are lost, the reason label of
// capbridge_audit_lines_lost_total.
const (
	lostWrite  = "write"  // the write failed (a full disk, a closed pipe)
	lostBudget = "budget" // the grant's audit budget was spent
	lostRate   = "rate"   // a line no grant pays for, over the rate
)

// SwapAuditWriter makes w the audit trail's writer from now on, after
// writing what is batched to the current one, which it returns for the
// caller to close: serve's SIGHUP, reopening the file logrotate renamed.
// It is an error when the bridge has no AuditWriter.
func (b *Bridge) SwapAuditWriter(w io.Writer) (io.Writer, error) {
	if b.auditOut == nil {
		return nil, errors.New("bridge: the audit trail has no writer of its own")
	}
	return b.auditOut.Swap(w)
}

// auditCall writes the one audit line of a call: who, what, how big, how
// long, and how it ended, within the grant's budget. The server and tool
// are the caller's words, clipped. Argument and result values are logged
// only when audit_values is set, each capped at maxAuditValue bytes.
//
// The grant's accounting (account) is not done here: it must be done
// before the caller can see the call's reply.
func (b *Bridge) auditCall(g *Grant, peer PeerCred, server, tool string, o outcome, took time.Duration) {
	b.metrics.retired(server, tool, o, took)
	server, tool = clip(server), clip(tool)
	var resultText, message string
	if b.cfg.Bridge.AuditValues {
		if o.result != nil {
			var text strings.Builder
			for _, c := range o.result.Content {
				if c.Type == "text" && text.Len() < maxAuditValue {
					text.WriteString(truncate.String(c.Text, min(len(c.Text), maxAuditValue-text.Len())))
				}
			}
			resultText = text.String()
		} else if o.denial != nil {
			message = o.denial.Message
		}
	}
	if !b.charge(g, auditLineCost+len(server)+len(tool)+len(o.argValues)+len(resultText)+len(message)) {
		return
	}
	ev := b.audit.Info().Str("event", "call")
	if g != nil {
		ev = ev.Str("grant", g.ID)
		if g.run != nil {
			ev = ev.Str("run", g.run.ID)
		}
	} else {
		ev = ev.Str("grant", "operator")
	}
	code := "ok"
	if o.denial != nil {
		code = o.denial.Code
	} else if o.result.IsError {
		code = "tool_error"
	}
	ev = ev.Int32("peer_pid", peer.PID).Uint32("peer_uid", peer.UID).
		Str("server", server).Str("tool", tool).
		Int("arg_bytes", o.argBytes).Int("result_bytes", o.resultBytes).
		Dur("took", took).Str("outcome", code)
	if o.policy != "" {
		ev = ev.Str("policy", o.policy)
	}
	if o.transport != "" {
		ev = ev.Str("transport", o.transport)
	}
	if o.httpStatus != 0 {
		ev = ev.Int("http_status", o.httpStatus)
	}
	if b.cfg.Bridge.AuditValues {
		if o.argValues != nil {
			ev = ev.RawJSON("args", o.argValues)
		}
		if o.result != nil {
			ev = ev.Str("result_text", resultText)
		} else if o.denial != nil {
			ev = ev.Str("message", message)
		}
	}
	ev.Msg("call")
}

// account adds a call's outcome to its grant's usage (nil: the
// operator's, which is not counted), whether or not the grant's audit
// budget still pays for its line. It runs before the reply is sent: a
// harness that revokes the grant once its program has every reply reads
// totals that include every call.
func account(g *Grant, o outcome, took time.Duration) {
	if g == nil {
		return
	}
	g.usage.calls.Add(1)
	g.usage.argBytes.Add(int64(o.argBytes))
	g.usage.resultBytes.Add(int64(o.resultBytes))
	g.usage.took.Add(int64(took))
	if o.denial != nil {
		g.usage.denied.Add(1)
	}
}

// refusedAudit is the logger of a refused handshake's audit line. The
// grant the token named pays for it only when the token's secret was
// right (verified: refused for its peer uid or a connection budget),
// since a grant's id is no secret (status and metrics show it) and
// whoever can reach the call socket could otherwise spend the grant's
// audit budget, and under audit_fail = "closed" cut off its calls, with
// hellos that name it. Every other refusal is the strangers': rate-
// limited, and what it drops is counted.
func (b *Bridge) refusedAudit(grantID string, verified bool) *zerolog.Event {
	if g := b.grants.live1(grantID); g != nil && verified {
		if !b.charge(g, auditLineCost) {
			return nil
		}
		return b.audit.Info()
	}
	l := b.audit.Hook(b.strangerAudit)
	return l.Info()
}

// auditClosedMode reports whether audit_fail is "closed".
func auditClosedMode(c *config.Config) bool { return c.Bridge.AuditFail != config.AuditFailOpen }
