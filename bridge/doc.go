// Package bridge implements capbridge's service: it owns the configured MCP
// servers, issues grants to code-mode executions, and answers their
// capability calls.
//
// What the package holds:
//
//   - Grants (grants.go): an unguessable 128-bit token per execution,
//     naming the servers (and optionally the tools) it may reach, with a
//     time to live. A token is "cbt1.<id>.<secret>": the id is public and
//     names the grant in the audit trail and in revoke; the secret is
//     compared in constant time. Revocation and expiry cancel the grant's
//     context, which every connection and call under it derives from.
//   - Sockets (socket.go): Unix sockets created with their final mode and
//     group before anyone can connect, a live socket never stolen, a stale
//     one cleared, removal on close, and SO_PEERCRED for every connection.
//   - Readiness (ready.go): sd_notify and atomic ready files for the
//     harness that launches the service.
//
// Configuration is read by the subpackage [github.com/capbridge/capbridge/bridge/config].
package bridge
