package bridge

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/codegen"
)

// The capbridge capability (capwire.CapBridge) is what a program asks
// capbridge itself, within its grant: describe and search, so that a
// program shown only a lean rung of the surface can still find a tool and
// learn it whole, and read_resource, a resource of a server whose
// resources the grant allows.

// Operations of the capbridge capability.
const (
	OpDescribe     = "describe"
	OpSearch       = "search"
	OpReadResource = "read_resource"
	OpStart        = "start"
	OpCollect      = "collect"
	OpDrop         = "drop"
)

type describeArgs struct {
	Server string   `msgpack:"server"`
	Tools  []string `msgpack:"tools"`
	Lang   string   `msgpack:"lang"`
}

type searchArgs struct {
	Query string `msgpack:"query"`
	Limit uint64 `msgpack:"limit"`
	Lang  string `msgpack:"lang"`
}

// metaMatch is one search match in a search result's structured content.
type metaMatch struct {
	Server    string `msgpack:"server"`
	Func      string `msgpack:"func"`
	Tool      string `msgpack:"tool"`
	Signature string `msgpack:"signature"`
	Score     int    `msgpack:"score"`
}

// meta answers a call of the capbridge capability under grant g, and
// names what the audit line records: a resource read as the server's
// "resources/read", the rest as capbridge's own operation. traceparent is
// the envelope's, which a started call is traced under.
func (b *Bridge) meta(ctx context.Context, g *Grant, peer PeerCred, op string, args []byte, timeoutMS uint64, traceparent string) (o outcome, server, tool string) {
	if !b.flight.Admit() {
		return deny(capwire.CodeShuttingDown, "capbridge is shutting down"), capwire.CapBridge, op
	}
	defer b.flight.Retire()
	switch op {
	case OpDescribe:
		var a describeArgs
		if o, ok := metaArgs(args, &a); !ok {
			return o, capwire.CapBridge, op
		}
		return b.describeFor(g, a), capwire.CapBridge, op
	case OpSearch:
		var a searchArgs
		if o, ok := metaArgs(args, &a); !ok {
			return o, capwire.CapBridge, op
		}
		return b.searchFor(g, a), capwire.CapBridge, op
	case OpReadResource:
		var a readArgs
		if o, ok := metaArgs(args, &a); !ok {
			return o, capwire.CapBridge, op
		}
		return b.readResource(ctx, g, a, timeoutMS), a.Server, readOp
	case OpStart:
		var a startArgs
		if o, ok := metaArgs(args, &a); !ok {
			return o, capwire.CapBridge, op
		}
		return b.start(g, peer, a, traceparent), capwire.CapBridge, op
	case OpCollect, OpDrop:
		var a handleArgs
		if o, ok := metaArgs(args, &a); !ok {
			return o, capwire.CapBridge, op
		}
		if op == OpDrop {
			return b.drop(g, a.Handle), capwire.CapBridge, op
		}
		return b.collect(ctx, g, a.Handle, timeoutMS), capwire.CapBridge, op
	}
	return deny(capwire.CodeUnknownTool, "capability \"capbridge\" has no operation "+quote(op)+" (describe, search, read_resource, start, collect, drop)"), capwire.CapBridge, "unknown"
}

// metaArgs decodes a capbridge operation's arguments into v.
func metaArgs(args []byte, v any) (outcome, bool) {
	if len(args) == 0 {
		return outcome{}, true
	}
	if err := msgpack.Unmarshal(args, v); err != nil {
		o := deny(capwire.CodeBadArguments, "the arguments do not fit the operation: "+err.Error())
		return o, false
	}
	return outcome{}, true
}

// metaLang checks a language the program asked for ("" is Go).
func metaLang(lang string) (outcome, bool) {
	if _, err := codegen.Preamble(codegen.Lang(lang)); err != nil {
		o := deny(capwire.CodeBadArguments, "no surface in language "+quote(lang)+" (go, ts or python)")
		o.denial.Path = "/lang"
		return o, false
	}
	return outcome{}, true
}

