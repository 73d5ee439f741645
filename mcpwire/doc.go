// Package mcpwire implements a hardened client for the Model Context
// Protocol over stdio that owns its server process.
//
// The pure layer decodes and encodes without I/O: DecodeMessage
// classifies one JSON-RPC line strictly (response, server request,
// notification) and keeps params, results, schemas and structured
// content raw; DecodeInitializeResult, DecodeToolsPage and
// DecodeCallToolResult read the MCP results; Framer cuts the stdout
// stream into bounded, UTF-8-checked lines. Every decoder is total:
// hostile bytes yield a *MessageFault, *ProtocolFault or *FramingFault.
//
// The Conn seam carries bytes to one server: Spawn starts a child
// process (argv only, explicit environment, own process group,
// Pdeathsig, stderr always drained into a bounded ring), NewMemory
// gives an in-process pair for tests. Client runs the protocol over a
// Conn: handshake, tools/list, tools/call and ping with many calls in
// flight, per-call deadlines, cancellation, progress, and death that
// settles every caller with the reason and the stderr tail.
//
// docs/mcpwire.md describes the state machine, the death rules, the
// shutdown sequence and every bound with its default.
package mcpwire
