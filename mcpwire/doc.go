// Package mcpwire implements a hardened client for the Model Context
// Protocol over stdio that owns its server process.
//
// Start spawns a server (argv only, explicit environment, own process
// group, Pdeathsig, stderr always drained into a bounded ring) and runs
// the protocol with it; Connect runs it over any other Conn. A Client
// meets its server in the server's era, probing with server/discover for
// the stateless revision 2026-07-28 and falling back to the initialize
// handshake of the four legacy revisions, and does tools/list,
// tools/call and ping with many calls in flight, per-call deadlines,
// cancellation, progress, and a death that settles every caller with the
// reason and the stderr tail.
//
// The message layer underneath, which frames stdout into bounded UTF-8
// lines and decodes JSON-RPC envelopes and MCP results without I/O, is
// internal/mcpproto; the results it decodes are named here (Tool,
// CallToolResult, …) for the client's callers. Its faults match
// ErrProtocol.
//
// docs/mcpwire.md describes the state machine, the death rules, the
// shutdown sequence and every bound with its default.
package mcpwire
