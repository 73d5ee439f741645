package mcptest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// The cancellations tool reports every notifications/cancelled in arrival
// order, naming the call each one stopped ("" for an id not in flight),
// logs each on stderr, and remembers at most MaxCancellations.
func TestCancellationsTool(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startServe(t, Scenario{})
	defer c.stop()
	cancel := func(id, params string) {
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + params + `}}`)
	}

	c.call(1, "cancellations", "")
	if got, want := string(c.rawLine()), `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""}],"structuredContent":{"cancelled":[]}}}`; got != want {
		t.Fatalf("fresh server:\n got %s\nwant %s", got, want)
	}

	c.call(3, "slow", `{"ms":60000}`)
	cancel("3", `,"reason":"timed out"`)
	cancel(`"a"`, ``) // no such call: recorded without a tool
	c.call(4, "cancellations", "")
	want := `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"3 \"slow\" \"timed out\"\n\"a\" \"\" \"\"\n"}],` +
		`"structuredContent":{"cancelled":[{"request_id":"3","tool":"slow","reason":"timed out"},{"request_id":"\"a\"","tool":"","reason":""}]}}}`
	if got := string(c.rawLine()); got != want {
		t.Fatalf("after two cancellations:\n got %s\nwant %s", got, want)
	}

	// The oldest are forgotten beyond the bound.
	const extra = 5
	for i := range MaxCancellations + extra {
		cancel(strconv.Itoa(100+i), ``)
	}
	c.call(5, "cancellations", "")
	var r struct {
		StructuredContent struct{ Cancelled []Cancellation }
	}
	if err := json.Unmarshal(c.recvID("5").Result, &r); err != nil {
		t.Fatal(err)
	}
	got := r.StructuredContent.Cancelled
	// 2 + MaxCancellations + extra were received; the first 2 + extra went.
	if len(got) != MaxCancellations || got[0].RequestID != strconv.Itoa(100+extra) || got[len(got)-1].RequestID != strconv.Itoa(100+MaxCancellations+extra-1) {
		t.Fatalf("kept %d cancellations, %+v … %+v", len(got), got[0], got[len(got)-1])
	}

	c.inW.Close()
	if err := c.result(); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`mcptest: notifications/cancelled for request 3 (tool "slow"): "timed out"`,
		`mcptest: notifications/cancelled for request "a" (tool ""): ""`,
	} {
		if !strings.Contains(c.stderr.String(), line+"\n") {
			t.Errorf("stderr lacks %q", line)
		}
	}
}

// The running tool lists the calls read and not yet answered, by request
// id, without itself. A call is registered by the read loop before the
// next line is read, so calls sent before running are always listed.
func TestRunningTool(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startServe(t, Scenario{})
	defer c.stop()

	c.call(1, "running", "")
	if got, want := string(c.rawLine()), `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""}],"structuredContent":{"running":[]}}}`; got != want {
		t.Fatalf("idle server:\n got %s\nwant %s", got, want)
	}
	c.call(3, "hang", "")
	c.call(2, "hang", "")
	c.call(4, "running", "")
	want := `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"2 \"hang\"\n3 \"hang\"\n"}],` +
		`"structuredContent":{"running":[{"request_id":"2","tool":"hang"},{"request_id":"3","tool":"hang"}]}}}`
	if got := string(c.rawLine()); got != want {
		t.Fatalf("two calls running:\n got %s\nwant %s", got, want)
	}
	c.inW.Close()
	if err := c.result(); err != nil {
		t.Fatal(err)
	}
}
