package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// tool is one entry of the default catalogue: its listing descriptor and
// its behaviour. run answers the call itself (or, for the misbehaviours,
// does not), so a tool controls every byte of its response.
type tool struct {
	name        string
	description string
	schema      string // inputSchema, JSON
	run         func(s *server, c *call)
}

const noArgs = `{"type":"object","additionalProperties":false}`

// catalogue is the default tool catalogue (docs/mcptest.md lists it).
var catalogue = []tool{
	{"echo", "Answers with one text block holding text.",
		`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, (*server).echo},
	{"add", "Answers the sum of two integers as text and as structuredContent {sum}.",
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`, (*server).add},
	{"fail", "Answers an isError result holding message.",
		`{"type":"object","properties":{"message":{"type":"string"}}}`, (*server).fail},
	{"slow", "Sleeps ms milliseconds, then answers like echo.",
		`{"type":"object","properties":{"ms":{"type":"integer","minimum":0},"text":{"type":"string"}},"required":["ms"]}`, (*server).slow},
	{"hang", "Never answers this call; other requests are still served.", noArgs, (*server).hang},
	{"crash", "Writes a line to stderr and exits with status 1 in the middle of the call.", noArgs, (*server).crash},
	{"kill", "Writes a line to stderr and SIGKILLs its own process in the middle of the call.", noArgs, (*server).kill},
	{"content", "Answers one content block of every kind plus structuredContent {kinds}.", noArgs, (*server).content},
	{"progress", "Sends steps notifications/progress for the call's progress token, one every interval_ms, then answers done.",
		`{"type":"object","properties":{"steps":{"type":"integer","minimum":0},"interval_ms":{"type":"integer","minimum":0}}}`, (*server).progress},
	{"noise", "Prints lines non-JSON lines on stdout, then answers.",
		`{"type":"object","properties":{"lines":{"type":"integer","minimum":0}}}`, (*server).noise},
	{"long_line", "Answers with a valid response line of at least bytes bytes.",
		`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0}},"required":["bytes"]}`, (*server).longLine},
	{"bad_utf8", "Answers with a line holding invalid UTF-8 inside a JSON string.", noArgs, (*server).badUTF8},
	{"nan_result", "Answers with NaN and Infinity in structuredContent, as Python's json.dumps writes them by default.", noArgs, (*server).nanResult},
	{"deep_result", "Answers with structuredContent nested depth arrays deep.",
		`{"type":"object","properties":{"depth":{"type":"integer","minimum":0}},"required":["depth"]}`, (*server).deepResult},
	{"server_request", "Sends the request method to the client, waits for its response, and answers the raw response line.",
		`{"type":"object","properties":{"method":{"type":"string"},"id_kind":{"type":"string","enum":["int","string"]}},"required":["method"]}`, (*server).serverRequest},
	{"notify", "Sends the notification method, then answers ok.",
		`{"type":"object","properties":{"method":{"type":"string"}},"required":["method"]}`, (*server).notifyTool},
	{"unknown_id", "First answers an id the client never used, then the real answer.", noArgs, (*server).unknownID},
	{"duplicate_id", "Sends the real answer twice.", noArgs, (*server).duplicateID},
	{"result_and_error", "Answers with a response carrying both result and error.", noArgs, (*server).resultAndError},
	{"string_id", "First answers with the id turned into a JSON string, then the real answer.", noArgs, (*server).stringID},
	{"stderr", "Writes bytes bytes to stderr during the call, then answers.",
		`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0}},"required":["bytes"]}`, (*server).stderrTool},
	{"cancellations", "Answers the notifications/cancelled received so far, oldest first, as text lines and as structuredContent {cancelled}.", noArgs, (*server).cancellations},
	{"relist", "Switches tools/list to the scenario's relisted listing, sends notifications/tools/list_changed, then answers ok.", noArgs, (*server).relist},
	{"running", "Answers the other calls in flight at the server, by request id, as text lines and as structuredContent {running}.", noArgs, (*server).running},
	{"calls", "Answers how many tools/call requests the server accepted before this one, and the bytes of their params.arguments as sent, as text and as structuredContent {calls, arg_bytes}.", noArgs, (*server).callsTool},
	{"meta", "Answers the call's params._meta as sent, as structuredContent {meta} (null when absent), and its traceparent as text.", noArgs, (*server).metaTool},
	{"gate", "Waits until a file exists at path (looking every 10 ms, at most MaxWait), then answers like echo: a call a test holds in flight and releases when it chooses.",
		`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path"]}`, (*server).gate},
	{"print_env", "Writes the value of the environment variable name to stderr, then answers ok.",
		`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`, (*server).printEnv},
	{"rpc_error", "Answers a JSON-RPC error (-32000) whose message is message followed by the value of the environment variable env, if named.",
		`{"type":"object","properties":{"message":{"type":"string"},"env":{"type":"string"}}}`, (*server).rpcErrorTool},
}

