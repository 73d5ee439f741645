package bridge

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/mcpwire"
)

type readArgs struct {
	Server string `msgpack:"server"`
	URI    string `msgpack:"uri"`
}

// readResource forwards resources/read to a server whose resources the
// grant allows, under the same admission, deadlines and audit as a tool
// call, and reduces the contents as it reduces embedded resources: one
// "resource" block per entry, text counted against max_result_text and
// bytes against max_result_data.
func (b *Bridge) readResource(ctx context.Context, g *Grant, a readArgs, timeoutMS uint64) outcome {
	s, ok := b.lookup(a.Server)
	switch {
	case !ok || !g.Reaches(a.Server):
		return deny(capwire.CodeNotGranted, "this grant does not reach server "+quote(a.Server))
	case !g.ReadsResources(a.Server):
		return deny(capwire.CodeNotGranted, "this grant does not allow reading the resources of server "+quote(a.Server))
	case a.URI == "" || len(a.URI) > maxBlockURI || !utf8.ValidString(a.URI):
		o := deny(capwire.CodeBadArguments, "uri must be a non-empty UTF-8 string of at most "+strconv.Itoa(maxBlockURI)+" bytes")
		o.denial.Path = "/uri"
		return o
	}
	s, t, refused := b.enter(a.Server, s)
	if refused != nil {
		return *refused
	}
	defer s.leave()
	// A read counts against the grant's quotas as a call of the server's
	// "resources/read", its URI as its argument bytes.
	req := callRequest{server: a.Server, tool: readOp, timeoutMS: timeoutMS, grant: g}
	m, denied, ok := b.meter(ctx, s, req, s.cfg(), len(a.URI))
	if !ok {
		return denied
	}
	var answered <-chan struct{}
	res, err := t.client.ReadResource(ctx, a.URI, mcpwire.CallOptions{
		IdleTimeout: m.idle, MaxTimeout: m.hard,
		Abandoned: func(c <-chan struct{}) { answered = c }})
	if answered != nil {
		s.holdSlot(answered, m.release)
	} else {
		m.release()
	}
	if err != nil {
		s.errs.Add(1)
		m.settle(b, 0)
		return b.failed(ctx, s, req, err)
	}
	budget := resultBudget{text: b.cfg.Bridge.MaxResultText, data: b.cfg.Bridge.MaxResultData}
	r := &capwire.Result{Content: make([]capwire.Block, 0, len(res.Contents))}
	size := 0
	for i, c := range res.Contents {
		blk, n, f := budget.contentsOf(c)
		if f != nil {
			return f.deny("resource", "/contents/"+strconv.Itoa(i))
		}
		r.Content = append(r.Content, blk)
		r.Truncated = r.Truncated || budget.cut
		size += n
	}
	m.settle(b, size)
	return outcome{result: r, resultBytes: size}
}

// readOp is what a resource read is called where a tool's name would be:
// its audit line, its quota scope ("server/resources/read").
const readOp = "resources/read"

// Resources answers the control plane's resources request: the server's
// resources and resource templates, each listing bounded by the server's
// call_timeout. A server without resources (-32601) has none.
func (h *controlHandler) Resources(ctx context.Context, r *control.ResourcesRequest) (*control.ResourceList, error) {
	s, ok := h.b.lookup(r.Server)
	if !ok {
		return nil, &control.Error{Code: control.CodeUnknownServer, Message: "no server is called " + quote(r.Server)}
	}
	t, err := s.ready()
	if err != nil {
		return nil, &control.Error{Code: control.CodeUnavailable, Message: s.unavailableMessage(err)}
	}
	out := &control.ResourceList{}
	for _, l := range []struct {
		list func(context.Context) ([][]byte, error)
		dst  *string
	}{{t.client.ListResources, &out.Resources}, {t.client.ListResourceTemplates, &out.Templates}} {
		lctx, cancel := context.WithTimeout(ctx, s.cfg().CallTimeout)
		items, err := l.list(lctx)
		cancel()
		var rpc *mcpwire.RPCError
		switch {
		case errors.As(err, &rpc) && rpc.Code == -32601:
			items = nil
		case err != nil:
			return nil, &control.Error{Code: control.CodeInternal, Message: "server " + quote(r.Server) + ": " + s.redactor().Cut(err.Error(), 1024)}
		}
		*l.dst = "[" + string(bytes.Join(items, []byte(","))) + "]"
	}
	return out, nil
}
