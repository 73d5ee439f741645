// Package mcptest implements a stdio MCP server whose every fault can be
// chosen by the test that starts it.
//
// The server runs the usual stdio loop: inbound lines
// are classified by id (present and non-null: a request that is answered;
// absent or null: a notification that is absorbed), a malformed line is
// answered with -32700 and id null and the loop survives, initialize,
// tools/list (sorted, paginated), tools/call and ping are served, and any
// other request gets -32601. Scenario.Era adds the stateless revision
// 2026-07-28 (server/discover, per-request _meta, resultType, the
// subscriptions/listen stream), beside the legacy handshake or instead of
// it (modern.go). A tool's failure is an isError result, never a
// protocol error.
//
// A [Scenario] declares the tool listing and the process-level faults;
// the default catalogue of tools (echo, add, fail, slow, hang, crash, kill,
// content, progress, noise, long_line, bad_utf8, nan_result, deep_result,
// server_request, notify, unknown_id, duplicate_id, result_and_error,
// string_id, stderr) turns
// every per-call fault into a tool the client calls by name. One more
// tool, cancellations, reports the notifications/cancelled the server has
// received (each also logged on stderr), so a test can check that its
// client told the server to stop a call it abandoned. The scenario
// format and each misbehaviour are documented in docs/mcptest.md.
//
// Tests run the server as a real child process: [Command] gives the argv
// and environment that re-execute the test binary, whose TestMain calls
// [MaybeServe] first. [Serve] runs the same loop in-process over any reader
// and writer; faults that need a real process (exit, SIGKILL, signals, a
// grandchild) end it with [ErrExited] or [ErrProcessOnly] instead. The
// binary internal/testkit/mcptest/cmd/mcptestserver serves a scenario file for
// manual use.
//
// Everything is bounded: an inbound line is at most [MaxLineBytes], at most
// [MaxInFlight] calls run at once, and every wait a tool makes ends within
// [MaxWait] (a server→client request within [ServerRequestWait]).
package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// Scenario declares how one server instance behaves. JSON tags are
// snake_case; the zero value is a well-behaved server with the default
// tool catalogue. MaybeServe and the mcptestserver binary reject unknown
// fields, so a misspelt misbehaviour fails loudly instead of silently
// serving a well-behaved server.
type Scenario struct {
	// ProtocolVersion is answered to initialize instead of the negotiated
	// version (an unsupported version, for the client's refusal path).
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Instructions is returned as InitializeResult.instructions.
	Instructions string `json:"instructions,omitempty"`
	// ServerName is serverInfo.name; default "mcptest".
	ServerName string `json:"server_name,omitempty"`
	// Tools replaces the default catalogue's listing verbatim and in the
	// given order (hostile listings: non-objects, missing name or
	// inputSchema, duplicates). Calls still dispatch by name to the
	// built-in behaviours.
	Tools []json.RawMessage `json:"tools,omitempty"`
	// PageSize is the number of tools per tools/list page; 0 = one page.
	PageSize int `json:"page_size,omitempty"`
	// RepeatCursor makes every page answer nextCursor "again", and the
	// cursor "again" answer the first page: pagination never ends.
	RepeatCursor bool `json:"repeat_cursor,omitempty"`
	// ExitBeforeHandshake writes a line to stderr and exits with status 3
	// before reading stdin.
	ExitBeforeHandshake bool `json:"exit_before_handshake,omitempty"`
	// NoiseBeforeHandshake is the number of non-JSON lines printed on
	// stdout at start, before reading stdin.
	NoiseBeforeHandshake int `json:"noise_before_handshake,omitempty"`
	// StderrFlood is the number of bytes written to stderr at start,
	// before reading stdin (at most MaxOutputBytes).
	StderrFlood int `json:"stderr_flood,omitempty"`
	// IgnoreSIGTERM ignores SIGTERM (process only).
	IgnoreSIGTERM bool `json:"ignore_sigterm,omitempty"`
	// IgnoreStdinEOF keeps the server running after stdin EOF until it is
	// signalled (in-process: until ctx is done), at most MaxWait. By
	// default the server exits 0 on EOF.
	IgnoreStdinEOF bool `json:"ignore_stdin_eof,omitempty"`
	// Grandchild spawns, at start, a grandchild process in the server's
	// process group that inherits and holds stdout open; it exits on its
	// own after GrandchildLife (process only).
	Grandchild bool `json:"grandchild,omitempty"`
	// GrandchildSetsid makes the grandchild of Grandchild escape the way
	// a browser launched by Playwright does: it calls setsid(2), leaving
	// the server's process group and session (so no group kill reaches
	// it), ignores SIGTERM, and inherits the server's environment
	// (process only; needs Grandchild).
	GrandchildSetsid bool `json:"grandchild_setsid,omitempty"`
	// NotifyOnInitialized lists notification methods sent right after
	// notifications/initialized arrives, e.g.
	// "notifications/tools/list_changed".
	NotifyOnInitialized []string `json:"notify_on_initialized,omitempty"`
	// Relisted is the second listing: the relist tool switches tools/list
	// to it (verbatim, as Tools) and sends
	// notifications/tools/list_changed, so a test can change a server's
	// tools mid-run.
	Relisted []json.RawMessage `json:"relisted,omitempty"`
	// RelistHangs, when set, leaves every tools/list after relist
	// unanswered, creating a file at this path when one arrives and
	// sending notifications/tools/list_changed again: a server that
	// keeps its client re-listing.
	RelistHangs string `json:"relist_hangs,omitempty"`

	// Era is "" for a legacy-only server (server/discover is -32601, as
	// every legacy server answers it), EraModern for a dual-era server
	// whose first request pins the era, EraModernOnly for one that
	// answers initialize with -32022.
	Era string `json:"era,omitempty"`
	// DiscoverError is a JSON-RPC error object answered to
	// server/discover instead of its result, in any era.
	DiscoverError json.RawMessage `json:"discover_error,omitempty"`
	// DiscoverLate holds the server/discover answer until initialize
	// arrives and sends it after the initialize result, as a server too
	// slow for the client's probe would.
	DiscoverLate bool `json:"discover_late,omitempty"`
	// ResultType is the resultType of every tools/call result in the
	// modern era ("input_required", or an unknown value); default
	// "complete".
	ResultType string `json:"result_type,omitempty"`
	// InputRequestKey is the key of the one inputRequests member an
	// input_required result carries; default "confirm".
	InputRequestKey string `json:"input_request_key,omitempty"`
	// TaskPolls, in the modern era, answers every tools/call from a
	// client that declares the tasks extension (io.modelcontextprotocol/
	// tasks) with a task (resultType "task") once the call is done; the
	// task reports working to that many tasks/get, then its final state
	// (TaskEnd) with the call's result.
	TaskPolls int `json:"task_polls,omitempty"`
	// TaskEnd is the state a task reaches: "completed" (the default),
	// "failed" (with a JSON-RPC error), "cancelled" or "input_required"
	// (with inputRequests).
	TaskEnd string `json:"task_end,omitempty"`
	// TTLMs is the ttlMs of every tools/list result in the modern era.
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// NotifyOnListen lists notification methods sent on each
	// subscriptions/listen stream right after its acknowledgement,
	// carrying the stream's subscriptionId.
	NotifyOnListen []string `json:"notify_on_listen,omitempty"`
	// RequestsOnListen is the number of ping requests the server sends
	// after acknowledging a listen stream, before NotifyOnListen: the
	// modern era forbids them, and forbids the client to answer.
	RequestsOnListen int `json:"requests_on_listen,omitempty"`
}

