package mcptest

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The stateless revision (2026-07-28). A server in a modern era learns
// its client from each request's _meta instead of a handshake, answers
// server/discover, marks every result with resultType, delivers
// tools/list_changed only on a subscriptions/listen stream, and sends no
// requests of its own (except where a scenario asks it to misbehave).

// Scenario.Era values.
const (
	// EraModern serves both eras as the TypeScript SDK v2's serveStdio
	// does by default: the first request pins the connection's era,
	// server/discover the modern one and initialize the legacy one.
	EraModern = "modern"
	// EraModernOnly refuses the legacy era (serveStdio with legacy
	// 'reject'): initialize is answered -32022 naming 2026-07-28.
	EraModernOnly = "modern_only"
)

// ModernVersion is the one modern revision the server speaks.
const ModernVersion = "2026-07-28"

// Error codes of the modern revision.
const (
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

// The reserved _meta keys.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// modernState is the era decision and the open listen streams, under
// server.mu.
type modernState struct {
	pinned bool // the first request has decided the era
	modern bool // ...and it is the modern one
	// subs are the open subscriptions/listen streams by the request id's
	// raw text; the value is the raw id, echoed as subscriptionId.
	subs map[string]json.RawMessage
	// late is a held server/discover request id (DiscoverLate), answered
	// after the next initialize result.
	late json.RawMessage
	// requestN numbers the server requests RequestsOnListen sends.
	requestN int
	// taskCalls are the tools/call requests whose client declared the
	// tasks extension, by raw id; tasks are the tasks made of them.
	taskCalls map[string]bool
	tasks     map[string]*task
}

// task is a tools/call answered as a task (Scenario.TaskPolls).
type task struct {
	result    json.RawMessage // the call's result, the completed task's
	polls     int             // tasks/get answered so far
	cancelled bool
}

// tasksExtension is the extension a client declares to be answered with
// tasks (2026-07-28, SEP-2663).
const tasksExtension = "io.modelcontextprotocol/tasks"

// isModern reports whether the connection speaks the modern era.
func (s *server) isModern() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.modern
}

// pin decides the era on the first request, as the dual-era SDK does.
func (s *server) pin(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.pinned {
		return
	}
	switch method {
	case "server/discover":
		s.m.pinned, s.m.modern = true, s.sc.Era != ""
	case "initialize":
		s.m.pinned = true
	}
}

// modernRequest serves the requests whose handling the era changes; it
// reports false for the rest, which the shared loop serves.
func (s *server) modernRequest(f inbound) bool {
	s.pin(f.Method)
	if f.Method == "server/discover" {
		s.discover(f)
		return true
	}
	if !s.isModern() {
		if f.Method == "initialize" && s.sc.Era == EraModernOnly {
			s.writeUnsupported(f.ID, "2025-era initialize")
			return true
		}
		return false
	}
	if !s.checkEnvelope(f) {
		return true
	}
	switch f.Method {
	case "initialize":
		s.writeUnsupported(f.ID, "initialize after server/discover")
	case "ping":
		s.writeError(f.ID, codeMethodNotFound, "Method not found: ping (removed in "+ModernVersion+")")
	case "subscriptions/listen":
		s.listen(f)
	case "tools/call":
		if s.sc.TaskPolls > 0 && declaresTasks(f.Params) {
			s.mu.Lock()
			if s.m.taskCalls == nil {
				s.m.taskCalls = map[string]bool{}
			}
			s.m.taskCalls[string(f.ID)] = true
			s.mu.Unlock()
		}
		return false // served by the shared loop; modernResult makes it a task
	case "tasks/get":
		s.taskGet(f)
	case "tasks/cancel":
		s.taskCancel(f)
	default:
		return false
	}
	return true
}

// declaresTasks reports whether a request's per-request client
// capabilities declare the tasks extension.
func declaresTasks(params json.RawMessage) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta[metaClientCapabilities], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// taskOf is the task a tasks/get or tasks/cancel names, or nil after
// answering the request with an error.
func (s *server) taskOf(f inbound) *task {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(f.Params, &p) != nil || p.TaskID == "" {
		s.writeError(f.ID, codeInvalidParams, "Invalid params: taskId")
		return nil
	}
	s.mu.Lock()
	t := s.m.tasks[p.TaskID]
	s.mu.Unlock()
	if t == nil {
		s.writeError(f.ID, codeInvalidParams, "Unknown task: "+p.TaskID)
	}
	return t
}

