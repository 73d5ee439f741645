package capwire

import (
	"context"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// What a program asks capbridge itself (the capability CapBridge), within
// its grant: a tool's whole declaration, a search over the tools it may
// call, and a resource of a server whose resources it may read.

// Match is one tool Search found.
type Match struct {
	Server    string `msgpack:"server"`
	Func      string `msgpack:"func"` // the façade function
	Tool      string `msgpack:"tool"` // the wire name
	Signature string `msgpack:"signature"`
	Score     int    `msgpack:"score"` // higher is better
}

// Describe returns the whole declarations, in Go, of the named tools of
// server (by function or wire name; none named: every tool the grant
// allows): what a lean surface leaves out.
func (c *Client) Describe(ctx context.Context, server string, tools ...string) (string, error) {
	r, err := c.call(ctx, CapBridge, CapBridge, "describe", map[string]any{"server": server, "tools": tools, "lang": "go"})
	if err != nil {
		return "", err
	}
	return r.Text(), nil
}

// Search finds the tools the grant allows by the words of query, best
// first, at most limit of them (0: ten).
func (c *Client) Search(ctx context.Context, query string, limit int) ([]Match, error) {
	r, err := c.call(ctx, CapBridge, CapBridge, "search", map[string]any{"query": query, "limit": max(limit, 0), "lang": "go"})
	if err != nil {
		return nil, err
	}
	var out struct {
		Matches []Match `msgpack:"matches"`
	}
	if err := r.Decode(&out); err != nil {
		return nil, fmt.Errorf("capwire: search: %w", err)
	}
	return out.Matches, nil
}

// ReadResource reads the resource at uri from server, which the grant
// must allow reading (a resource link's URI, say). Each entry of the
// resource is a block of kind "resource": URI, MIME, and Text or Data.
func (c *Client) ReadResource(ctx context.Context, server, uri string) (*Result, error) {
	return c.call(ctx, CapBridge, CapBridge, "read_resource", map[string]any{"server": server, "uri": uri})
}

// Describe is Client.Describe on the shared client.
func Describe(ctx context.Context, server string, tools ...string) (string, error) {
	c, err := Shared(ctx)
	if err != nil {
		return "", err
	}
	return c.Describe(ctx, server, tools...)
}

// Search is Client.Search on the shared client.
func Search(ctx context.Context, query string, limit int) ([]Match, error) {
	c, err := Shared(ctx)
	if err != nil {
		return nil, err
	}
	return c.Search(ctx, query, limit)
}

// ReadResource is Client.ReadResource on the shared client.
func ReadResource(ctx context.Context, server, uri string) (*Result, error) {
	c, err := Shared(ctx)
	if err != nil {
		return nil, err
	}
	return c.ReadResource(ctx, server, uri)
}

// Start runs a call of tool (its wire name) on server in the background,
// within the grant, and returns its handle at once: Collect waits for its
// result later, from this connection or another under the same grant. A
// grant holds at most 16 started calls not yet collected. ctx bounds
// only the starting.
func (c *Client) Start(ctx context.Context, server, tool string, args any) (string, error) {
	raw, err := encodeArgsRaw(args)
	if err != nil {
		return "", err
	}
	r, err := c.call(ctx, CapBridge, CapBridge, "start", map[string]any{"server": server, "tool": tool, "args": raw})
	if err != nil {
		return "", err
	}
	return r.Text(), nil
}

// Collect waits, within ctx, for the result of the call started as
// handle, as Call returns a call's result or refusal; a ctx that ends
// first leaves the call running, to collect again.
func (c *Client) Collect(ctx context.Context, handle string) (*Result, error) {
	return c.call(ctx, CapBridge, CapBridge, "collect", map[string]any{"handle": handle})
}

// Drop cancels the call started as handle and forgets it.
func (c *Client) Drop(ctx context.Context, handle string) error {
	_, err := c.call(ctx, CapBridge, CapBridge, "drop", map[string]any{"handle": handle})
	return err
}

// Start is Client.Start on the shared client.
func Start(ctx context.Context, server, tool string, args any) (string, error) {
	c, err := Shared(ctx)
	if err != nil {
		return "", err
	}
	return c.Start(ctx, server, tool, args)
}

// Collect is Client.Collect on the shared client.
func Collect(ctx context.Context, handle string) (*Result, error) {
	c, err := Shared(ctx)
	if err != nil {
		return nil, err
	}
	return c.Collect(ctx, handle)
}

// Drop is Client.Drop on the shared client.
func Drop(ctx context.Context, handle string) error {
	c, err := Shared(ctx)
	if err != nil {
		return err
	}
	return c.Drop(ctx, handle)
}

// encodeArgsRaw encodes args as a call's args, a MessagePack map, for
// embedding in another call's arguments.
func encodeArgsRaw(args any) (msgpack.RawMessage, error) {
	out, err := appendArgs(nil, args)
	if err != nil {
		return nil, err
	}
	return msgpack.RawMessage(out), nil
}