// Bounds of the server. They are constants, not knobs: tests that need a
// bigger fault than these are testing the wrong thing.
const (
	// MaxLineBytes caps one inbound line; a longer line is discarded up
	// to its newline and answered -32700.
	MaxLineBytes = 64 << 20
	// MaxInFlight caps concurrent tools/call requests; one more is
	// answered -32000 at once.
	MaxInFlight = 4096
	// MaxWait bounds every wait: slow's ms, progress's total time, the
	// post-EOF linger of IgnoreStdinEOF, and the grandchild's life.
	MaxWait = 60 * time.Second
	// ServerRequestWait bounds how long server_request waits for the
	// client's response.
	ServerRequestWait = 10 * time.Second
	// MaxOutputBytes caps the bytes long_line, stderr and StderrFlood
	// produce.
	MaxOutputBytes = 256 << 20
	// MaxNoiseLines caps the noise tool and NoiseBeforeHandshake.
	MaxNoiseLines = 1 << 20
	// MaxCancellations caps the notifications/cancelled the server
	// remembers for the cancellations tool; older ones are forgotten.
	MaxCancellations = 1024
)

// Cancellation is one notifications/cancelled the server received, as the
// cancellations tool reports it (structuredContent {"cancelled":[…]}).
type Cancellation struct {
	// RequestID is the requestId's JSON text, verbatim: 7 for a number,
	// "\"a\"" (quotes included) for a string.
	RequestID string `json:"request_id" msgpack:"request_id"`
	// Tool is the name of the call it cancelled, or "" when no call with
	// that id was in flight (already answered, or never made).
	Tool string `json:"tool" msgpack:"tool"`
	// Reason is the notification's reason, "" if it gave none.
	Reason string `json:"reason" msgpack:"reason"`
}

