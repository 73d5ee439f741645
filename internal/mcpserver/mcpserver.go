// Package mcpserver implements the server side of MCP for a tools-only
// server, over stdio (Server.Serve) and Streamable HTTP (HTTP): the
// initialize handshake of the four legacy revisions and the stateless
// 2026-07-28 revision (server/discover, versions carried in each
// request's _meta), tools/list, tools/call run concurrently and bounded,
// cancellation ending a call's context, and notifications/progress for a
// call that asked for it. It is what `capbridge mcp` speaks to an MCP
// host.
package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/jsonout"
)

// Revisions this server speaks: the legacy ones (initialize), newest
// first, and the stateless one.
var (
	legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
	modernVersion  = "2026-07-28"
)

// Bounds.
const (
	maxLine     = bound.MaxMessage // one JSON-RPC message
	maxInFlight = 32               // tools/call running at once; more are refused
	// maxQueued bounds the messages waiting for the host to take them. A
	// call keeps its place among the maxInFlight until its reply is
	// queued, and a full queue stops the reading of requests, so a host
	// that stops reading holds at most maxQueued + maxInFlight replies,
	// and the one being written.
	maxQueued = 16
)

// JSON-RPC error codes (MCP's schema).
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeUnsupportedVer = -32022
)

// Tool is one tool the server offers.
type Tool struct {
	Name        string
	Title       string
	Description string
	InputSchema json.RawMessage
	ReadOnly    bool // annotations.readOnlyHint
	// Call runs the tool. args is the arguments object ({} when none were
	// sent). progress reports how far it got, and does nothing unless the
	// caller asked for progress. ctx ends when the caller cancels. A
	// returned error is a protocol error (invalid params); a failure of
	// the tool itself is a Result with IsError.
	Call func(ctx context.Context, args json.RawMessage, progress Progress) (*Result, error)
}

// Progress reports a call's progress: progress must grow from one report
// to the next; total is 0 when unknown.
type Progress func(progress, total float64, message string)

// Result is a tool's result.
type Result struct {
	Text       string
	Structured any // structuredContent, when not nil
	IsError    bool
}

// Server serves its tools to one client at a time per Serve call. Its
// fields must not change once Serve is called.
type Server struct {
	Name, Version, Instructions string
	Tools                       []Tool
}

// ErrBadParams marks a Call error to be answered as invalid params.
var ErrBadParams = errors.New("mcpserver: invalid params")

// Serve speaks MCP over r and w (newline-delimited JSON-RPC, as the stdio
// transport says) until r ends or ctx does, whichever is first: a host
// that holds its end of r open, or leaves w unread, while capbridge is
// told to stop (a signal) does not keep it serving. Calls still running
// then are cancelled and waited for. Once r ends, the replies queued are
// written before Serve returns, unless ctx ends first. It returns nil
// when r ended cleanly or ctx did; if ctx did, the goroutine reading r
// ends when r does and the one writing w when its write returns (close
// them to end those).
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	sess, cancel := context.WithCancel(ctx)
	c := &conn{srv: s, stop: ctx.Done(), out: make(chan []byte, maxQueued), slots: make(chan struct{}, maxInFlight),
		inflight: map[string]context.CancelFunc{}}
	written := make(chan struct{})
	go c.writeAll(w, written)
	defer func() {
		cancel()
		c.wg.Wait()
		close(c.out) // nothing writes any more: the calls and the reading are over
		select {
		case <-written:
		case <-ctx.Done():
		}
	}()
	type read struct {
		line []byte
		err  error
	}
	lines := make(chan read)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := readLine(br)
			select {
			case lines <- read{line, err}:
			case <-sess.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-sess.Done():
			return nil
		case in := <-lines:
			if len(in.line) > 0 {
				c.handle(sess, in.line)
			}
			if in.err == io.EOF {
				return nil
			}
			if in.err != nil {
				return in.err
			}
		}
	}
}

// readLine reads one line, at most maxLine bytes; a longer one is an
// error that ends the session (the stream cannot be resynchronised).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("mcpserver: a message longer than %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, err
	}
}