// facadeFor is server's façade in lang, if g reaches the server; a
// server the grant does not reach is not_granted whether or not it
// exists, so a program learns nothing of servers beyond its grant.
func (b *Bridge) facadeFor(g *Grant, server, lang string) (*codegen.Generated, outcome, bool) {
	s, ok := b.lookup(server)
	if !ok || !g.Reaches(server) {
		return nil, deny(capwire.CodeNotGranted, "this grant does not reach server "+quote(server)), false
	}
	gen, err := s.facade()
	if err != nil {
		return nil, deny(capwire.CodeServerUnavailable, s.unavailableMessage(err)), false
	}
	gen, err = gen.In(codegen.Lang(lang))
	if err != nil {
		return nil, deny(capwire.CodeServerUnavailable, "server "+quote(server)+": generating "+quote(lang)+": "+err.Error()), false
	}
	return gen, outcome{}, true
}

func (b *Bridge) describeFor(g *Grant, a describeArgs) outcome {
	if o, ok := metaLang(a.Lang); !ok {
		return o
	}
	gen, o, ok := b.facadeFor(g, a.Server, a.Lang)
	if !ok {
		return o
	}
	names := a.Tools
	if len(names) == 0 {
		// Every tool the grant allows, in listing order.
		names = slices.DeleteFunc(gen.ToolNames(), func(n string) bool { return !g.Allows(a.Server, n) })
	}
	for _, n := range names {
		wire, ok := gen.WireName(n)
		switch {
		case !ok:
			return deny(capwire.CodeUnknownTool, "server "+quote(a.Server)+" has no tool "+quote(n))
		case !g.Allows(a.Server, wire):
			return deny(capwire.CodeNotGranted, "this grant does not allow tool "+quote(wire)+" on server "+quote(a.Server))
		}
	}
	if len(names) == 0 {
		return textOutcome("")
	}
	decl, err := gen.Describe(names...)
	if err != nil {
		return deny(capwire.CodeUnknownTool, "server "+quote(a.Server)+": "+strings.TrimPrefix(err.Error(), "codegen: "))
	}
	return textOutcome(decl)
}

func (b *Bridge) searchFor(g *Grant, a searchArgs) outcome {
	switch {
	case strings.TrimSpace(a.Query) == "":
		o := deny(capwire.CodeBadArguments, "a search needs a query")
		o.denial.Path = "/query"
		return o
	case len(a.Query) > control.MaxSearchQuery:
		o := deny(capwire.CodeBadArguments, "the query is longer than "+strconv.Itoa(control.MaxSearchQuery)+" bytes")
		o.denial.Path = "/query"
		return o
	case a.Limit > control.MaxSearchLimit:
		o := deny(capwire.CodeBadArguments, "limit is more than "+strconv.Itoa(control.MaxSearchLimit))
		o.denial.Path = "/limit"
		return o
	}
	if o, ok := metaLang(a.Lang); !ok {
		return o
	}
	limit := int(a.Limit)
	if limit == 0 {
		limit = control.DefaultSearchLimit
	}
	matches := []metaMatch{}
	for _, s := range b.serverList() {
		name := s.name()
		if !g.Reaches(name) {
			continue
		}
		gen, _, ok := b.facadeFor(g, name, a.Lang)
		if !ok {
			continue // a server without a façade has nothing to find
		}
		for _, m := range gen.Search(a.Query, -1) {
			if g.Allows(name, m.Tool) {
				matches = append(matches, metaMatch{Server: name, Func: m.Func, Tool: m.Tool, Signature: m.Signature, Score: m.Score})
			}
		}
	}
	slices.SortStableFunc(matches, func(x, y metaMatch) int { return y.Score - x.Score })
	matches = matches[:min(limit, len(matches))]
	var text strings.Builder
	for i, m := range matches {
		if i > 0 {
			text.WriteByte('\n')
		}
		text.WriteString(m.Signature)
	}
	o := textOutcome(text.String())
	mp, err := msgpack.Marshal(map[string]any{"matches": matches})
	if err != nil {
		return deny(capwire.CodeResultMalformed, "capbridge could not encode the matches: "+err.Error())
	}
	o.result.Structured = mp
	o.resultBytes += len(mp)
	return o
}

// textOutcome is a result of one text block.
func textOutcome(s string) outcome {
	return outcome{result: &capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: s}}}, resultBytes: len(s)}
}