// ErrExited reports that the scenario made the server exit (exit before the
// handshake, the crash or kill tool) while it ran in-process: Serve
// returns it (wrapped with the reason) where a process would have died.
var ErrExited = errors.New("mcptest: server exited")

// ErrProcessOnly reports a scenario that in-process Serve cannot perform
// (IgnoreSIGTERM, Grandchild). Serve returns it before reading anything.
var ErrProcessOnly = errors.New("mcptest: misbehaviour needs a real process")

// supportedVersions are the protocol revisions initialize echoes; any other
// requested version is answered with the first (latest).
var supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC error codes the server answers with.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeOverloaded     = -32000 // implementation-defined range
)

// Serve runs the server loop on in/out (stderr text to errw) until in
// reaches EOF, ctx is done, or a misbehaviour ends it. Process-level
// misbehaviours (crash, kill, grandchild, signals) only apply when running
// as a real process via Main/MaybeServe; in-process they end Serve with an
// error instead ([ErrExited] for the exits, [ErrProcessOnly] for the rest).
//
// At EOF the calls already running finish and are answered (hang and
// pending server_request calls are abandoned unanswered), then Serve
// returns nil. When ctx is done Serve returns context.Cause(ctx) without
// waiting for answers. Serve closes in and out when it returns, if they are
// io.Closers, as a process's exit closes its stdio; that is also what
// interrupts a read blocked on in when ctx is done, so in-process callers
// should pass closable pipes (io.Pipe). Serve starts no goroutine that
// outlives it, and a Read on a non-closable in stays blocked only until it
// returns by itself. Serve serializes its own writes to out and to errw;
// it does not lock errw against other writers.
func Serve(ctx context.Context, in io.Reader, out io.Writer, errw io.Writer, sc Scenario) error {
	return serve(ctx, in, out, errw, sc, nil)
}

// proc performs the process-level exits; nil when serving in-process.
type proc interface {
	exit(code int)
	killSelf()
}

// server is one run of the loop. The reader (Serve's own goroutine) owns
// the bufio.Reader and the inbound classification; each tools/call runs in
// its own goroutine. Shared state is split by lock:
//   - outMu serializes whole lines on out and guards werr, so lines never
//     interleave and nothing is written once the server has "died";
//   - errMu serializes writes to errw;
//   - mu guards calls (in flight, by id) and pending (server→client
//     requests awaiting the client's response).
type server struct {
	sc   Scenario
	proc proc

	hard       context.Context // done: the server is dead (ctx, exit, write failure)
	hardCancel context.CancelCauseFunc
	drain      context.Context // done: stdin ended; hang and waits give up
	callWG     sync.WaitGroup  // one per running call goroutine

	outMu sync.Mutex
	bw    *bufio.Writer // flushed after every line
	werr  error

	errMu sync.Mutex
	errw  io.Writer

	mu          sync.Mutex
	calls       map[string]*call       // by the request id's raw text
	pending     map[string]chan []byte // by the server request id's raw text
	nextID      int64                  // server→client request and unknown_id counter
	initialized bool                   // notifications/initialized seen
	listing     []json.RawMessage      // what tools/list pages through; relist replaces it
	relisted    bool                   // relist was called
	m           modernState            // the era and the listen streams (modern.go)
	// cancelled records the notifications/cancelled received, newest
	// last, at most MaxCancellations (older ones are dropped); the
	// cancellations tool reports them, so a test can check that its
	// client told the server to stop.
	cancelled []Cancellation
	// received counts the tools/call requests accepted, and receivedArgs
	// their params.arguments' bytes as sent: the calls tool reports them,
	// so a test can check a client's accounting against the server's.
	received, receivedArgs int64
}