// conn is one session's state.
type conn struct {
	srv *Server
	// out is the queue of messages for the host, in order, written by
	// writeAll alone; stop is Serve's ctx ending, which drops what is
	// still to be queued. slots holds a place for each call from its
	// admission until its reply is queued.
	out   chan []byte
	stop  <-chan struct{}
	slots chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]context.CancelFunc // by the JSON of the request id
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type meta struct {
	Meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Version       string          `json:"io.modelcontextprotocol/protocolVersion"`
	} `json:"_meta"`
}

// decodeMessage reads one JSON-RPC message, or says why it is refused: a
// JSON-RPC error code and its message, answered with a null id.
func decodeMessage(b []byte) (req request, code int, msg string) {
	// JSON-RPC's text is UTF-8 (RFC 8259, 8.1); the id and a progress
	// token are echoed, so bytes that are not would reach the reply.
	if !utf8.Valid(b) {
		return req, codeParse, "parse error: the message is not UTF-8"
	}
	if err := json.Unmarshal(b, &req); err != nil {
		if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
			return req, codeInvalidRequest, "batches are not supported"
		}
		return req, codeParse, "parse error: " + err.Error()
	}
	return req, 0, ""
}

func (c *conn) handle(ctx context.Context, line []byte) {
	req, code, msg := decodeMessage(line)
	if code != 0 {
		c.writeError(nil, code, msg)
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		if len(req.ID) > 0 && req.Method == "" {
			return // a response: this server sends no requests, so none is awaited
		}
		c.writeError(req.ID, codeInvalidRequest, "not a JSON-RPC 2.0 request")
		return
	}
	var m meta
	_ = json.Unmarshal(req.Params, &m)
	modern := m.Meta.Version != ""
	if len(req.ID) == 0 || string(req.ID) == "null" {
		c.notification(req)
		return
	}
	if modern && m.Meta.Version != modernVersion {
		c.writeErrorData(req.ID, codeUnsupportedVer, "Unsupported protocol version",
			map[string]any{"supported": []string{modernVersion}, "requested": m.Meta.Version})
		return
	}
	switch req.Method {
	case "initialize":
		res, _ := c.srv.initialize(req.Params)
		c.writeResult(req.ID, false, res)
	case "server/discover":
		c.writeResult(req.ID, true, c.srv.discover())
	case "ping":
		c.writeResult(req.ID, modern, map[string]any{})
	case "tools/list":
		c.writeResult(req.ID, modern, c.srv.list(modern))
	case "tools/call":
		c.call(ctx, req, m, modern)
	default:
		c.writeError(req.ID, codeNoMethod, "method not found: "+req.Method)
	}
}

func capabilities() map[string]any {
	return map[string]any{"tools": map[string]any{"listChanged": false}}
}

// initialize answers initialize, and says which version it agreed.
func (s *Server) initialize(params json.RawMessage) (map[string]any, string) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	v := legacyVersions[0]
	if slices.Contains(legacyVersions, p.ProtocolVersion) {
		v = p.ProtocolVersion
	}
	res := map[string]any{
		"protocolVersion": v,
		"capabilities":    capabilities(),
		"serverInfo":      map[string]any{"name": s.Name, "version": s.Version},
	}
	if s.Instructions != "" {
		res["instructions"] = s.Instructions
	}
	return res, v
}

func (s *Server) discover() map[string]any {
	return map[string]any{
		"supportedVersions": append([]string{modernVersion}, legacyVersions...),
		"capabilities":      capabilities(),
		"instructions":      s.Instructions,
		"ttlMs":             0,
		"cacheScope":        "public",
	}
}

func (s *Server) list(modern bool) map[string]any {
	tools := make([]map[string]any, 0, len(s.Tools))
	for _, t := range s.Tools {
		e := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema}
		if t.Title != "" {
			e["title"] = t.Title
		}
		e["annotations"] = map[string]any{"readOnlyHint": t.ReadOnly, "openWorldHint": false}
		tools = append(tools, e)
	}
	out := map[string]any{"tools": tools}
	if modern {
		out["ttlMs"], out["cacheScope"] = 0, "public"
	}
	return out
}