// toolsByName dispatches calls; defaultListing is the sorted listing.
var toolsByName, defaultListing = buildCatalogue()

func buildCatalogue() (map[string]tool, []json.RawMessage) {
	byName := make(map[string]tool, len(catalogue))
	sorted := slices.Clone(catalogue)
	slices.SortFunc(sorted, func(a, b tool) int { return strings.Compare(a.name, b.name) })
	listing := make([]json.RawMessage, 0, len(sorted))
	for _, t := range sorted {
		byName[t.name] = t
		b, err := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}{t.name, t.description, json.RawMessage(t.schema)})
		if err != nil {
			panic("mcptest: catalogue schema of " + t.name + " is not JSON: " + err.Error())
		}
		listing = append(listing, b)
	}
	return byName, listing
}

// toolResult is a CallToolResult.
type toolResult struct {
	Content           []any `json:"content"`
	StructuredContent any   `json:"structuredContent,omitempty"`
	IsError           bool  `json:"isError,omitempty"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func textResult(t string) toolResult { return toolResult{Content: []any{textBlock{"text", t}}} }

func errorResult(format string, args ...any) toolResult {
	r := textResult(fmt.Sprintf(format, args...))
	r.IsError = true
	return r
}

// answer writes the call's result unless the client cancelled it (a
// cancelled request is not answered: the receiver SHOULD not respond).
func (s *server) answer(c *call, r toolResult) {
	select {
	case <-c.cancelled:
		return
	default:
	}
	s.writeResult(c.id, r)
}

// decodeArgs decodes the call's arguments into v; absent or null arguments
// decode as {}. A mismatch is answered as an isError result (input
// validation is a tool error, not a protocol error) and reported false.
func (s *server) decodeArgs(c *call, v any) bool {
	if len(c.args) == 0 || string(c.args) == "null" {
		return true
	}
	if err := json.Unmarshal(c.args, v); err != nil {
		s.answer(c, errorResult("invalid arguments: %v", err))
		return false
	}
	return true
}

// intArg checks an optional integer argument against [0, max].
func (s *server) intArg(c *call, name string, v *int64, required bool, max int64) (int64, bool) {
	switch {
	case v == nil && required:
		s.answer(c, errorResult("invalid arguments: %s is required", name))
		return 0, false
	case v == nil:
		return 0, true
	case *v < 0 || *v > max:
		s.answer(c, errorResult("invalid arguments: %s must be in [0, %d]", name, max))
		return 0, false
	}
	return *v, true
}

// sleep waits d; it reports false if the call was cancelled or the server
// died first.
func (s *server) sleep(c *call, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.cancelled:
	case <-s.hard.Done():
	}
	return false
}

func (s *server) echo(c *call) {
	var a struct{ Text *string }
	if !s.decodeArgs(c, &a) {
		return
	}
	if a.Text == nil {
		s.answer(c, errorResult("invalid arguments: text is required"))
		return
	}
	s.answer(c, textResult(*a.Text))
}

func (s *server) add(c *call) {
	var a struct{ A, B *int64 }
	if !s.decodeArgs(c, &a) {
		return
	}
	if a.A == nil || a.B == nil {
		s.answer(c, errorResult("invalid arguments: a and b are required"))
		return
	}
	sum := *a.A + *a.B
	if (*a.A >= 0) == (*a.B >= 0) && (sum >= 0) != (*a.A >= 0) {
		s.answer(c, errorResult("a + b overflows int64"))
		return
	}
	r := textResult(strconv.FormatInt(sum, 10))
	r.StructuredContent = map[string]int64{"sum": sum}
	s.answer(c, r)
}

func (s *server) fail(c *call) {
	var a struct{ Message string }
	if !s.decodeArgs(c, &a) {
		return
	}
	if a.Message == "" {
		a.Message = "the fail tool failed, as asked"
	}
	s.answer(c, errorResult("%s", a.Message))
}

func (s *server) slow(c *call) {
	var a struct {
		MS   *int64
		Text string
	}
	if !s.decodeArgs(c, &a) {
		return
	}
	ms, ok := s.intArg(c, "ms", a.MS, true, MaxWait.Milliseconds())
	if !ok || !s.sleep(c, time.Duration(ms)*time.Millisecond) {
		return
	}
	s.answer(c, textResult(a.Text))
}

// hang never answers; it ends (silently) when the call is cancelled or
// stdin ends, so the call goroutine never outlives Serve.
func (s *server) hang(c *call) {
	select {
	case <-c.cancelled:
	case <-s.drain.Done():
	}
}

func (s *server) crash(c *call) {
	s.logf("mcptest: crashing in the middle of call %s (tool crash)", c.id)
	s.die(1, "crash tool (status 1)")
}

func (s *server) kill(c *call) {
	s.logf("mcptest: killing myself with SIGKILL in the middle of call %s (tool kill)", c.id)
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.proc != nil {
		s.proc.killSelf()
	}
	s.hardCancel(fmt.Errorf("%w: kill tool (SIGKILL)", ErrExited))
}

// contentResult holds one block of every ContentBlock kind of 2025-11-25:
// a 1×1 PNG, a 44-byte silent WAV, a resource link and both embedded
// resource forms.
var contentResult = json.RawMessage(`{"content":[` +
	`{"type":"text","text":"a text block"},` +
	`{"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","mimeType":"image/png"},` +
	`{"type":"audio","data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=","mimeType":"audio/wav"},` +
	`{"type":"resource_link","uri":"file:///mcptest/link.txt","name":"link.txt","mimeType":"text/plain"},` +
	`{"type":"resource","resource":{"uri":"file:///mcptest/embedded.txt","mimeType":"text/plain","text":"embedded text"}},` +
	`{"type":"resource","resource":{"uri":"file:///mcptest/embedded.bin","mimeType":"application/octet-stream","blob":"AAEC/w=="}}` +
	`],"structuredContent":{"kinds":["text","image","audio","resource_link","resource","resource"]}}`)

func (s *server) content(c *call) {
	select {
	case <-c.cancelled:
	default:
		s.writeResult(c.id, contentResult)
	}
}

func (s *server) progress(c *call) {
	var b struct {
		Steps      *int64 `json:"steps"`
		IntervalMS *int64 `json:"interval_ms"`
	}
	if !s.decodeArgs(c, &b) {
		return
	}
	steps, ok := s.intArg(c, "steps", b.Steps, false, 10000)
	if !ok {
		return
	}
	interval, ok := s.intArg(c, "interval_ms", b.IntervalMS, false, MaxWait.Milliseconds())
	if !ok {
		return
	}
	if time.Duration(steps*interval)*time.Millisecond > MaxWait {
		s.answer(c, errorResult("invalid arguments: steps × interval_ms exceeds %v", MaxWait))
		return
	}
	for i := int64(1); i <= steps; i++ {
		if !s.sleep(c, time.Duration(interval)*time.Millisecond) {
			return
		}
		if c.token != nil {
			s.writeNotification("notifications/progress", progressParams{
				Token: c.token, Progress: int(i), Total: int(steps), Message: fmt.Sprintf("step %d of %d", i, steps),
			})
		}
	}
	s.answer(c, textResult("done"))
}

func (s *server) noise(c *call) {
	var a struct{ Lines *int64 }
	if !s.decodeArgs(c, &a) {
		return
	}
	n, ok := s.intArg(c, "lines", a.Lines, false, MaxNoiseLines)
	if !ok {
		return
	}
	for i := range int(n) {
		s.writeLine(noiseLine(i))
	}
	s.answer(c, textResult(fmt.Sprintf("printed %d noise lines", n)))
}

func (s *server) longLine(c *call) {
	var a struct{ Bytes *int64 }
	if !s.decodeArgs(c, &a) {
		return
	}
	n, ok := s.intArg(c, "bytes", a.Bytes, true, MaxOutputBytes)
	if !ok {
		return
	}
	// Streamed in pieces: json.Marshal (or one big buffer) would allocate
	// and scan the padding several times over.
	pad := bytes.Repeat([]byte{'x'}, 32<<10)
	s.writeLineWith(func(w *bufio.Writer) {
		_, _ = w.WriteString(`{"jsonrpc":"2.0","id":`)
		_, _ = w.Write(c.id)
		_, _ = w.WriteString(`,"result":{"content":[{"type":"text","text":"`)
		for left := int(n); left > 0; left -= len(pad) {
			_, _ = w.Write(pad[:min(left, len(pad))])
		}
		_, _ = w.WriteString(`"}]}}`)
	})
}

func (s *server) badUTF8(c *call) {
	// \xff and \xfe never occur in UTF-8; json.Marshal would replace them
	// with U+FFFD, so this line is written by hand.
	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"bad `+"\xff\xfe"+` utf8"}]}}`, c.id)
	s.writeLine(line)
}

func (s *server) nanResult(c *call) {
	// NaN and Infinity are not JSON; json.Marshal refuses them, so the
	// line is written by hand.
	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"nan"}],"structuredContent":{"x":NaN,"y":[Infinity,-Infinity]}}}`, c.id)
	s.writeLine(line)
}

