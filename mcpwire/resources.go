package mcpwire

import (
	"bytes"
	"context"
	"fmt"

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
	// The uri is also the request's Mcp-Name (2026-07-28's standard
	// headers require it of resources/read); earlier eras ignore it.
	raw, err := c.request(ctx, "resources/read", params, Args{}, uri, opt, true)
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

// maxListed bounds the entries one listing of resources or templates
// gathers, across its pages.
const maxListed = 4096

// ListResources lists the server's resources (resources/list), following
// nextCursor for at most Config.MaxPages pages and maxListed entries. Each
// entry is the server's JSON object, raw (uri and name checked).
func (c *Client) ListResources(ctx context.Context) ([][]byte, error) {
	return c.listAll(ctx, "resources/list", "resources", "uri")
}

// ListResourceTemplates lists the server's resource templates
// (resources/templates/list), as ListResources lists resources.
func (c *Client) ListResourceTemplates(ctx context.Context) ([][]byte, error) {
	return c.listAll(ctx, "resources/templates/list", "resourceTemplates", "uriTemplate")
}

func (c *Client) listAll(ctx context.Context, method, member, key string) ([][]byte, error) {
	var all [][]byte
	seen := map[string]bool{}
	var cursor []byte
	for page := 0; ; page++ {
		if page == c.cfg.MaxPages {
			return nil, fmt.Errorf("%w: %s: more than %d pages", ErrTooManyPages, method, c.cfg.MaxPages)
		}
		var params []byte
		switch {
		case c.Era() == EraModern:
			params = c.metaParams(cursor)
		case cursor != nil:
			params = append(append([]byte{'{'}, cursor...), '}')
		}
		raw, err := c.request(ctx, method, params, Args{}, "", CallOptions{}, true)
		if err != nil {
			return nil, err
		}
		if err := c.checkResult(method, raw); err != nil {
			return nil, err
		}
		p, err := mcpproto.DecodeListPage(method, member, key, raw.Bytes())
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			all = append(all, bytes.Clone(it))
		}
		if len(all) > maxListed {
			return nil, fmt.Errorf("mcpwire: %s: more than %d entries", method, maxListed)
		}
		if !p.HasNext {
			return all, nil
		}
		if seen[p.NextCursor] {
			return nil, fmt.Errorf("%w: %s: cursor %q repeated on page %d", ErrTooManyPages, method, p.NextCursor, page+1)
		}
		seen[p.NextCursor] = true
		cursor = jsonlex.AppendQuoted([]byte(`"cursor":`), p.NextCursor)
	}
}