// taskGet answers tasks/get: working for TaskPolls polls, then TaskEnd.
func (s *server) taskGet(f inbound) {
	t := s.taskOf(f)
	if t == nil {
		return
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(f.Params, &p)
	s.mu.Lock()
	t.polls++
	status, extra := "working", ""
	switch end := s.sc.TaskEnd; {
	case t.cancelled:
		status = "cancelled"
	case t.polls <= s.sc.TaskPolls:
	case end == "failed":
		status, extra = end, `,"error":{"code":-32000,"message":"the task failed"}`
	case end == "cancelled":
		status = end
	case end == "input_required":
		status, extra = end, `,"inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Proceed?","requestedSchema":{"type":"object","properties":{}}}}}`
	default:
		status, extra = "completed", `,"result":`+string(t.result)
	}
	s.mu.Unlock()
	s.writeResult(f.ID, json.RawMessage(`{"taskId":`+strconv.Quote(p.TaskID)+`,"status":`+strconv.Quote(status)+`,"ttlMs":null,"pollIntervalMs":10`+extra+`}`))
}

// taskCancel answers tasks/cancel with an empty acknowledgement; the task
// is cancelled from then on.
func (s *server) taskCancel(f inbound) {
	t := s.taskOf(f)
	if t == nil {
		return
	}
	s.mu.Lock()
	t.cancelled = true
	s.mu.Unlock()
	s.writeResult(f.ID, struct{}{})
	s.logf("mcptest: task cancelled")
}

// checkEnvelope holds a modern request to the per-request _meta rule:
// protocolVersion names the modern revision (else -32022) and
// clientCapabilities is an object (else -32602).
func (s *server) checkEnvelope(f inbound) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(f.Params, &p)
	var v string
	if json.Unmarshal(p.Meta[metaProtocolVersion], &v) != nil || v != ModernVersion {
		s.writeUnsupported(f.ID, "request without "+metaProtocolVersion+" "+ModernVersion)
		return false
	}
	if caps := bytes.TrimSpace(p.Meta[metaClientCapabilities]); len(caps) == 0 || caps[0] != '{' {
		s.writeError(f.ID, codeInvalidParams, "Invalid params: _meta lacks "+metaClientCapabilities)
		return false
	}
	return true
}

// discover answers server/discover: the scenario's error, nothing yet
// (DiscoverLate), -32601 in the legacy-only era, or the DiscoverResult.
func (s *server) discover(f inbound) {
	switch {
	case s.sc.DiscoverError != nil:
		s.writeRawError(f.ID, s.sc.DiscoverError)
	case s.sc.DiscoverLate:
		s.mu.Lock()
		s.m.late = f.ID
		s.mu.Unlock()
		s.logf("mcptest: holding the server/discover answer until initialize (scenario discover_late)")
	case s.sc.Era == "":
		s.writeError(f.ID, codeMethodNotFound, "Method not found: server/discover")
	default:
		s.writeResult(f.ID, s.discoverResult())
	}
}

func (s *server) discoverResult() map[string]any {
	return map[string]any{
		"supportedVersions": []string{ModernVersion},
		"capabilities":      map[string]any{"tools": map[string]bool{"listChanged": true}},
		"ttlMs":             0,
		"cacheScope":        "private",
		"_meta":             map[string]any{metaServerInfo: map[string]string{"name": s.serverName(), "version": "0.1.0"}},
	}
}

// answerLate sends the held discover answer, after the initialize
// result: a client that fell back to initialize must ignore it.
func (s *server) answerLate() {
	s.mu.Lock()
	id := s.m.late
	s.m.late = nil
	s.mu.Unlock()
	if id != nil {
		s.writeResult(id, s.discoverResult())
	}
}

func (s *server) writeUnsupported(id json.RawMessage, why string) {
	type data struct {
		Supported []string `json:"supported"`
	}
	e, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    data   `json:"data"`
	}{codeUnsupportedVersion, "Unsupported protocol version: " + why, data{[]string{ModernVersion}}})
	s.writeRawError(id, e)
}