// maxDeepResult bounds deep_result's depth (two bytes a level).
const maxDeepResult = 1 << 20

func (s *server) deepResult(c *call) {
	var a struct{ Depth *int64 }
	if !s.decodeArgs(c, &a) {
		return
	}
	n, ok := s.intArg(c, "depth", a.Depth, true, maxDeepResult)
	if !ok {
		return
	}
	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":{"deep":`, c.id)
	line = append(line, bytes.Repeat([]byte{'['}, int(n))...)
	line = append(line, bytes.Repeat([]byte{']'}, int(n))...)
	line = append(line, "}}}"...)
	s.writeLine(line)
}

// serverRequestParams are the params sent with each known server→client
// request method; other methods are sent without params.
var serverRequestParams = map[string]any{
	"sampling/createMessage": map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": map[string]string{"type": "text", "text": "mcptest asks for a sample"}}},
		"maxTokens": 16,
	},
	"elicitation/create": map[string]any{
		"message":         "mcptest asks a question",
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
	},
}

func (s *server) serverRequest(c *call) {
	var a struct {
		Method *string
		IDKind string `json:"id_kind"`
	}
	if !s.decodeArgs(c, &a) {
		return
	}
	if a.Method == nil {
		s.answer(c, errorResult("invalid arguments: method is required"))
		return
	}
	s.mu.Lock()
	s.nextID++
	n := s.nextID
	var id json.RawMessage
	switch a.IDKind {
	case "", "int":
		id = strconv.AppendInt(nil, n, 10)
	case "string":
		id = strconv.AppendQuote(nil, "mcptest-"+strconv.FormatInt(n, 10))
	default:
		s.mu.Unlock()
		s.answer(c, errorResult("invalid arguments: id_kind must be int or string"))
		return
	}
	ch := make(chan []byte, 1)
	s.pending[string(id)] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, string(id))
		s.mu.Unlock()
	}()

	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params,omitempty"`
	}{"2.0", id, *a.Method, serverRequestParams[*a.Method]})
	if err != nil {
		s.answer(c, errorResult("encoding the request: %v", err))
		return
	}
	s.writeLine(b)
	t := time.NewTimer(ServerRequestWait)
	defer t.Stop()
	select {
	case line := <-ch:
		s.answer(c, textResult(string(line)))
	case <-t.C:
		s.answer(c, errorResult("no response to %s (id %s) within %v", *a.Method, id, ServerRequestWait))
	case <-c.cancelled:
	case <-s.drain.Done():
	}
}