// tool is the tool named name, or nil.
func (s *Server) tool(name string) *Tool {
	for i := range s.Tools {
		if s.Tools[i].Name == name {
			return &s.Tools[i]
		}
	}
	return nil
}

// callParams are tools/call's params.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// args are the call's arguments, {} when none were sent.
func (p *callParams) args() json.RawMessage {
	if len(p.Arguments) == 0 || string(p.Arguments) == "null" {
		return json.RawMessage("{}")
	}
	return p.Arguments
}

// callResult is a tool's Result as CallToolResult.
func callResult(res *Result) map[string]any {
	out := map[string]any{"content": []any{map[string]any{"type": "text", "text": res.Text}}, "isError": res.IsError}
	if res.Structured != nil {
		out["structuredContent"] = res.Structured
	}
	return out
}

// callErrorCode is the JSON-RPC code for a Call's error.
func callErrorCode(err error) int {
	if errors.Is(err, ErrBadParams) {
		return codeInvalidParams
	}
	return codeInternal
}

// stamp adds what a 2026-07-28 result carries.
func (s *Server) stamp(modern bool, result map[string]any) map[string]any {
	if modern {
		result["resultType"] = "complete"
		result["_meta"] = map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": s.Name, "version": s.Version}}
	}
	return result
}

func (c *conn) notification(req request) {
	if req.Method != "notifications/cancelled" {
		return // initialized, and anything else, needs no answer
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.inflight[string(p.RequestID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *conn) call(ctx context.Context, req request, m meta, modern bool) {
	var p callParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		c.writeError(req.ID, codeInvalidParams, "tools/call params: "+err.Error())
		return
	}
	tool := c.srv.tool(p.Name)
	if tool == nil {
		c.writeError(req.ID, codeInvalidParams, "unknown tool: "+p.Name)
		return
	}
	args := p.args()
	key := string(req.ID)
	callCtx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	_, dup := c.inflight[key]
	full := false
	if !dup {
		select {
		case c.slots <- struct{}{}:
			c.inflight[key] = cancel
		default:
			full = true
		}
	}
	c.mu.Unlock()
	switch {
	case dup:
		cancel()
		c.writeError(req.ID, codeInvalidRequest, "a request with this id is still in flight")
		return
	case full:
		cancel()
		c.writeError(req.ID, codeInternal, fmt.Sprintf("%d calls are running already; try again when one ends", maxInFlight))
		return
	}
	progress := func(float64, float64, string) {}
	if tok := m.Meta.ProgressToken; len(tok) > 0 && string(tok) != "null" {
		progress = progressFunc(callCtx, tok, c.write)
	}
	c.wg.Go(func() {
		defer func() { <-c.slots }() // its reply is queued (or dropped)
		defer cancel()
		res, err := tool.Call(callCtx, args, progress)
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		if callCtx.Err() != nil && ctx.Err() == nil {
			// Cancelled: the receiver SHOULD not respond (MCP,
			// "Cancellation").
			return
		}
		if err != nil {
			c.writeError(req.ID, callErrorCode(err), err.Error())
			return
		}
		c.writeResult(req.ID, modern, callResult(res))
	})
}

func (c *conn) writeResult(id json.RawMessage, modern bool, result map[string]any) {
	c.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": c.srv.stamp(modern, result)})
}

func (c *conn) writeError(id json.RawMessage, code int, msg string) {
	c.writeErrorData(id, code, msg, nil)
}

func (c *conn) writeErrorData(id json.RawMessage, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	c.write(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

// write queues one message for the host, to be written on its own line;
// it waits for room, and drops the message once Serve's ctx has ended.
func (c *conn) write(msg any) {
	b, err := jsonout.Marshal(msg)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": codeInternal, "message": "encoding a reply: " + err.Error()}})
	}
	b = append(b, '\n')
	select {
	case c.out <- b:
	case <-c.stop:
	}
}

// writeAll writes the queued messages to w in order until the queue is
// closed, then closes done. After a failed write it drops the rest: the
// reader sees the session's end.
func (c *conn) writeAll(w io.Writer, done chan<- struct{}) {
	defer close(done)
	var err error
	for b := range c.out {
		if err == nil {
			_, err = w.Write(b)
		}
	}
}
