package mcpwire

import "github.com/capbridge/capbridge/internal/mcpproto"

// The MCP results a Client returns. They are decoded by the message
// layer (internal/mcpproto) and named here for the client's callers: the
// bridge serves Tool and reduces CallToolResult, and an embedder reads
// the same values.
type (
	// Tool is one tools/list entry (Client.ListTools).
	Tool = mcpproto.Tool
	// ToolAnnotations are a Tool's behaviour hints.
	ToolAnnotations = mcpproto.ToolAnnotations
	// CallToolResult is a decoded tools/call result (Client.CallTool).
	CallToolResult = mcpproto.CallToolResult
	// ContentBlock is one block of a CallToolResult.
	ContentBlock = mcpproto.ContentBlock
	// InitializeResult is the server's answer to initialize
	// (Client.Initialize).
	InitializeResult = mcpproto.InitializeResult
	// Implementation is the serverInfo of an InitializeResult.
	Implementation = mcpproto.Implementation
)