// call is one tools/call request in flight.
type call struct {
	id        json.RawMessage
	key       string
	tool      string
	args      json.RawMessage
	meta      json.RawMessage // params._meta as sent, nil if absent
	token     json.RawMessage // _meta.progressToken, nil if absent
	cancelled chan struct{}   // closed (under server.mu) by notifications/cancelled
	isCancel  bool            // guarded by server.mu
}

func serve(ctx context.Context, in io.Reader, out io.Writer, errw io.Writer, sc Scenario, p proc) error {
	hard, hardCancel := context.WithCancelCause(ctx)
	drain, drainCancel := context.WithCancel(hard)
	defer drainCancel()
	s := &server{
		sc:         sc,
		proc:       p,
		hard:       hard,
		hardCancel: hardCancel,
		drain:      drain,
		bw:         bufio.NewWriterSize(out, 64<<10),
		errw:       errw,
		calls:      map[string]*call{},
		pending:    map[string]chan []byte{},
		listing:    defaultListing,
	}
	if sc.Tools != nil {
		s.listing = sc.Tools
	}
	// The watcher is what a process's death does to its stdio: once the
	// server is dead, in and out are closed so a blocked Read or Write
	// returns.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		<-hard.Done()
		if c, ok := in.(io.Closer); ok {
			_ = c.Close()
		}
		if c, ok := out.(io.Closer); ok {
			_ = c.Close()
		}
	}()
	defer func() {
		hardCancel(nil)
		<-watched
	}()

	// Main performs these before serve; in-process they cannot happen.
	switch {
	case p == nil && sc.IgnoreSIGTERM:
		hardCancel(fmt.Errorf("%w: ignore_sigterm", ErrProcessOnly))
		return context.Cause(hard)
	case p == nil && sc.Grandchild:
		hardCancel(fmt.Errorf("%w: grandchild", ErrProcessOnly))
		return context.Cause(hard)
	}
	if sc.ExitBeforeHandshake {
		s.logf("mcptest: exiting before the handshake (scenario exit_before_handshake)")
		s.die(3, "exit before the handshake (status 3)")
		return context.Cause(hard)
	}
	if sc.StderrFlood > 0 {
		s.flood(min(sc.StderrFlood, MaxOutputBytes))
	}
	for i := range min(sc.NoiseBeforeHandshake, MaxNoiseLines) {
		s.writeLine(noiseLine(i))
	}

	s.readLoop(bufio.NewReaderSize(in, 64<<10))

	if hard.Err() == nil && sc.IgnoreStdinEOF {
		s.logf("mcptest: stdin reached EOF; ignoring it (scenario ignore_stdin_eof)")
		t := time.NewTimer(MaxWait)
		select {
		case <-hard.Done():
		case <-t.C:
		}
		t.Stop()
	}
	drainCancel()
	callsDone := make(chan struct{})
	go func() { s.callWG.Wait(); close(callsDone) }()
	select {
	case <-callsDone:
	case <-hard.Done():
		// Dead: the watcher closes out, so any call blocked writing
		// returns, and every wait in a tool also watches hard.
		<-callsDone
	}
	if hard.Err() != nil {
		return context.Cause(hard)
	}
	return nil
}

