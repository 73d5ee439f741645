package mcpwire

import (
	"context"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
)

type (
	// ReadResourceResult is a decoded resources/read result
	// (Client.ReadResource).
	ReadResourceResult = mcpproto.ReadResourceResult
	// ResourceContents is one entry of a ReadResourceResult.
	ResourceContents = mcpproto.ResourceContents
)

// ReadResource reads the resource at uri (resources/read). The server
// must declare the resources capability; one that does not answers
// -32601, an *RPCError. Errors are as CallTool's; the call's deadlines
// are opt's.
func (c *Client) ReadResource(ctx context.Context, uri string, opt CallOptions) (*ReadResourceResult, error) {
	member := jsonlex.AppendQuoted([]byte(`"uri":`), uri)
	var params []byte
	if c.Era() == EraModern {
		params = c.metaParams(member)
	} else {
		params = append(append([]byte{'{'}, member...), '}')
	}
	raw, err := c.request(ctx, "resources/read", params, Args{}, "", opt, true)
	if err != nil {
		if c.Era() == EraModern {
			err = requirement("resources/read", err)
		}
		return nil, err
	}
	if err := c.checkResult("resources/read", raw); err != nil {
		return nil, err
	}
	return mcpproto.DecodeReadResourceResult(raw.Bytes())
}