func (s *server) notifyTool(c *call) {
	var a struct{ Method *string }
	if !s.decodeArgs(c, &a) {
		return
	}
	if a.Method == nil {
		s.answer(c, errorResult("invalid arguments: method is required"))
		return
	}
	s.notify(*a.Method, c.token)
	s.answer(c, textResult("ok"))
}

// relist switches the listing before it notifies, so a client that
// re-lists on the notification already sees the new tools.
func (s *server) relist(c *call) {
	if s.sc.Relisted == nil {
		s.answer(c, errorResult("the scenario has no relisted listing"))
		return
	}
	s.mu.Lock()
	s.listing, s.relisted = s.sc.Relisted, true
	s.mu.Unlock()
	s.listChanged()
	s.answer(c, textResult("ok"))
}

func (s *server) unknownID(c *call) {
	s.mu.Lock()
	s.nextID++
	n := s.nextID
	s.mu.Unlock()
	// Negative: clients number their requests upwards from 0 or 1.
	s.writeResult(strconv.AppendInt(nil, -n, 10), textResult("unknown id"))
	s.answer(c, textResult("ok"))
}

func (s *server) duplicateID(c *call) {
	s.answer(c, textResult("duplicate"))
	s.answer(c, textResult("duplicate"))
}

func (s *server) resultAndError(c *call) {
	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"result"}]},"error":{"code":-32603,"message":"and error"}}`, c.id)
	s.writeLine(line)
}

func (s *server) stringID(c *call) {
	// The id's JSON text as a JSON string: 7 becomes "7", "a" becomes "\"a\"";
	// either way it is not the id the client sent.
	wrong, _ := json.Marshal(string(c.id))
	s.writeResult(wrong, textResult("wrong"))
	s.answer(c, textResult("right"))
}

func (s *server) stderrTool(c *call) {
	var a struct{ Bytes *int64 }
	if !s.decodeArgs(c, &a) {
		return
	}
	n, ok := s.intArg(c, "bytes", a.Bytes, true, MaxOutputBytes)
	if !ok {
		return
	}
	s.flood(int(n))
	s.answer(c, textResult(fmt.Sprintf("wrote %d bytes to stderr", n)))
}

// Running is one call in flight at the server, as the running tool
// reports it.
type Running struct {
	// RequestID is the request's id as JSON text, verbatim.
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
}

// running reports the calls the server has read and not yet answered
// (this one excepted), sorted by request id. A test waits on it to know
// that calls have reached the server, which nothing on the client's side
// can tell: a client may count a call as sent before its line is written.
func (s *server) running(c *call) {
	s.mu.Lock()
	got := []Running{}
	for _, o := range s.calls {
		if o != c {
			got = append(got, Running{RequestID: string(o.id), Tool: o.tool})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(got, func(a, b Running) int { return strings.Compare(a.RequestID, b.RequestID) })
	var text strings.Builder
	for _, x := range got {
		fmt.Fprintf(&text, "%s %q\n", x.RequestID, x.Tool)
	}
	r := textResult(text.String())
	r.StructuredContent = map[string]any{"running": got}
	s.answer(c, r)
}

// cancellations reports what notifications/cancelled told the server, so
// a test can check the client's side of cancellation (a timeout, a
// cancel, a caller that went away) from the server's side.
func (s *server) cancellations(c *call) {
	s.mu.Lock()
	got := slices.Clone(s.cancelled)
	s.mu.Unlock()
	if got == nil {
		got = []Cancellation{}
	}
	var text strings.Builder
	for _, x := range got {
		fmt.Fprintf(&text, "%s %q %q\n", x.RequestID, x.Tool, x.Reason)
	}
	r := textResult(text.String())
	r.StructuredContent = map[string]any{"cancelled": got}
	s.answer(c, r)
}

// callsTool answers the tools/call requests accepted before this one and
// their arguments' bytes, as the server counted them.
func (s *server) callsTool(c *call) {
	s.mu.Lock()
	n, b := s.received-1, s.receivedArgs-int64(len(c.args))
	s.mu.Unlock()
	r := textResult(fmt.Sprintf("%d calls, %d argument bytes", n, b))
	r.StructuredContent = map[string]any{"calls": n, "arg_bytes": b}
	s.answer(c, r)
}

// metaTool answers the call's _meta, so a test sees what its client put
// there (a traceparent, SEP-414).
func (s *server) metaTool(c *call) {
	var m struct {
		Traceparent string `json:"traceparent"`
	}
	meta := json.RawMessage("null")
	if len(c.meta) > 0 {
		meta = c.meta
		_ = json.Unmarshal(c.meta, &m)
	}
	r := textResult(m.Traceparent)
	r.StructuredContent = map[string]any{"meta": meta}
	s.answer(c, r)
}

// printEnv writes an environment variable's value to stderr, as a server
// that logs its configuration does.
func (s *server) printEnv(c *call) {
	var a struct {
		Name string `json:"name"`
	}
	if !s.decodeArgs(c, &a) {
		return
	}
	s.logf("%s=%s", a.Name, os.Getenv(a.Name))
	s.answer(c, textResult("ok"))
}

// rpcErrorTool fails the call as a server whose error message quotes its
// configuration does.
func (s *server) rpcErrorTool(c *call) {
	var a struct {
		Message string `json:"message"`
		Env     string `json:"env"`
	}
	if !s.decodeArgs(c, &a) {
		return
	}
	if a.Env != "" {
		a.Message += os.Getenv(a.Env)
	}
	s.writeError(c.id, -32000, a.Message)
}

// gate answers once a file exists at the path given: the test creates it
// when it wants its calls to end. It gives up, unanswered, when the call
// is cancelled, the server ends, or MaxWait passes.
func (s *server) gate(c *call) {
	var a struct {
		Path string
		Text string
	}
	if !s.decodeArgs(c, &a) {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(MaxWait)
	defer limit.Stop()
	for {
		if _, err := os.Stat(a.Path); err == nil {
			s.answer(c, textResult(a.Text))
			return
		}
		select {
		case <-tick.C:
		case <-c.cancelled:
			return
		case <-s.hard.Done():
			return
		case <-limit.C:
			s.answer(c, errorResult("gate: %s did not appear within %s", a.Path, MaxWait))
			return
		}
	}
}