// die makes the server exit with code. In a process it does not return;
// in-process it marks the server dead with ErrExited. Holding outMu makes
// the death atomic with respect to output: no line starts after it.
func (s *server) die(code int, why string) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.proc != nil {
		s.proc.exit(code)
	}
	s.hardCancel(fmt.Errorf("%w: %s", ErrExited, why))
}

// errLineTooLong marks an inbound line longer than MaxLineBytes.
var errLineTooLong = errors.New("mcptest: line too long")

// readLoop reads and handles lines until EOF, a read error, or death.
func (s *server) readLoop(br *bufio.Reader) {
	var buf []byte
	for s.hard.Err() == nil {
		line, err := readLine(br, &buf, MaxLineBytes)
		if errors.Is(err, errLineTooLong) {
			s.writeError(nil, codeParse, fmt.Sprintf("Parse error: line exceeds %d bytes", MaxLineBytes))
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && s.hard.Err() == nil {
				s.logf("mcptest: reading stdin: %v", err)
			}
			return
		}
		s.handle(line)
	}
}

// readLine returns the next line without its newline (and without a
// trailing CR). The result aliases br's buffer or *buf and is valid until
// the next call. A line longer than max is consumed and reported as
// errLineTooLong; a final line without a newline is returned before EOF.
func readLine(br *bufio.Reader, buf *[]byte, max int) ([]byte, error) {
	frag, err := br.ReadSlice('\n')
	if err == nil && len(frag) <= max+1 {
		return bytes.TrimSuffix(frag[:len(frag)-1], []byte{'\r'}), nil
	}
	*buf = (*buf)[:0]
	for {
		if len(*buf)+len(frag) > max+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			return nil, errLineTooLong
		}
		*buf = append(*buf, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix((*buf)[:len(*buf)-1], []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			frag, err = br.ReadSlice('\n')
		case errors.Is(err, io.EOF) && len(*buf) > max:
			return nil, errLineTooLong
		case errors.Is(err, io.EOF) && len(*buf) > 0:
			return bytes.TrimSuffix(*buf, []byte{'\r'}), nil
		default:
			return nil, err
		}
	}
}

// inbound is every field an inbound frame may carry; the classification
// in handle decides which kind it is.
type inbound struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// frameKind is what classify decided an inbound line is.
type frameKind int

const (
	kindMalformed    frameKind = iota // answer -32700, id null
	kindInvalid                       // answer -32600 (with the id when it is usable)
	kindRequest                       // answer
	kindNotification                  // absorb
	kindResponse                      // a client's answer to a server→client request
)

// classify decides what an inbound line is, by its id. It is total:
// any bytes give a kind, never a panic.
func classify(line []byte) (inbound, frameKind) {
	var f inbound
	if err := json.Unmarshal(line, &f); err != nil {
		return inbound{}, kindMalformed
	}
	hasID := len(f.ID) > 0 && string(f.ID) != "null"
	if !hasID {
		f.ID = nil // null and absent mean the same: no id
	}
	switch {
	case hasID && !validID(f.ID):
		f.ID = nil
		return f, kindInvalid
	case f.Method == "" && hasID && (f.Result != nil || f.Error != nil):
		return f, kindResponse
	case f.Method == "":
		// Seed 002: a frame without a method is malformed.
		return inbound{}, kindMalformed
	case f.JSONRPC != "2.0":
		return f, kindInvalid
	case hasID:
		return f, kindRequest
	default:
		return f, kindNotification
	}
}