// writeRawError writes an error response whose error object is raw JSON.
func (s *server) writeRawError(id json.RawMessage, raw json.RawMessage) {
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   json.RawMessage `json:"error"`
	}{"2.0", id, raw})
	if err != nil {
		s.writeError(id, -32603, "Internal error: scenario JSON is not JSON")
		return
	}
	s.writeLine(b)
}

// listen opens a subscriptions/listen stream: the acknowledgement, then
// the scenario's requests and notifications on it. The request is never
// answered while the stream is open; notifications/cancelled ends it.
func (s *server) listen(f inbound) {
	key := string(f.ID)
	s.mu.Lock()
	if s.m.subs == nil {
		s.m.subs = map[string]json.RawMessage{}
	}
	s.m.subs[key] = bytes.Clone(f.ID)
	s.mu.Unlock()
	s.writeNotification("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": map[string]bool{"toolsListChanged": true},
		"_meta":         map[string]json.RawMessage{metaSubscriptionID: f.ID},
	})
	for range min(s.sc.RequestsOnListen, MaxNoiseLines) {
		s.mu.Lock()
		s.m.requestN++
		n := s.m.requestN
		s.mu.Unlock()
		s.writeLine([]byte(`{"jsonrpc":"2.0","id":"mcptest-modern-` + strconv.Itoa(n) + `","method":"ping"}`))
	}
	for _, m := range s.sc.NotifyOnListen {
		s.streamNotify(f.ID, m)
	}
}

// streamNotify sends method on the stream of listen request id.
func (s *server) streamNotify(id json.RawMessage, method string) {
	s.writeNotification(method, map[string]any{"_meta": map[string]json.RawMessage{metaSubscriptionID: id}})
}

// endStream closes the stream a notifications/cancelled names; it
// reports whether one was open. The listen request is not answered.
func (s *server) endStream(requestID json.RawMessage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m.subs[string(requestID)]; !ok {
		return false
	}
	delete(s.m.subs, string(requestID))
	return true
}

// listChanged tells the client its tools changed: unsolicited in the
// legacy era, on every open listen stream in the modern one.
func (s *server) listChanged() {
	if !s.isModern() {
		s.notify("notifications/tools/list_changed", nil)
		return
	}
	s.mu.Lock()
	ids := make([]json.RawMessage, 0, len(s.m.subs))
	for _, id := range s.m.subs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.streamNotify(id, "notifications/tools/list_changed")
	}
}

// modernResult marks a result for the modern era: resultType (the
// scenario's, for a tools/call result, else "complete") spliced in, and
// for input_required the inputRequests the client cannot satisfy.
func (s *server) modernResult(id json.RawMessage, b []byte) []byte {
	if len(b) == 0 || b[0] != '{' || !s.isModern() {
		return b
	}
	rt := "complete"
	s.mu.Lock()
	_, isCall := s.calls[string(id)]
	if isCall && s.m.taskCalls[string(id)] {
		// The call is done: answer it with a task holding its result.
		delete(s.m.taskCalls, string(id))
		if s.m.tasks == nil {
			s.m.tasks = map[string]*task{}
		}
		taskID := "task-" + strconv.Itoa(len(s.m.tasks)+1)
		result := []byte(`{"resultType":"complete"}`)
		if len(b) > 2 {
			result = append([]byte(`{"resultType":"complete",`), b[1:]...)
		}
		s.m.tasks[taskID] = &task{result: result}
		s.mu.Unlock()
		return []byte(`{"resultType":"task","taskId":` + strconv.Quote(taskID) + `,"status":"working","ttlMs":60000,"pollIntervalMs":10}`)
	}
	s.mu.Unlock()
	if isCall && s.sc.ResultType != "" {
		rt = s.sc.ResultType
	}
	head := `{"resultType":` + strconv.Quote(rt)
	if rt == "input_required" {
		key := s.sc.InputRequestKey
		if key == "" {
			key = "confirm"
		}
		head += `,"inputRequests":{` + strconv.Quote(key) + `:{"method":"elicitation/create","params":{"message":"Proceed?","requestedSchema":{"type":"object","properties":{}}}}}`
	}
	if len(b) > 2 {
		head += ","
	}
	return append([]byte(head), b[1:]...)
}
