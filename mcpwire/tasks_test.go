package mcpwire

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A 2026-07-28 server that answers tools/call with a task (the tasks
// extension, which the client declares on tools/call) is followed to the
// task's end: the result inline, the JSON-RPC error of a failed task, the
// server's own cancellation, and input the client cannot give.
func TestModernTasks(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, tc := range []struct {
		end   string
		check func(*CallToolResult, error) bool
	}{
		{"", func(r *CallToolResult, err error) bool { return err == nil && texts(r) == "text:via a task" }},
		{"failed", func(_ *CallToolResult, err error) bool {
			var rpc *RPCError
			return errors.As(err, &rpc) && rpc.Code == -32000 && rpc.Message == "the task failed"
		}},
		{"cancelled", func(_ *CallToolResult, err error) bool { return errors.Is(err, ErrTaskCancelled) }},
		{"input_required", func(_ *CallToolResult, err error) bool {
			var ir *InputRequiredError
			return errors.As(err, &ir) && len(ir.Requests) == 1 && ir.Requests[0] == "confirm (elicitation/create)"
		}},
	} {
		t.Run("end="+tc.end, func(t *testing.T) {
			c := startTest(t, mcptest.Scenario{Era: mcptest.EraModernOnly, TaskPolls: 2, TaskEnd: tc.end}, Config{})
			defer closeClean(t, c)
			var states []string
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			r, err := c.CallToolTask(ctx, "echo", JSONArgs([]byte(`{"text":"via a task"}`)), CallOptions{}, func(task *Task) { states = append(states, task.Status) })
			if !tc.check(r, err) {
				t.Fatalf("result %+v, error %v", r, err)
			}
			// Created working, polled working twice, then the end.
			if len(states) != 4 || states[0] != "working" || states[2] != "working" {
				t.Errorf("states %q", states)
			}
			// CallTool follows a task just the same.
			if tc.end == "" {
				if r, err := callT(t, c, "echo", `{"text":"via a task"}`, CallOptions{}); err != nil || texts(r) != "text:via a task" {
					t.Errorf("CallTool: %+v, %v", r, err)
				}
			}
		})
	}
}

// A task whose caller gives up is cancelled at the server (tasks/cancel),
// and one that outlives the call's maximum is too, as a timeout.
func TestModernTaskCancel(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startTest(t, mcptest.Scenario{Era: mcptest.EraModernOnly, TaskPolls: 1 << 30}, Config{})
	defer closeClean(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.CallToolTask(ctx, "echo", JSONArgs([]byte(`{"text":"x"}`)), CallOptions{}, func(task *Task) {
			select {
			case polled <- struct{}{}:
			default:
			}
		})
		done <- err
	}()
	select {
	case <-polled:
	case <-time.After(waitFor):
		t.Fatal("no task state reported")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the cancelled call did not return")
	}
	// The server saw tasks/cancel: the task reports cancelled now.
	get, err := c.taskStep(context.Background(), "tasks/get", "task-1", time.Now().Add(waitFor))
	if err != nil || !strings.Contains(string(get.Bytes()), `"status":"cancelled"`) {
		t.Errorf("the task after the call gave up: %s, %v", get.Bytes(), err)
	}
	_, err = c.CallToolTask(context.Background(), "echo", JSONArgs([]byte(`{"text":"x"}`)), CallOptions{MaxTimeout: 200 * time.Millisecond}, nil)
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("a task past the call's maximum: %v", err)
	}
}

// A server's pollInterval is held within the poll bounds whatever its
// size: one so large that it would overflow a Duration is the slowest
// poll, not the fastest.
func TestPollWait(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{1, minTaskPoll},
		{int64(minTaskPoll/time.Millisecond) + 1, minTaskPoll + time.Millisecond},
		{int64(maxTaskPoll / time.Millisecond), maxTaskPoll},
		{1e13, maxTaskPoll},
		{math.MaxInt64 / 2, maxTaskPoll},
	} {
		if got := pollWait(tc.ms); got != tc.want {
			t.Errorf("pollWait(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}