// validID reports whether raw is a JSON-RPC id: a string or a number.
func validID(raw json.RawMessage) bool {
	c := raw[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// handle classifies one inbound line and acts on it.
func (s *server) handle(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return // blank lines carry nothing; skipping them is not an error
	}
	f, kind := classify(line)
	switch kind {
	case kindMalformed:
		s.writeError(nil, codeParse, "Parse error")
	case kindInvalid:
		s.writeError(f.ID, codeInvalidRequest, "Invalid Request")
	case kindResponse:
		s.route(f.ID, line)
	case kindNotification:
		s.notification(f)
	case kindRequest:
		s.request(f)
	}
}

// route hands a client's response to the server_request call waiting for it.
func (s *server) route(id json.RawMessage, line []byte) {
	s.mu.Lock()
	ch, ok := s.pending[string(id)]
	delete(s.pending, string(id))
	s.mu.Unlock()
	if !ok {
		if s.isModern() {
			s.logf("mcptest: the client answered server request %s in the %s era, which forbids it", id, ModernVersion)
			return
		}
		s.logf("mcptest: response for unknown server request id %s", id)
		return
	}
	ch <- bytes.Clone(line) // 1-buffered, one send per id
}

func (s *server) notification(f inbound) {
	switch f.Method {
	case "notifications/initialized":
		s.mu.Lock()
		first := !s.initialized
		s.initialized = true
		s.mu.Unlock()
		if first {
			for _, m := range s.sc.NotifyOnInitialized {
				s.notify(m, nil)
			}
		}
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		if json.Unmarshal(f.Params, &p) != nil || len(p.RequestID) == 0 {
			return
		}
		if s.endStream(p.RequestID) {
			s.logf("mcptest: subscriptions/listen %s cancelled: %q", p.RequestID, p.Reason)
			return
		}
		rec := Cancellation{RequestID: string(p.RequestID), Reason: p.Reason}
		s.mu.Lock()
		if c, ok := s.calls[string(p.RequestID)]; ok {
			rec.Tool = c.tool
			if !c.isCancel {
				c.isCancel = true
				close(c.cancelled)
			}
		}
		if len(s.cancelled) == MaxCancellations {
			s.cancelled = append(s.cancelled[:0], s.cancelled[1:]...)
		}
		s.cancelled = append(s.cancelled, rec)
		s.mu.Unlock()
		s.logf("mcptest: notifications/cancelled for request %s (tool %q): %q", rec.RequestID, rec.Tool, rec.Reason)
	}
}

func (s *server) request(f inbound) {
	if s.modernRequest(f) {
		return
	}
	switch f.Method {
	case "initialize":
		s.initialize(f)
	case "ping":
		s.writeResult(f.ID, struct{}{})
	case "tools/list":
		s.toolsList(f)
	case "tools/call":
		s.toolsCall(f)
	case "resources/read":
		s.resourcesRead(f)
	default:
		s.writeError(f.ID, codeMethodNotFound, "Method not found: "+f.Method)
	}
}

// resources are what resources/read serves, by URI: the text the content
// tool's link points at, and a binary one.
var resources = map[string]string{
	"file:///mcptest/link.txt":     `{"uri":"file:///mcptest/link.txt","mimeType":"text/plain","text":"the linked text"}`,
	"file:///mcptest/embedded.bin": `{"uri":"file:///mcptest/embedded.bin","mimeType":"application/octet-stream","blob":"AAEC/w=="}`,
}

// resourcesRead answers resources/read of one of resources; any other URI
// is -32002, MCP's "Resource not found".
func (s *server) resourcesRead(f inbound) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(f.Params, &p) != nil || p.URI == "" {
		s.writeError(f.ID, codeInvalidParams, "Invalid params")
		return
	}
	r, ok := resources[p.URI]
	if !ok {
		s.writeError(f.ID, -32002, "Resource not found: "+p.URI)
		return
	}
	s.writeResult(f.ID, json.RawMessage(`{"contents":[`+r+`]}`))
}

func (s *server) initialize(f inbound) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(f.Params, &p) // a missing or odd version gets the latest
	version := supportedVersions[0]
	for _, v := range supportedVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	if s.sc.ProtocolVersion != "" {
		version = s.sc.ProtocolVersion
	}
	name := s.serverName()
	type info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	s.writeResult(f.ID, struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      info           `json:"serverInfo"`
		Instructions    string         `json:"instructions,omitempty"`
	}{
		ProtocolVersion: version,
		// listChanged: the notify tool and NotifyOnInitialized can send
		// notifications/tools/list_changed.
		Capabilities: map[string]any{"tools": map[string]bool{"listChanged": true}},
		ServerInfo:   info{Name: name, Version: "0.1.0"},
		Instructions: s.sc.Instructions,
	})
	s.answerLate()
}

