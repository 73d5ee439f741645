package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// inproc is a Serve run over io.Pipes, driven by the same raw peer.
type inproc struct {
	peer
	inW    *io.PipeWriter
	outR   *io.PipeReader
	stderr *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve returned err
	err    error
}

func startServe(t *testing.T, sc Scenario) *inproc {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &inproc{
		peer:   peer{t: t, w: inW, lines: lineReader(outR)},
		inW:    inW,
		outR:   outR,
		stderr: &syncbuf.Buffer{},
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(c.done)
		c.err = Serve(ctx, inR, outW, c.stderr, sc)
	}()
	return c
}

// result waits for Serve to return and drains what it wrote.
func (c *inproc) result() error {
	c.t.Helper()
	select {
	case <-c.done:
		for range c.lines {
		}
		return c.err
	case <-time.After(waitFor):
		c.t.Fatal("Serve did not return in time")
	}
	return nil
}

// stop ends the run however the test left it (EOF, then cancel) and
// waits for Serve; used deferred so nothing outlives a test.
func (c *inproc) stop() {
	c.inW.Close()
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(waitFor):
		c.t.Error("Serve did not return in time")
	}
	for range c.lines {
	}
}

// step sends one line and expects exactly these lines back, in order.
type step struct {
	send string
	want []string
}

const ping = `{"jsonrpc":"2.0","id":"p","method":"ping"}`
const pong = `{"jsonrpc":"2.0","id":"p","result":{}}`

func TestServeProtocol(t *testing.T) {
	parse := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	invalidNull := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`
	tests := []struct {
		name  string
		sc    Scenario
		steps []step
	}{{
		name: "a malformed line is answered -32700 and the loop survives",
		steps: []step{
			{`not json`, []string{parse}},
			{`{"jsonrpc":"2.0","id":1,"method":"ping"`, []string{parse}},
			{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, []string{parse}},
			{`{"jsonrpc":"2.0","id":1}`, []string{parse}},
			{`{"jsonrpc":"2.0","id":1,"method":7}`, []string{parse}},
			{`{}`, []string{parse}},
			{"\xff\xfe", []string{parse}},
			{ping, []string{pong}},
		},
	}, {
		name: "invalid requests",
		steps: []step{
			{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request"}}`}},
			{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, []string{invalidNull}},
			{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, []string{invalidNull}},
			{ping, []string{pong}},
		},
	}, {
		name: "notifications, blank lines and stray responses are absorbed",
		steps: []step{
			{`{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}`, nil},
			{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil},
			{"   \r", nil},
			{`{"jsonrpc":"2.0","id":99,"result":{}}`, nil},
			{ping + "\r", []string{pong}},
		},
	}, {
		name: "ids travel verbatim",
		steps: []step{
			{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, []string{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}`}},
			{`{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}`, []string{`{"jsonrpc":"2.0","id":-1.5e3,"result":{}}`}},
			{`{"jsonrpc":"2.0","id":"","method":"ping"}`, []string{`{"jsonrpc":"2.0","id":"","result":{}}`}},
		},
	}, {
		name: "unknown methods get -32601",
		steps: []step{
			{`{"jsonrpc":"2.0","id":"x","method":"resources/list"}`, []string{`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"Method not found: resources/list"}}`}},
		},
	}, {
		name: "initialize echoes a supported version, else answers the latest",
		sc:   Scenario{ServerName: "srv", Instructions: "use echo"},
		steps: []step{
			{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
				[]string{`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"srv","version":"0.1.0"},"instructions":"use echo"}}`}},
			{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2099-01-01"}}`,
				[]string{`{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"srv","version":"0.1.0"},"instructions":"use echo"}}`}},
		},
	}, {
		name: "tools/call protocol errors",
		steps: []step{
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`, []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: nope"}}`}},
			{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}`, []string{`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params: tools/call needs a string name"}}`}},
			{`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`, []string{`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params: tools/call needs a string name"}}`}},
			{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":5}}`, []string{`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Invalid params: tools/call needs a string name"}}`}},
		},
	}, {
		name: "tool failures are isError results",
		steps: []step{
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fail","arguments":{"message":"boom"}}}`, []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"boom"}],"isError":true}}`}},
			{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`, []string{`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"invalid arguments: text is required"}],"isError":true}}`}},
			{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":9223372036854775807,"b":1}}}`, []string{`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a + b overflows int64"}],"isError":true}}`}},
			{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{"ms":-1}}}`, []string{`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"invalid arguments: ms must be in [0, 60000]"}],"isError":true}}`}},
			{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"server_request","arguments":{"method":"ping","id_kind":"float"}}}`, []string{`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"invalid arguments: id_kind must be int or string"}],"isError":true}}`}},
		},
	}, {
		name: "add answers text and structuredContent",
		steps: []step{
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":-7,"b":12}}}`, []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"5"}],"structuredContent":{"sum":5}}}`}},
		},
	}, {
		name: "pagination with opaque cursors",
		sc:   Scenario{PageSize: 8},
		steps: []step{
			{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"p99"}}`, []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid cursor"}}`}},
			{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"again"}}`, []string{`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid cursor"}}`}},
			{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":7}}`, []string{`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}`}},
		},
	}, {
		name: "a request id already in flight is refused",
		steps: []step{
			{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hang"}}`, nil},
			{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, []string{`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: id already in flight"}}`}},
		},
	}, {
		name: "a cancelled call is not answered",
		steps: []step{
			{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`, nil},
			{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"test"}}`, nil},
			{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, nil},
			{ping, []string{pong}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c := startServe(t, tc.sc)
			defer c.stop()
			for _, st := range tc.steps {
				c.send(st.send)
				for _, want := range st.want {
					if got := string(c.rawLine()); got != want {
						t.Fatalf("after %q:\n got %s\nwant %s", st.send, got, want)
					}
				}
			}
			c.inW.Close()
			if err := c.result(); err != nil {
				t.Fatalf("Serve: %v", err)
			}
		})
	}
}

