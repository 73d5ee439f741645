package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/unixsock"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/truncate"
)

// serveControlConn runs one control-socket connection. The control plane
// is the operator's: the socket is mode 0600 and the peer must be
// capbridge's own user (or root); a peer that is neither is disconnected
// without a word. The protocol itself is package control's.
func (b *Bridge) serveControlConn(nc *net.UnixConn) {
	peer, err := unixsock.ReadPeerCred(nc)
	if err != nil || (int(peer.UID) != os.Getuid() && peer.UID != 0) {
		nc.Close()
		b.metrics.connRefused(true, "peer")
		b.log.Warn().Err(err).Uint32("peer_uid", peer.UID).Msg("control socket: refusing a peer that is not capbridge's user")
		return
	}
	srv := control.Server{Handler: &controlHandler{b: b, peer: peer}, WriteTimeout: b.cfg.Bridge.WriteTimeout}
	srv.ServeConn(b.ctx, nc)
}

// controlHandler is the bridge's side of the control plane for one
// connection; peer is who the audit trail names for its calls.
type controlHandler struct {
	b    *Bridge
	peer PeerCred
}

var _ control.Handler = (*controlHandler)(nil)

func (h *controlHandler) Grant(_ context.Context, r *control.GrantRequest) (*control.Granted, error) {
	b := h.b
	ttl := DefaultGrantTTL
	if r.TTLMS != nil {
		ms := *r.TTLMS
		// Compared in milliseconds first: the conversion would wrap.
		if ms < uint64(MinGrantTTL/time.Millisecond) || ms > uint64(MaxGrantTTL/time.Millisecond) {
			given := fmt.Sprintf("ttl_ms %d", ms)
			if int64(ms) < 0 {
				// MessagePack decoding wraps a negative integer into a
				// uint64; echoing that number would only confuse.
				given = "ttl_ms (negative, or past 2^63)"
			}
			return nil, &control.Error{Code: control.CodeBadRequest, Message: fmt.Sprintf("%s is not within [%d, %d] (%s to %s); leave ttl_ms out for the default, %s",
				given, MinGrantTTL/time.Millisecond, MaxGrantTTL/time.Millisecond, MinGrantTTL, MaxGrantTTL, DefaultGrantTTL)}
		}
		ttl = time.Duration(ms) * time.Millisecond
	}
	if len(r.Servers) == 0 {
		return nil, &control.Error{Code: control.CodeBadRequest, Message: "a grant must name at least one server"}
	}
	// Checked here, as well as by Grant, to give each refusal its code.
	for name, tools := range r.Servers {
		s, ok := b.lookup(name)
		if !ok {
			return nil, &control.Error{Code: control.CodeUnknownServer, Message: "no server is called " + quote(name)}
		}
		tab := s.current()
		for _, t := range tools {
			if tab != nil && !hasTool(tab, t) {
				return nil, &control.Error{Code: control.CodeUnknownTool, Message: "server " + quote(name) + " has no tool " + quote(t)}
			}
		}
	}
	for _, name := range r.Resources {
		if _, ok := r.Servers[name]; !ok {
			return nil, &control.Error{Code: control.CodeBadRequest, Message: "resources names server " + quote(name) + ", which the grant's servers do not"}
		}
	}
	quotas, err := requestQuotas(r.Quotas)
	if err != nil {
		return nil, &control.Error{Code: control.CodeBadRequest, Message: err.Error()}
	}
	spec := GrantSpec{Servers: r.Servers, TTL: ttl, PeerUID: r.PeerUID, AllowDestructive: r.AllowDestructive, Resources: r.Resources, Quotas: quotas}
	if r.Run != nil {
		if r.Run.ID == "" || len(r.Run.ID) > maxRunID || len(r.Run.Language) > maxRunID || len(r.Run.CodeSHA256) > maxRunID {
			return nil, &control.Error{Code: control.CodeBadRequest, Message: fmt.Sprintf("a run needs an id, and its id, language and code_sha256 are at most %d bytes each", maxRunID)}
		}
		spec.Run = &RunInfo{ID: r.Run.ID, Language: r.Run.Language, CodeSHA256: r.Run.CodeSHA256, Servers: slices.Sorted(maps.Keys(r.Servers))}
	}
	g, token, err := b.Grant(spec)
	switch {
	case errors.Is(err, ErrTooManyGrant):
		return nil, &control.Error{Code: control.CodeTooManyGrants, Message: err.Error()}
	case errors.Is(err, ErrBadQuota):
		return nil, &control.Error{Code: control.CodeBadRequest, Message: strings.TrimPrefix(err.Error(), "bridge: ")}
	}
	if err != nil {
		return nil, err
	}
	ev := b.audit.Info().Str("event", "grant").Str("grant", g.ID).Strs("servers", g.Servers()).Bool("allow_destructive", g.AllowsDestructive()).Strs("resources", r.Resources).Time("expires", g.Expires)
	if spec.Run != nil {
		ev = ev.Str("run", spec.Run.ID)
	}
	if qs := g.Quotas(b.grants.now()); len(qs) > 0 {
		// What the grant may use, as the CLI writes it: "rate=5,burst=5",
		// "gh:calls=10".
		shown := make([]string, len(qs))
		for i, q := range qs {
			shown[i] = q.Limits.String()
			if q.Scope != "" {
				shown[i] = clip(q.Scope) + ":" + shown[i]
			}
		}
		ev = ev.Strs("quotas", shown)
	}
	ev.Msg("grant issued")
	return &control.Granted{Token: token, Grant: g.ID, ExpiresMS: g.Expires.UnixMilli()}, nil
}

