// Package mcpproto is the message layer of the MCP stdio client: it cuts
// a server's stdout into lines (Framer), classifies each line as a
// JSON-RPC message (DecodeMessage, SplitBatch) and decodes the MCP
// results the client reads (DecodeInitializeResult, DecodeToolsPage,
// DecodeCallToolResult), without I/O.
//
// It lives under internal/ so that mcpwire, the fuzz tests and codegen
// share one reading of the protocol while mcpwire's public API stays the
// client's. Its errors are mcpwire's: their text carries the "mcpwire:"
// prefix and ErrProtocol is mcpwire.ErrProtocol. Every decoder is total:
// hostile bytes yield a *MessageFault, *ProtocolFault or *FramingFault.
package mcpproto
