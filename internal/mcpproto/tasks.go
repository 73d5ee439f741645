package mcpproto

import (
	"math"
	"strconv"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// TasksExtension names the tasks extension (2026-07-28, SEP-2663) in
// client and server capabilities.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Task states (MCP 2025-11-25, "Tasks"). Completed, failed and cancelled
// are terminal.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// Task is a task's state as tools/call (CreateTaskResult) or tasks/get
// reports it, in either form: 2025-11-25's (ttl, pollInterval) or the
// 2026-07-28 extension's (ttlMs, pollIntervalMs, and a terminal task's
// result or error inline). TTL and PollInterval are milliseconds, 0 when
// absent; Result and Error are raw JSON objects, nil when absent; Raw is
// the whole task object, for its inputRequests.
type Task struct {
	ID            string
	Status        string
	StatusMessage string
	TTL           int64
	PollInterval  int64
	Result, Error []byte
	Raw           []byte
}

// Terminal reports whether the task will not change again.
func (t *Task) Terminal() bool {
	return t.Status == TaskCompleted || t.Status == TaskFailed || t.Status == TaskCancelled
}

// DecodeCreateTaskResult reads a tools/call result that may be a
// CreateTaskResult ({"task": Task}). It reports false, and no fault, for
// a result with no task member: the server answered the call itself.
func DecodeCreateTaskResult(raw []byte) (*Task, bool, error) {
	obj, err := objectResult("tools/call", raw)
	if err != nil {
		return nil, false, err
	}
	var task []byte
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		if jsonlex.KeyIs(key, "task") {
			task = v
		}
		return nil
	})
	if task == nil {
		return nil, false, nil
	}
	t, err := decodeTask("tools/call", "/task", task)
	return t, true, err
}

// DecodeTask decodes a tasks/get result, or a 2026-07-28 tools/call
// result whose resultType is "task": a Task.
func DecodeTask(raw []byte) (*Task, error) {
	obj, err := objectResult("tasks/get", raw)
	if err != nil {
		return nil, err
	}
	return decodeTask("tasks/get", "", obj)
}

func decodeTask(what, at string, v []byte) (*Task, error) {
	if v[0] != '{' {
		return nil, pfault(what, at, -1, "task is not an object (found "+kindName(v)+")")
	}
	t := &Task{}
	var why, where string
	_ = jsonlex.EachMember(v, func(key, mv []byte) error {
		switch {
		case jsonlex.KeyIs(key, "taskId"):
			t.ID, why = str(mv)
			where = "/taskId"
		case jsonlex.KeyIs(key, "status"):
			t.Status, why = str(mv)
			where = "/status"
		case jsonlex.KeyIs(key, "statusMessage"):
			t.StatusMessage, why = str(mv)
			where = "/statusMessage"
		case jsonlex.KeyIs(key, "ttl"), jsonlex.KeyIs(key, "ttlMs"):
			t.TTL, why = millis(mv)
			where = "/" + jsonlex.Unquote(key)
		case jsonlex.KeyIs(key, "pollInterval"), jsonlex.KeyIs(key, "pollIntervalMs"):
			t.PollInterval, why = millis(mv)
			where = "/" + jsonlex.Unquote(key)
		case jsonlex.KeyIs(key, "result"):
			t.Result, why = object(mv)
			where = "/result"
		case jsonlex.KeyIs(key, "error"):
			t.Error, why = object(mv)
			where = "/error"
		}
		if why != "" {
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return nil, pfault(what, at+where, -1, why)
	case t.ID == "":
		return nil, pfault(what, at+"/taskId", -1, "missing or empty")
	case t.Status == "":
		return nil, pfault(what, at+"/status", -1, "missing or empty")
	}
	t.Raw = v
	return t, nil
}

// millis reads a non-negative number of milliseconds (null: absent, as
// ttl may be).
func millis(v []byte) (int64, string) {
	switch v[0] {
	case 'n':
		return 0, ""
	case '"', '{', '[', 't', 'f':
		return 0, "expected number, found " + kindName(v)
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f > math.MaxInt64/2 {
		return 0, "expected a non-negative number of milliseconds"
	}
	return int64(f), ""
}

// TaskError is the JSON-RPC error a failed 2026-07-28 task carries, as
// an *RPCError, or a fault at /error when it is not one.
func (t *Task) TaskError() (*RPCError, error) {
	if len(t.Error) == 0 {
		// A server may mark a task failed and give no error: the spec
		// asks for one, and its absence is the server's fault.
		return nil, pfault("tasks/get", "/error", -1, "a failed task carries no error")
	}
	e, why := decodeRPCError(t.Error)
	if why != "" {
		return nil, pfault("tasks/get", "/error", -1, why)
	}
	return e, nil
}