func (h *controlHandler) Revoke(ctx context.Context, r *control.RevokeRequest) (*control.Revoked, error) {
	given := strings.TrimSpace(r.Grant)
	g := h.b.grants.revoke(given)
	// The audit line names the grant's id, from an id or a token, and
	// nothing else that was given: a token mistyped (a space before it,
	// its prefix in capitals or cut off) would carry its secret whole.
	id := grantIDOf(given)
	switch {
	case g != nil:
		id = g.ID
	case id == "" && isGrantID(given):
		id = given
	case id == "":
		id = "(malformed)"
	}
	if g == nil {
		h.b.audit.Info().Str("event", "revoke").Str("grant", id).Bool("found", false).Msg("grant revoked")
		return &control.Revoked{}, nil
	}
	// The calls still running under the grant end now, answered revoked
	// (or with their results, if they were being sent): wait for them to
	// be counted, so the totals are every call the program made. A reply
	// waits at most a write, so write_timeout bounds the wait.
	ctx, cancel := context.WithTimeout(ctx, h.b.cfg.Bridge.WriteTimeout)
	g.usage.settled(ctx)
	cancel()
	u := g.Usage()
	h.b.audit.Info().Str("event", "revoke").Str("grant", g.ID).Bool("found", true).
		Int64("calls", u.Calls).Int64("denied", u.Denied).Int64("arg_bytes", u.ArgBytes).Int64("result_bytes", u.ResultBytes).
		Int64("took_ms", u.Took.Milliseconds()).Msg("grant revoked")
	if run := g.Run(); run != nil && r.Run != nil {
		// The run's own line: what ran, for whom, how it ended and what
		// it did; never its source or its output.
		h.b.audit.Info().Str("event", "run").Str("run", run.ID).Str("grant", g.ID).
			Str("language", run.Language).Str("code_sha256", run.CodeSHA256).Strs("servers", run.Servers).
			Str("ended", truncate.Ellipsis(r.Run.Ended, 32)).Int("exit_code", r.Run.ExitCode).Int64("took_ms", r.Run.TookMS).
			Int64("calls", u.Calls).Int64("denied", u.Denied).Int64("arg_bytes", u.ArgBytes).Int64("result_bytes", u.ResultBytes).
			Msg("run")
	}
	return &control.Revoked{Found: true, Calls: u.Calls, Denied: u.Denied, ArgBytes: u.ArgBytes, ResultBytes: u.ResultBytes, TookMS: u.Took.Milliseconds()}, nil
}

