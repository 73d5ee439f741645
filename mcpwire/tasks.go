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

// CallToolTask calls tool name as a task and waits for its result, as
// CallTool waits for a plain call's. A server that answers with the
// result itself (it ignored the task) is served as CallTool serves it. A
// task that asks for input (status input_required) is cancelled and is
// an *InputRequiredError, since this client gives none. opt.MaxTimeout
// (else Config.CallMaxTimeout) bounds the whole; each poll that finds
// the task working is the task's progress. onStatus, when not nil, is
// told each state the task reports.
func (c *Client) CallToolTask(ctx context.Context, name string, args Args, opt CallOptions, onStatus func(*Task)) (*CallToolResult, error) {
	hard := opt.MaxTimeout
	if hard <= 0 {
		hard = c.cfg.CallMaxTimeout
	}
	deadline := time.Now().Add(hard)
	opt.task = strconv.AppendInt([]byte(`{"ttl":`), hard.Milliseconds(), 10)
	opt.task = append(opt.task, '}')
	raw, err := c.request(ctx, "tools/call", nil, args, name, opt, true)
	if err != nil {
		return nil, err
	}
	if err := c.checkResult("tools/call", raw); err != nil {
		return nil, err
	}
	task, isTask, err := mcpproto.DecodeCreateTaskResult(raw.Bytes())
	if err != nil {
		return nil, err
	}
	if !isTask {
		return mcpproto.DecodeCallToolResultValue(raw)
	}
	for {
		if onStatus != nil {
			onStatus(task)
		}
		switch {
		case task.Status == mcpproto.TaskInputRequired:
			c.cancelTask(ctx, task.ID)
			return nil, &InputRequiredError{Method: "tools/call", Requests: []string{"task " + strconv.Quote(task.ID) + " asked for input: " + strconv.Quote(task.StatusMessage)}}
		case task.Status == mcpproto.TaskCancelled:
			return nil, fmt.Errorf("%w: %s", ErrTaskCancelled, strconv.Quote(task.StatusMessage))
		case task.Terminal():
			// completed or failed: tasks/result holds what the call returned.
			res, err := c.taskStep(ctx, "tasks/result", task.ID, deadline)
			if err != nil {
				return nil, err
			}
			return mcpproto.DecodeCallToolResultValue(res)
		}
		wait := defaultTaskPoll
		if task.PollInterval > 0 {
			wait = min(max(time.Duration(task.PollInterval)*time.Millisecond, minTaskPoll), maxTaskPoll)
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
