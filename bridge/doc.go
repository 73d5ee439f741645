// Package bridge implements capbridge's service: it owns the configured MCP
// servers, issues grants to code-mode executions, and answers their
// capability calls.
//
// The package is the service core; each part names where it lives:
//
//   - Lifecycle (bridge.go): New, Start/Boot, Listen, Serve and Shutdown,
//     the accept loops of the call and control sockets.
//   - Audit (audit.go): the audit line, each grant's audit budget, and
//     what a trail that cannot be written does to calls (audit_fail).
//   - Admission (admit.go): connections per peer uid before and after the
//     hello, eviction of silent strangers, bytes held for partial frames.
//   - Calls (conn.go, call.go): one call-socket connection's workers and
//     its calls' exactly-one replies; the path of one call from grant
//     check to reduced result, and every failure mapped to one denial.
//   - Grants (grants.go): an unguessable 128-bit token per execution,
//     "cbt1.<id>.<secret>", naming the servers (and optionally tools) it
//     may reach, with a time to live; revocation and expiry cancel the
//     grant's context, which every connection and call under it derives
//     from.
//   - Servers (server.go, lifecycle.go): each server's supervisor
//     (restart with backoff, idle and maximum lifetimes), its published
//     tool table and façades, re-listing on list_changed.
//   - Policy and lock (policy.go, lockcheck.go): destructive tools, the
//     decisions the audit records, and what a listing that drifted from
//     the lock serves.
//   - Control (control.go): the owner-only control socket's handler.
//   - Metrics (metrics.go, metrics_listen.go): Prometheus exposition and
//     the optional listener, its connection cap, and the descriptor
//     limit every budget needs.
//   - Preflight (preflight.go): the socket checks doctor runs without
//     binding.
//
// Mechanisms that need nothing of the core are leaf packages under
// bridge/internal: capserver (the bridge's side of a capwire connection),
// fairshare (per-server fair admission among grants, and the account of
// calls in flight that shutdown drains), unixsock (sockets with their
// final mode, stale-socket clearing, peer credentials), auditlog (line
// batching that knows when a write failed, and per-message log rate
// limits) and redact (a server's secrets, and credential shapes,
// replaced in what callers are told). Configuration, including
// the evaluation of restrict guards, is [github.com/capbridge/capbridge/bridge/config];
// the control plane's wire is [github.com/capbridge/capbridge/bridge/control].
package bridge