// Reload reads the configuration again and applies it (reload.go).
func (h *controlHandler) Reload(ctx context.Context, _ *control.ReloadRequest) (*control.Reloaded, error) {
	return h.b.Reload(ctx, "control")
}

// maxRunID bounds each string a run's grant carries into the audit trail.
const maxRunID = 64

func (h *controlHandler) Status(context.Context) (*control.Status, error) {
	b := h.b
	servers := b.serverList()
	st := &control.Status{Grants: b.grants.live(), Procs: runtime.GOMAXPROCS(0), CallSocket: b.cfg.Bridge.CallSocket, Servers: make([]control.ServerStatus, 0, len(servers))}
	for _, s := range servers {
		st.Servers = append(st.Servers, control.ServerStatus(s.status()))
	}
	st.Reloaded = b.lastReload.Load()
	b.mu.Lock()
	st.Connections = len(b.open)
	draining := b.drainingLocked()
	b.mu.Unlock()
	for _, s := range draining {
		// One that has just retired is leaving the list: not draining.
		if ss := s.status(); ss.State != string(StateRetired) {
			st.Draining = append(st.Draining, control.ServerStatus(ss))
		}
	}
	st.GrantUsage, st.GrantUsageOmitted = b.grantUsage(b.grants.now())
	return st, nil
}

func (h *controlHandler) Surface(context.Context, *control.SurfaceRequest) (*control.Surface, error) {
	servers, down := h.b.Surface()
	out := &control.Surface{Lock: string(lock.New(servers).Encode())}
	if d := h.b.Dropped(); len(d) > 0 {
		out.Dropped = d
	}
	for name, err := range down {
		if out.Down == nil {
			out.Down = map[string]string{}
		}
		out.Down[name] = err.Error()
	}
	if len(out.Lock) > control.MaxFrame-(1<<20) {
		return nil, &control.Error{Code: control.CodeInternal, Message: "the lock is larger than a control frame; run capbridge lock without --running"}
	}
	return out, nil
}

func (h *controlHandler) Metrics(context.Context, *control.MetricsRequest) (*control.Metrics, error) {
	var text strings.Builder
	h.b.WriteMetrics(&text)
	return &control.Metrics{Text: text.String()}, nil
}

func (h *controlHandler) Facade(_ context.Context, r *control.FacadeRequest) (*control.Facade, error) {
	gen, err := h.generated(r.Server, r.Lang)
	if err != nil {
		return nil, err
	}
	full, err := gen.WithSource()
	if err != nil {
		return nil, &control.Error{Code: control.CodeInternal, Message: "generating " + quote(string(gen.Lang)) + ": " + err.Error()}
	}
	gen = full
	if n := len(gen.Source) + len(gen.JS) + len(gen.DTS); n > control.MaxFrame-(1<<20) {
		// A server of thousands of tools: the listing (one copy, not
		// three forms) still fits, and gen writes the same façade from it.
		return nil, &control.Error{Code: control.CodeTooLarge, Message: fmt.Sprintf("the %s façade of server %s is %d bytes, more than a control frame holds; save its listing (capbridge listing %s > listing.json) and write the façade from it (capbridge gen --server %s --listing listing.json --lang %s --out DIR)", gen.Lang, quote(r.Server), n, r.Server, r.Server, gen.Lang)}
	}
	preamble, err := codegen.Preamble(gen.Lang)
	if err != nil {
		return nil, err
	}
	return &control.Facade{Module: gen.ModuleName, Source: string(gen.Source), Surface: gen.Surface, Preamble: preamble, ListingSHA256: gen.ListingSHA256,
		JS: string(gen.JS), DTS: string(gen.DTS)}, nil
}

