package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
)

// MCP tasks (2025-11-25, "Tasks", experimental): a tool whose
// execution.taskSupport is "required" is called with a task, and its
// server answers tools/call with a task handle instead of the result.
// CallToolTask follows the handle to the result, so its caller sees one
// call: it polls tasks/get as the server directs (pollInterval, within
// bounds), fetches tasks/result once the task is terminal, cancels the
// task (tasks/cancel) when its caller gives up or its deadline passes, and
// bounds the whole by the call's maximum timeout.

// Bounds on following a task.
const (
	minTaskPoll     = 50 * time.Millisecond // however often the server asks to be polled
	maxTaskPoll     = 5 * time.Second       // however seldom
	defaultTaskPoll = time.Second           // a task with no pollInterval
	taskCancelWait  = 2 * time.Second       // for the answer to tasks/cancel
	taskStepTimeout = 30 * time.Second      // for one tasks/get or tasks/result
)

// ErrTaskCancelled: the server cancelled the task itself.
var ErrTaskCancelled = errors.New("mcpwire: the server cancelled the task")

// Task is the state of a task, as its server reports it.
type Task = mcpproto.Task

// CallToolTask calls tool name as a 2025-11-25 task (tools/call with a
// "task" member) and waits for its result, as CallTool waits for a plain
// call's. A server that answers with the result itself (it ignored the
// task) is served as CallTool serves it. onStatus, when not nil, is told
// each state the task reports. See followTask for the rest.
func (c *Client) CallToolTask(ctx context.Context, name string, args Args, opt CallOptions, onStatus func(*Task)) (*CallToolResult, error) {
	deadline := time.Now().Add(c.maxTimeout(opt))
	opt.task = strconv.AppendInt([]byte(`{"ttl":`), c.maxTimeout(opt).Milliseconds(), 10)
	opt.task = append(opt.task, '}')
	raw, err := c.request(ctx, "tools/call", nil, args, name, opt, true)
	if err != nil {
		return nil, err
	}
	if c.Era() == EraModern {
		return c.callResult(ctx, raw, deadline, onStatus)
	}
	task, isTask, err := mcpproto.DecodeCreateTaskResult(raw.Bytes())
	if err != nil {
		return nil, err
	}
	if !isTask {
		return mcpproto.DecodeCallToolResultValue(raw)
	}
	return c.followTask(ctx, task, deadline, onStatus)
}

// maxTimeout is the bound on a whole call, task included.
func (c *Client) maxTimeout(opt CallOptions) time.Duration {
	if opt.MaxTimeout > 0 {
		return opt.MaxTimeout
	}
	return c.cfg.CallMaxTimeout
}

// callResult reads a tools/call result: in the 2026-07-28 era one whose
// resultType is "task" (the tasks extension, which this client declares
// on tools/call) is followed to the result; anything else is read as
// CallTool reads it.
func (c *Client) callResult(ctx context.Context, raw jsonlex.Value, deadline time.Time, onStatus func(*Task)) (*CallToolResult, error) {
	if c.Era() == EraModern {
		if rt, err := mcpproto.DecodeResultTypeValue("tools/call", raw); err == nil && rt == mcpproto.ResultTask {
			task, err := mcpproto.DecodeTask(raw.Bytes())
			if err != nil {
				return nil, err
			}
			return c.followTask(ctx, task, deadline, onStatus)
		}
	}
	if err := c.checkResult("tools/call", raw); err != nil {
		return nil, err
	}
	// Validated once, with the envelope, when the line was read.
	return mcpproto.DecodeCallToolResultValue(raw)
}