func (s *server) serverName() string {
	if s.sc.ServerName == "" {
		return "mcptest"
	}
	return s.sc.ServerName
}

// repeatCursor is the cursor of RepeatCursor.
const repeatCursor = "again"

// toolsList answers one page. Cursors are "p<offset>": opaque to the
// client, and anything else is answered -32602.
func (s *server) toolsList(f inbound) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if len(f.Params) > 0 && json.Unmarshal(f.Params, &p) != nil {
		s.writeError(f.ID, codeInvalidParams, "Invalid params")
		return
	}
	s.mu.Lock()
	listing, hang := s.listing, s.relisted && s.sc.RelistHangs != ""
	s.mu.Unlock()
	if hang {
		_ = os.WriteFile(s.sc.RelistHangs, nil, 0o600)
		s.listChanged() // and asks for another
		return
	}
	start := 0
	if p.Cursor != nil {
		n, err := parseCursor(*p.Cursor, s.sc.RepeatCursor, len(listing))
		if err != nil {
			s.writeError(f.ID, codeInvalidParams, "Invalid cursor")
			return
		}
		start = n
	}
	end := len(listing)
	if s.sc.PageSize > 0 {
		end = min(start+s.sc.PageSize, end)
	}
	page := struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor,omitempty"`
		TTLMs      int64             `json:"ttlMs,omitempty"`
		CacheScope string            `json:"cacheScope,omitempty"`
	}{Tools: listing[start:end]}
	if s.isModern() {
		page.TTLMs, page.CacheScope = s.sc.TTLMs, "private"
	}
	if page.Tools == nil {
		page.Tools = []json.RawMessage{}
	}
	switch {
	case s.sc.RepeatCursor:
		page.NextCursor = repeatCursor
	case end < len(listing):
		page.NextCursor = "p" + strconv.Itoa(end)
	}
	if err := s.writeResultChecked(f.ID, page); err != nil {
		// A hostile listing that is not JSON at all cannot be embedded.
		s.writeError(f.ID, -32603, "Internal error: scenario tools are not JSON")
	}
}

func parseCursor(c string, repeat bool, n int) (int, error) {
	if repeat && c == repeatCursor {
		return 0, nil
	}
	if len(c) < 2 || c[0] != 'p' {
		return 0, errors.New("bad cursor")
	}
	off, err := strconv.Atoi(c[1:])
	if err != nil || off <= 0 || off > n {
		return 0, errors.New("bad cursor")
	}
	return off, nil
}

// toolsCall validates a call and runs it in its own goroutine, so hang and
// slow never hold up other requests.
func (s *server) toolsCall(f inbound) {
	var p struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta"`
	}
	var meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(f.Params, &p) != nil || p.Name == nil || (len(p.Meta) > 0 && json.Unmarshal(p.Meta, &meta) != nil) {
		s.writeError(f.ID, codeInvalidParams, "Invalid params: tools/call needs a string name")
		return
	}
	t, ok := toolsByName[*p.Name]
	if !ok {
		s.writeError(f.ID, codeInvalidParams, "Unknown tool: "+*p.Name)
		return
	}
	c := &call{id: f.ID, key: string(f.ID), tool: *p.Name, args: p.Arguments, meta: p.Meta, cancelled: make(chan struct{})}
	if tok := meta.ProgressToken; len(tok) > 0 && string(tok) != "null" {
		c.token = tok
	}
	s.mu.Lock()
	_, dup := s.calls[c.key]
	full := len(s.calls) >= MaxInFlight
	if !dup && !full {
		s.calls[c.key] = c
		s.received++
		s.receivedArgs += int64(len(p.Arguments))
	}
	s.mu.Unlock()
	switch {
	case dup:
		s.writeError(f.ID, codeInvalidRequest, "Invalid Request: id already in flight")
		return
	case full:
		s.writeError(f.ID, codeOverloaded, fmt.Sprintf("Too many calls in flight (limit %d)", MaxInFlight))
		return
	}
	s.callWG.Add(1)
	go func() {
		defer s.callWG.Done()
		defer func() {
			// Normally its answer retired it already (retire); a call
			// that ends unanswered is retired here, unless its id was
			// reused since by a new call.
			s.mu.Lock()
			if s.calls[c.key] == c {
				delete(s.calls, c.key)
			}
			s.mu.Unlock()
		}()
		t.run(s, c)
	}()
}