// generated returns the façade of the named server in lang ("" is Go),
// or the control error that says why there is none. The bridge generates
// Go's surface at boot; another language is generated from the same
// listing on first request and kept with it, and a language's source
// when a façade is first asked for.
func (h *controlHandler) generated(server, lang string) (*codegen.Generated, error) {
	s, ok := h.b.lookup(server)
	if !ok {
		return nil, &control.Error{Code: control.CodeUnknownServer, Message: "no server is called " + quote(server)}
	}
	if err := checkLang(lang); err != nil {
		return nil, err
	}
	gen, err := s.facade()
	if err != nil {
		return nil, &control.Error{Code: control.CodeUnavailable, Message: s.unavailableMessage(err)}
	}
	return inLang(gen, lang)
}

// checkLang refuses a language codegen has no emitter for.
func checkLang(lang string) error {
	if _, err := codegen.Preamble(codegen.Lang(lang)); err != nil {
		return &control.Error{Code: control.CodeBadRequest, Message: "no façade generator for language " + quote(lang) + " (this capbridge generates go, ts and python)"}
	}
	return nil
}

// inLang is gen in lang. Generating the Go façade succeeded, so another
// language failing is the generator's own fault, reported as such.
func inLang(gen *codegen.Generated, lang string) (*codegen.Generated, error) {
	other, err := gen.In(codegen.Lang(lang))
	if err != nil {
		return nil, &control.Error{Code: control.CodeInternal, Message: "generating " + quote(lang) + ": " + err.Error()}
	}
	return other, nil
}

func (h *controlHandler) Describe(_ context.Context, r *control.DescribeRequest) (*control.Described, error) {
	gen, err := h.generated(r.Server, r.Lang)
	if err != nil {
		return nil, err
	}
	decl, err := gen.Describe(r.Tools...)
	if errors.Is(err, codegen.ErrNoSuchTool) {
		return nil, &control.Error{Code: control.CodeUnknownTool, Message: "server " + quote(r.Server) + ": " + strings.TrimPrefix(err.Error(), "codegen: ")}
	}
	if err != nil {
		return nil, err
	}
	return &control.Described{Module: gen.ModuleName, Declarations: decl}, nil
}

func (h *controlHandler) Search(_ context.Context, r *control.SearchRequest) (*control.Found, error) {
	switch {
	case strings.TrimSpace(r.Query) == "":
		return nil, &control.Error{Code: control.CodeBadRequest, Message: "a search needs a query"}
	case len(r.Query) > control.MaxSearchQuery:
		return nil, &control.Error{Code: control.CodeBadRequest, Message: fmt.Sprintf("the query is %d bytes, more than %d", len(r.Query), control.MaxSearchQuery)}
	case r.Limit > control.MaxSearchLimit:
		return nil, &control.Error{Code: control.CodeBadRequest, Message: fmt.Sprintf("limit %d is more than %d", r.Limit, control.MaxSearchLimit)}
	}
	if err := checkLang(r.Lang); err != nil {
		return nil, err
	}
	limit := int(r.Limit)
	if limit == 0 {
		limit = control.DefaultSearchLimit
	}
	var gens []*codegen.Generated
	names := r.Servers
	if len(names) == 0 {
		// Every server with a façade; one whose boot failed has none.
		for _, s := range h.b.serverList() {
			name := s.name()
			if gen, err := s.facade(); err == nil {
				if gen, err = inLang(gen, r.Lang); err != nil {
					return nil, err
				}
				names = append(names, name)
				gens = append(gens, gen)
			}
		}
	} else {
		// Each server once, however often it is named: a search costs
		// what the servers' listings do, not what the request repeats.
		seen := make(map[string]bool, len(names))
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool {
			dup := seen[n]
			seen[n] = true
			return dup
		})
		for _, name := range names {
			gen, err := h.generated(name, r.Lang)
			if err != nil {
				return nil, err
			}
			gens = append(gens, gen)
		}
	}
	// Each server's best limit are enough to find the best limit of all;
	// a stable sort keeps ties in server order, then listing order.
	found := &control.Found{Matches: []control.Match{}}
	for i, gen := range gens {
		for _, m := range gen.Search(r.Query, limit) {
			found.Matches = append(found.Matches, control.Match{Server: names[i], Func: m.Func, Tool: m.Tool, Signature: m.Signature, Score: m.Score})
		}
	}
	slices.SortStableFunc(found.Matches, func(a, b control.Match) int { return b.Score - a.Score })
	found.Matches = found.Matches[:min(limit, len(found.Matches))]
	return found, nil
}