// followTask follows a task to the result of the call it stands for: it
// polls tasks/get as the server directs (pollInterval, held to
// minTaskPoll..maxTaskPoll), and once the task is terminal returns its
// result — inline in the 2026-07-28 form, from tasks/result in
// 2025-11-25's — or its error. A task the server cancelled is
// ErrTaskCancelled; one that asks for input (input_required) is
// cancelled and is an *InputRequiredError, since this client gives none.
// When ctx ends or deadline passes first, the task is cancelled
// (tasks/cancel) and the call fails with ctx's cause or ErrTimeout.
func (c *Client) followTask(ctx context.Context, task *Task, deadline time.Time, onStatus func(*Task)) (*CallToolResult, error) {
	modern := c.Era() == EraModern
	for {
		if onStatus != nil {
			onStatus(task)
		}
		switch {
		case task.Status == mcpproto.TaskInputRequired:
			c.cancelTask(ctx, task.ID)
			reqs := mcpproto.InputRequestMethods(task.Raw, 4)
			if len(reqs) == 0 {
				reqs = []string{"task " + strconv.Quote(task.ID) + " asked for input: " + strconv.Quote(task.StatusMessage)}
			}
			return nil, &InputRequiredError{Method: "tools/call", Requests: reqs}
		case task.Status == mcpproto.TaskCancelled:
			return nil, fmt.Errorf("%w: %s", ErrTaskCancelled, strconv.Quote(task.StatusMessage))
		case task.Terminal() && modern && task.Status == mcpproto.TaskFailed:
			rpc, err := task.TaskError()
			if err != nil {
				return nil, err
			}
			return nil, rpc
		case task.Terminal() && modern:
			if task.Result == nil {
				return nil, &mcpproto.ProtocolFault{What: "tasks/get", Path: "/result", Index: -1, Reason: "a completed task carries no result"}
			}
			return mcpproto.DecodeCallToolResult(task.Result)
		case task.Terminal():
			// 2025-11-25: tasks/result holds what the call returned.
			res, err := c.taskStep(ctx, "tasks/result", task.ID, deadline)
			if err != nil {
				return nil, err
			}
			return mcpproto.DecodeCallToolResultValue(res)
		}
		wait := defaultTaskPoll
		if task.PollInterval > 0 {
			wait = pollWait(task.PollInterval)
		}
		left := time.Until(deadline)
		if left <= 0 {
			c.cancelTask(ctx, task.ID)
			return nil, fmt.Errorf("%w: task %q still %s", ErrTimeout, task.ID, task.Status)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			c.cancelTask(ctx, task.ID)
			return nil, fmt.Errorf("mcpwire: tools/call: %w", context.Cause(ctx))
		case <-t.C:
		}
		get, err := c.taskStep(ctx, "tasks/get", task.ID, deadline)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrTimeout) {
				c.cancelTask(ctx, task.ID)
			}
			return nil, err
		}
		if task, err = mcpproto.DecodeTask(get.Bytes()); err != nil {
			return nil, err
		}
	}
}

// taskStep sends method (tasks/get or tasks/result) for task id, bounded
// by the call's deadline.
func (c *Client) taskStep(ctx context.Context, method, id string, deadline time.Time) (jsonlex.Value, error) {
	left := time.Until(deadline)
	if left <= 0 {
		return jsonlex.Value{}, fmt.Errorf("%w: %s", ErrTimeout, method)
	}
	raw, err := c.request(ctx, method, c.taskParams(id), Args{}, "", CallOptions{IdleTimeout: min(left, taskStepTimeout), MaxTimeout: left}, true)
	if err != nil {
		return raw, err
	}
	return raw, c.checkResult(method, raw)
}

// cancelTask asks the server to cancel task id, waiting a little for its
// answer even when ctx is already done: cancelling the call cancels the
// task, which goes on at the server otherwise.
func (c *Client) cancelTask(ctx context.Context, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelWait)
	defer cancel()
	_, _ = c.request(cctx, "tasks/cancel", c.taskParams(id), Args{}, "", CallOptions{IdleTimeout: taskCancelWait, MaxTimeout: taskCancelWait}, false)
}

// taskParams is {"taskId": id}, with the era's _meta.
func (c *Client) taskParams(id string) []byte {
	member := jsonlex.AppendQuoted([]byte(`"taskId":`), id)
	if c.Era() == EraModern {
		return c.metaParams(member)
	}
	return append(append([]byte{'{'}, member...), '}')
}

// pollWait is the wait a server's pollInterval (milliseconds) asks for,
// within [minTaskPoll, maxTaskPoll]: clamped before it becomes a
// Duration, which a server's 10^13 would overflow into a negative wait,
// the fastest poll.
func pollWait(ms int64) time.Duration {
	return max(time.Duration(min(ms, maxTaskPoll.Milliseconds()))*time.Millisecond, minTaskPoll)
}
