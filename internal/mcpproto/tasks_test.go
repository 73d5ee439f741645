package mcpproto

import (
	"errors"
	"testing"
)

func TestDecodeTasks(t *testing.T) {
	task, ok, err := DecodeCreateTaskResult([]byte(`{"task":{"taskId":"t1","status":"working","statusMessage":"m","ttl":60000,"pollInterval":250,"createdAt":"x"}}`))
	if err != nil || !ok || task.ID != "t1" || task.Status != TaskWorking || task.StatusMessage != "m" || task.TTL != 60000 || task.PollInterval != 250 || task.Terminal() {
		t.Errorf("create: %+v %v %v", task, ok, err)
	}
	if _, ok, err := DecodeCreateTaskResult([]byte(`{"content":[]}`)); ok || err != nil {
		t.Errorf("a plain result read as a task: %v %v", ok, err)
	}
	if task, err := DecodeTask([]byte(`{"taskId":"t1","status":"completed","ttl":null}`)); err != nil || !task.Terminal() {
		t.Errorf("get: %+v %v", task, err)
	}
	// The 2026-07-28 form: ttlMs, pollIntervalMs, the result or error inline.
	task, err = DecodeTask([]byte(`{"resultType":"complete","taskId":"t2","status":"completed","ttlMs":5,"pollIntervalMs":7,"result":{"content":[]}}`))
	if err != nil || task.TTL != 5 || task.PollInterval != 7 || string(task.Result) != `{"content":[]}` {
		t.Errorf("modern get: %+v %v", task, err)
	}
	task, err = DecodeTask([]byte(`{"taskId":"t3","status":"failed","error":{"code":-32000,"message":"no"}}`))
	if rpc, rerr := task.TaskError(); err != nil || rerr != nil || rpc.Code != -32000 || rpc.Message != "no" {
		t.Errorf("failed task: %+v %v %v", task, err, rerr)
	}
	var pf *ProtocolFault
	for _, raw := range []string{
		`{"taskId":"t3","status":"failed","error":{"code":"x"}}`,
		`{"taskId":"t3","status":"failed"}`, // no error at all: a fault, not a panic
		`{"resultType":"task","taskId":"t","status":"failed"}`,
	} {
		task, err := DecodeTask([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if _, rerr := task.TaskError(); !errors.As(rerr, &pf) || pf.Path != "/error" {
			t.Errorf("%s: a bad task error: %v", raw, rerr)
		}
	}
	for _, tc := range []struct{ raw, path string }{
		{`{"task":3}`, "/task"},
		{`{"task":{"status":"working"}}`, "/task/taskId"},
		{`{"task":{"taskId":"t","status":""}}`, "/task/status"},
		{`{"task":{"taskId":"t","status":"working","pollInterval":-1}}`, "/task/pollInterval"},
		{`{"task":{"taskId":"t","status":"working","ttl":"1"}}`, "/task/ttl"},
	} {
		var pf *ProtocolFault
		if _, _, err := DecodeCreateTaskResult([]byte(tc.raw)); !errors.As(err, &pf) || pf.Path != tc.path {
			t.Errorf("%s: %v, want a fault at %s", tc.raw, err, tc.path)
		}
	}
}

func TestDecodeResources(t *testing.T) {
	r, err := DecodeReadResourceResult([]byte(`{"contents":[{"uri":"a:","mimeType":"text/plain","text":"hi"},{"uri":"b:","blob":"AA=="}]}`))
	if err != nil || len(r.Contents) != 2 || r.Contents[0].Text != "hi" || !r.Contents[0].HasText || r.Contents[1].Blob != "AA==" || !r.Contents[1].HasBlob {
		t.Errorf("read: %+v %v", r, err)
	}
	for _, tc := range []struct{ raw, path string }{
		{`{}`, "/contents"},
		{`{"contents":[{"text":"x"}]}`, "/contents/0/uri"},
		{`{"contents":[{"uri":"a:"}]}`, "/contents/0"},
		{`{"contents":[{"uri":"a:","text":1}]}`, "/contents/0/text"},
	} {
		var pf *ProtocolFault
		if _, err := DecodeReadResourceResult([]byte(tc.raw)); !errors.As(err, &pf) || pf.Path != tc.path {
			t.Errorf("%s: %v, want a fault at %s", tc.raw, err, tc.path)
		}
	}
	p, err := DecodeListPage("resources/list", "resources", "uri", []byte(`{"resources":[{"uri":"a:","name":"a","size":3}],"nextCursor":"c"}`))
	if err != nil || len(p.Items) != 1 || !p.HasNext || p.NextCursor != "c" {
		t.Errorf("page: %+v %v", p, err)
	}
	var pf *ProtocolFault
	if _, err := DecodeListPage("resources/list", "resources", "uri", []byte(`{"resources":[{"uri":"a:"}]}`)); !errors.As(err, &pf) || pf.Path != "/resources/0/name" {
		t.Errorf("an entry without a name: %v", err)
	}
}