func (h *controlHandler) Listing(_ context.Context, r *control.ListingRequest) (*control.Listed, error) {
	if _, err := h.generated(r.Server, ""); err != nil {
		return nil, err
	}
	// The façade exists, so a table is published; tables are never
	// written again.
	s, ok := h.b.lookup(r.Server)
	if !ok {
		return nil, &control.Error{Code: control.CodeUnknownServer, Message: "no server is called " + quote(r.Server)}
	}
	listed := s.current().listed
	tools := make([]listedTool, len(listed))
	for i, t := range listed {
		lt := listedTool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: t.OutputSchema, Icons: t.Icons, Meta: t.Meta, Execution: t.Execution}
		if a := t.Annotations; a != nil {
			lt.Annotations = &listedAnnotations{a.Title, a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint}
		}
		tools[i] = lt
	}
	out, err := json.Marshal(map[string][]listedTool{"tools": tools})
	if err != nil {
		return nil, fmt.Errorf("bridge: encoding the listing of %s: %w", quote(r.Server), err)
	}
	return &control.Listed{Listing: string(out)}, nil
}

// listedTool is a tools/list entry as the MCP specification spells it
// (2025-11-25, "Tool"); the raw fields are the server's own JSON.
type listedTool struct {
	Name         string             `json:"name"`
	Title        string             `json:"title,omitempty"`
	Description  string             `json:"description,omitempty"`
	InputSchema  json.RawMessage    `json:"inputSchema"`
	OutputSchema json.RawMessage    `json:"outputSchema,omitempty"`
	Annotations  *listedAnnotations `json:"annotations,omitempty"`
	Icons        json.RawMessage    `json:"icons,omitempty"`
	Meta         json.RawMessage    `json:"_meta,omitempty"`
	Execution    json.RawMessage    `json:"execution,omitempty"`
}

type listedAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

func (h *controlHandler) Call(ctx context.Context, r *control.CallRequest) (*capwire.Result, error) {
	start := time.Now()
	// ctx ends when the operator hangs up, which the call path knows as
	// errDisconnected, or when the bridge stops, which reaches callCtx
	// straight from b.ctx with its own cause.
	callCtx, cancel := context.WithCancelCause(h.b.ctx)
	defer cancel(nil)
	defer context.AfterFunc(ctx, func() { cancel(errDisconnected) })()
	span := h.b.tracer.StartControlCall(capwire.CapPrefix + r.Server)
	o := h.b.call(callCtx, callRequest{server: r.Server, tool: r.Tool, args: r.Args, timeoutMS: r.TimeoutMS, peer: h.peer, span: span})
	if o.result != nil {
		// The audit records what the operator receives: a result that
		// does not fit in a control frame is answered result_too_large.
		if _, err := capwire.AppendFrame(nil, &capwire.ResultMsg{Result: *o.result}, control.MaxFrame); errors.Is(err, capwire.ErrFrameTooLarge) {
			o = deny(capwire.CodeResultTooLarge, "the result cannot be sent: "+err.Error())
		}
	}
	h.b.auditCall(nil, h.peer, r.Server, r.Tool, o, time.Since(start))
	endCallTrace(span, nil, r.Server, r.Tool, &o)
	if o.denial != nil {
		h.b.metrics.denied(o.denial.Code)
		return nil, o.denial
	}
	return o.result, nil
}