// response is an outbound JSON-RPC response. ID is copied verbatim from
// the request so a string id stays a string and a large number keeps its
// digits.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

var nullID = json.RawMessage("null")

func (s *server) writeResult(id json.RawMessage, result any) {
	if err := s.writeResultChecked(id, result); err != nil {
		s.logf("mcptest: encoding a result: %v", err)
	}
}

func (s *server) writeResultChecked(id json.RawMessage, result any) error {
	r, err := json.Marshal(result)
	if err != nil {
		return err
	}
	b, err := json.Marshal(response{JSONRPC: "2.0", ID: id, Result: json.RawMessage(s.modernResult(id, r))})
	if err != nil {
		return err
	}
	s.retire(id)
	s.writeLine(b)
	return nil
}

// retire forgets the call with id before its answer is written: a client
// may reuse an id once it has the answer, and the running tool must not
// list a call whose answer it has seen.
func (s *server) retire(id json.RawMessage) {
	s.mu.Lock()
	delete(s.calls, string(id))
	s.mu.Unlock()
}

func (s *server) writeError(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = nullID
	}
	b, err := json.Marshal(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
	if err != nil {
		s.logf("mcptest: encoding an error: %v", err)
		return
	}
	s.writeLine(b)
}

// notify sends a notification with the conventional params for method;
// token is the progress token to use for notifications/progress.
func (s *server) notify(method string, token json.RawMessage) {
	var params any
	switch method {
	case "notifications/progress":
		if token == nil {
			token = json.RawMessage(`"mcptest"`)
		}
		params = progressParams{Token: token, Progress: 1, Total: 1, Message: "mcptest progress"}
	case "notifications/message":
		params = map[string]string{"level": "info", "logger": "mcptest", "data": "mcptest log message"}
	}
	s.writeNotification(method, params)
}

func (s *server) writeNotification(method string, params any) {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		s.logf("mcptest: encoding a notification: %v", err)
		return
	}
	s.writeLine(b)
}

type progressParams struct {
	Token    json.RawMessage `json:"progressToken"`
	Progress int             `json:"progress"`
	Total    int             `json:"total"`
	Message  string          `json:"message"`
}

// writeLine writes b and a newline as one unit and flushes. Nothing is
// written once the server is dead; a write failure kills it (a process
// whose stdout is gone dies of SIGPIPE).
func (s *server) writeLine(b []byte) {
	s.writeLineWith(func(w *bufio.Writer) { _, _ = w.Write(b) })
}

// writeLineWith is writeLine for a line produced piecewise by fill (which
// must not write a newline).
func (s *server) writeLineWith(fill func(w *bufio.Writer)) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.werr != nil || s.hard.Err() != nil {
		return
	}
	fill(s.bw)
	_ = s.bw.WriteByte('\n')
	if err := s.bw.Flush(); err != nil {
		s.werr = err
		s.hardCancel(fmt.Errorf("mcptest: writing stdout: %w", err))
	}
}

// logf writes one line to errw.
func (s *server) logf(format string, args ...any) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	fmt.Fprintf(s.errw, format+"\n", args...)
}

// flood writes n bytes of newline-terminated filler to errw in 64 KiB
// writes.
func (s *server) flood(n int) {
	chunk := bytes.Repeat([]byte("mcptest stderr flood: the client must drain stderr while it waits on stdout\n"), 1<<16/76+1)
	s.errMu.Lock()
	defer s.errMu.Unlock()
	for n > 0 && s.hard.Err() == nil {
		k := min(n, len(chunk))
		if _, err := s.errw.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

func noiseLine(i int) []byte {
	return fmt.Appendf(nil, "mcptest noise line %d: this is not JSON", i)
}