// The default listing is sorted by name and pages through with
// page_size; every page but the last carries a nextCursor.
func TestServeListing(t *testing.T) {
	defer leakcheck.Check(t)()
	want := []string{"add", "bad_utf8", "calls", "cancellations", "content", "crash", "deep_result", "duplicate_id", "echo", "fail", "gate", "hang", "kill", "long_line",
		"meta", "nan_result", "noise", "notify", "print_env", "progress", "relist", "result_and_error", "rpc_error", "running", "server_request", "slow", "stderr", "string_id", "unknown_id"}
	for _, size := range []int{0, 1, 8, 20, 100} {
		c := startServe(t, Scenario{PageSize: size})
		var names []string
		pages := 0
		cursor := ""
		for {
			params := `{}`
			if cursor != "" {
				params = `{"cursor":"` + cursor + `"}`
			}
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + params + `}`)
			var page struct {
				Tools []struct {
					Name        string
					InputSchema map[string]any
				}
				NextCursor *string
			}
			if err := json.Unmarshal(c.recvID("1").Result, &page); err != nil {
				t.Fatal(err)
			}
			pages++
			for _, tl := range page.Tools {
				if tl.InputSchema["type"] != "object" {
					t.Errorf("%s: inputSchema %v is not an object schema", tl.Name, tl.InputSchema)
				}
				names = append(names, tl.Name)
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		wantPages := 1
		if size > 0 {
			wantPages = (len(want) + size - 1) / size
		}
		if !slices.Equal(names, want) || pages != wantPages {
			t.Errorf("page size %d: %d pages of %v, want %d pages of %v", size, pages, names, wantPages, want)
		}
		c.inW.Close()
		if err := c.result(); err != nil {
			t.Fatal(err)
		}
	}
	if len(catalogue) != len(want) {
		t.Fatalf("catalogue has %d tools, the listing test knows %d", len(catalogue), len(want))
	}
}

// relist switches tools/list to the second listing and only then sends
// notifications/tools/list_changed; without a second listing it is a
// tool failure and the listing stays.
func TestServeRelist(t *testing.T) {
	defer leakcheck.Check(t)()
	first := []json.RawMessage{json.RawMessage(`{"name":"relist","inputSchema":{"type":"object"}}`)}
	second := []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`)}
	list := func(c *inproc) string {
		c.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
		return string(c.recvID(`"l"`).Result)
	}
	c := startServe(t, Scenario{Tools: first, Relisted: second})
	defer c.stop()
	if got := list(c); got != `{"tools":[{"name":"relist","inputSchema":{"type":"object"}}]}` {
		t.Fatalf("first listing %s", got)
	}
	c.call(1, "relist", "")
	if m := c.recv(); m.Method != "notifications/tools/list_changed" || m.ID != nil {
		t.Fatalf("after relist: %+v, want the list_changed notification", m)
	}
	c.expectText("1", "ok", false)
	if got := list(c); got != `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}` {
		t.Fatalf("second listing %s", got)
	}

	d := startServe(t, Scenario{})
	defer d.stop()
	d.call(1, "relist", "")
	d.expectText("1", "the scenario has no relisted listing", true)
}

// A slow call answers after a faster one sent behind it, at exactly its
// delay: Serve runs in a synctest bubble, so slow sleeps on the fake
// clock and the order cannot depend on the machine's speed.
func TestServeSlowAfterFast(t *testing.T) {
	defer leakcheck.Check(t)()
	synctest.Test(t, func(t *testing.T) {
		c := startServe(t, Scenario{})
		defer c.stop()
		c.handshake("2025-11-25")
		start := time.Now()
		c.call(1, "slow", `{"ms":1500,"text":"late"}`)
		c.call(2, "echo", `{"text":"early"}`)
		c.expectText("2", "early", false)
		if took := time.Since(start); took != 0 {
			t.Errorf("echo answered after %v, want at once", took)
		}
		c.expectText("1", "late", false)
		if took := time.Since(start); took != 1500*time.Millisecond {
			t.Errorf("slow answered after %v, want 1.5s", took)
		}
	})
}

// How Serve ends, for every in-process ending.
func TestServeEnds(t *testing.T) {
	tests := []struct {
		name    string
		sc      Scenario
		run     func(c *inproc)
		wantErr error // nil: Serve returns nil
	}{{
		name: "EOF abandons hang and returns nil",
		run: func(c *inproc) {
			c.call(1, "hang", "")
			c.send(ping)
			c.recvID(`"p"`)
			c.inW.Close()
			c.expectEOF()
		},
	}, {
		name: "EOF lets a running call finish",
		run: func(c *inproc) {
			c.call(1, "slow", `{"ms":100,"text":"finished"}`)
			c.inW.Close()
			c.expectText("1", "finished", false)
			c.expectEOF()
		},
	}, {
		name: "cancelling ctx stops a hung call",
		run: func(c *inproc) {
			c.call(1, "hang", "")
			c.send(ping)
			c.recvID(`"p"`)
			c.cancel()
			c.expectEOF()
		},
		wantErr: context.Canceled,
	}, {
		name: "ignore_stdin_eof keeps serving until ctx is done",
		sc:   Scenario{IgnoreStdinEOF: true},
		run: func(c *inproc) {
			c.call(1, "slow", `{"ms":200,"text":"after EOF"}`)
			c.inW.Close()
			c.expectText("1", "after EOF", false)
			select {
			case <-c.done:
				c.t.Fatalf("Serve returned %v after EOF", c.err)
			case <-time.After(100 * time.Millisecond):
			}
			c.cancel()
		},
		wantErr: context.Canceled,
	}, {
		name: "exit before the handshake",
		sc:   Scenario{ExitBeforeHandshake: true},
		run: func(c *inproc) {
			c.expectEOF()
		},
		wantErr: ErrExited,
	}, {
		name: "crash ends Serve with no answer",
		run: func(c *inproc) {
			c.call(1, "crash", "")
			c.expectEOF()
		},
		wantErr: ErrExited,
	}, {
		name: "kill ends Serve with no answer",
		run: func(c *inproc) {
			c.call(1, "kill", "")
			c.expectEOF()
		},
		wantErr: ErrExited,
	}, {
		name:    "ignore_sigterm needs a process",
		sc:      Scenario{IgnoreSIGTERM: true},
		run:     func(c *inproc) { c.expectEOF() },
		wantErr: ErrProcessOnly,
	}, {
		name:    "grandchild needs a process",
		sc:      Scenario{Grandchild: true},
		run:     func(c *inproc) { c.expectEOF() },
		wantErr: ErrProcessOnly,
	}, {
		name: "a client that stops reading kills the server",
		run: func(c *inproc) {
			c.outR.Close()
			c.call(1, "echo", `{"text":"into the void"}`)
		},
		wantErr: io.ErrClosedPipe,
	}, {
		name: "server_request without an answer is abandoned at EOF",
		run: func(c *inproc) {
			c.call(1, "server_request", `{"method":"roots/list"}`)
			if m := c.recv(); m.Method != "roots/list" {
				c.t.Fatalf("want roots/list, got %s", m.raw)
			}
			c.inW.Close()
			c.expectEOF()
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c := startServe(t, tc.sc)
			defer c.stop()
			tc.run(c)
			err := c.result()
			if (tc.wantErr == nil) != (err == nil) || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Serve returned %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// readLine cases, with a tiny limit so the too-long path is cheap.
var readLineTests = []struct {
	name  string
	input string
	want  []string // "!" marks errLineTooLong
}{
	{"lines", "a\nbb\n\nccc\n", []string{"a", "bb", "", "ccc"}},
	{"CRLF", "a\r\nb\r\n", []string{"a", "b"}},
	{"final line without newline", "a\nlast", []string{"a", "last"}},
	{"exactly the limit", "12345678\n", []string{"12345678"}},
	{"too long, then recovery", "123456789\nok\n", []string{"!", "ok"}},
	{"too long at EOF", "ok\n1234567890123456789", []string{"ok", "!"}},
	{"far too long across buffer fills", strings.Repeat("x", 100) + "\nafter\n", []string{"!", "after"}},
	{"empty input", "", nil},
}

func TestReadLine(t *testing.T) {
	for _, tc := range readLineTests {
		t.Run(tc.name, func(t *testing.T) {
			if got := readAllLines(tc.input, 8); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// readAllLines runs readLine over input with limit max through the
// smallest bufio.Reader, so long lines cross many buffer fills.
func readAllLines(input string, max int) []string {
	br := bufio.NewReaderSize(strings.NewReader(input), 16)
	var buf []byte
	var got []string
	for {
		l, err := readLine(br, &buf, max)
		switch {
		case errors.Is(err, errLineTooLong):
			got = append(got, "!")
		case err != nil:
			return got
		default:
			got = append(got, string(l))
		}
	}
}

// FuzzReadLine compares readLine with a naive split: every line within the
// limit comes back intact, every longer one as errLineTooLong.
func FuzzReadLine(f *testing.F) {
	for _, tc := range readLineTests {
		f.Add(tc.input)
	}
	f.Fuzz(func(t *testing.T, input string) {
		got := readAllLines(input, 8)
		raw := []string{}
		if input != "" {
			raw = strings.Split(strings.TrimSuffix(input, "\n"), "\n")
		}
		if len(got) != len(raw) {
			t.Fatalf("got %d lines %q for %d raw lines %q", len(got), got, len(raw), raw)
		}
		for i, r := range raw {
			switch {
			case len(r) > 8:
				if got[i] != "!" {
					t.Fatalf("line %d %q (%d bytes) not refused: %q", i, r, len(r), got[i])
				}
			case got[i] != strings.TrimSuffix(r, "\r"):
				t.Fatalf("line %d: got %q, want %q", i, got[i], r)
			}
		}
	})
}

// classifyTests are seeds for FuzzClassify and its unit test.
var classifyTests = []struct {
	line string
	want frameKind
}{
	{`not json`, kindMalformed},
	{`[]`, kindMalformed},
	{`{}`, kindMalformed},
	{`{"jsonrpc":"2.0","id":1}`, kindMalformed},
	{`{"jsonrpc":"2.0","id":1,"method":""}`, kindMalformed},
	{`{"jsonrpc":"2.0","id":1,"method":"x"}`, kindRequest},
	{`{"jsonrpc":"2.0","id":"a","method":"x"}`, kindRequest},
	{`{"jsonrpc":"2.0","method":"x"}`, kindNotification},
	{`{"jsonrpc":"2.0","id":null,"method":"x"}`, kindNotification},
	{`{"jsonrpc":"2.0","id":1,"result":{}}`, kindResponse},
	{`{"jsonrpc":"2.0","id":"s","error":{"code":1,"message":"m"}}`, kindResponse},
	{`{"jsonrpc":"2.0","id":[1],"method":"x"}`, kindInvalid},
	{`{"jsonrpc":"2.0","id":false,"result":{}}`, kindInvalid},
	{`{"jsonrpc":"1.0","id":1,"method":"x"}`, kindInvalid},
}

func TestClassify(t *testing.T) {
	for _, tc := range classifyTests {
		if _, got := classify([]byte(tc.line)); got != tc.want {
			t.Errorf("classify(%s) = %d, want %d", tc.line, got, tc.want)
		}
	}
}

// FuzzClassify checks classify is total and its kinds keep their promises.
func FuzzClassify(f *testing.F) {
	for _, tc := range classifyTests {
		f.Add(tc.line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		frame, kind := classify([]byte(line))
		if !json.Valid([]byte(line)) && kind != kindMalformed {
			t.Fatalf("invalid JSON classified %d", kind)
		}
		switch kind {
		case kindRequest:
			if frame.Method == "" || frame.JSONRPC != "2.0" || !validID(frame.ID) {
				t.Fatalf("request %+v", frame)
			}
		case kindResponse:
			if frame.Method != "" || !validID(frame.ID) || (frame.Result == nil && frame.Error == nil) {
				t.Fatalf("response %+v", frame)
			}
		case kindNotification:
			if frame.Method == "" || (len(frame.ID) > 0 && string(frame.ID) != "null") {
				t.Fatalf("notification %+v", frame)
			}
		case kindInvalid:
			if frame.ID != nil && !validID(frame.ID) {
				t.Fatalf("invalid request keeps an unusable id %s", frame.ID)
			}
		}
	})
}

func TestParseScenario(t *testing.T) {
	tests := []struct {
		in      string
		want    Scenario
		wantErr string
	}{
		{`{}`, Scenario{}, ""},
		{`{"page_size":3,"repeat_cursor":true,"tools":[1,{"name":"x"}]}`,
			Scenario{PageSize: 3, RepeatCursor: true, Tools: []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`{"name":"x"}`)}}, ""},
		{`{"ignore_sigterm":true,"notify_on_initialized":["notifications/message"]}`,
			Scenario{IgnoreSIGTERM: true, NotifyOnInitialized: []string{"notifications/message"}}, ""},
		{`{"ignore_sigterms":true}`, Scenario{}, `unknown field "ignore_sigterms"`},
		{`{} {}`, Scenario{}, "trailing data"},
		{`{"page_size":"3"}`, Scenario{}, "cannot unmarshal"},
		{``, Scenario{}, "EOF"},
	}
	for _, tc := range tests {
		got, err := ParseScenario([]byte(tc.in))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "mcptest: ")):
			t.Errorf("ParseScenario(%s): error %v, want one containing %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("ParseScenario(%s): %v", tc.in, err)
		case tc.wantErr == "":
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(tc.want)
			if !bytes.Equal(a, b) {
				t.Errorf("ParseScenario(%s) = %s, want %s", tc.in, a, b)
			}
		}
	}
}

// Command round-trips the scenario through the environment and keeps the
// child from running the suite should MaybeServe be missing.
func TestCommand(t *testing.T) {
	sc := Scenario{ServerName: "n", PageSize: 2, Tools: []json.RawMessage{json.RawMessage(`{"name":"a"}`)}}
	argv, env := Command(sc)
	if !slices.Contains(argv, "-test.run=^$") || len(env) != 2 || !strings.HasPrefix(env[1], "GORACE=") {
		t.Fatalf("argv %q env %q", argv, env)
	}
	raw, ok := strings.CutPrefix(env[0], ScenarioEnv+"=")
	if !ok {
		t.Fatalf("env %q lacks %s", env, ScenarioEnv)
	}
	got, err := ParseScenario([]byte(raw))
	if err != nil || got.ServerName != "n" || got.PageSize != 2 || string(got.Tools[0]) != `{"name":"a"}` {
		t.Fatalf("round trip gave %+v, %v", got, err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Command accepted a scenario larger than one environment string")
		}
	}()
	Command(Scenario{Instructions: strings.Repeat("i", maxEnvString)})
}
