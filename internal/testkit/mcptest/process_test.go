package mcptest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// Each misbehaviour, exercised once against a real child process by the
// raw client of client_test.go. Every case states how
// the child must end: exit status code, or death by signal sig.
func TestProcessMisbehaviours(t *testing.T) {
	tests := []struct {
		name string
		sc   Scenario
		run  func(t *testing.T, c *child)
		code int
		sig  syscall.Signal
	}{{
		name: "well-behaved echo, exit 0 on stdin EOF",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "echo", `{"text":"héllo\n"}`)
			c.expectText("1", "héllo\n", false)
			c.closeStdin()
			c.expectEOF()
		},
	}, {
		name: "exit before the handshake",
		sc:   Scenario{ExitBeforeHandshake: true},
		run: func(t *testing.T, c *child) {
			c.expectEOF()
			c.stderrHas("exiting before the handshake")
		},
		code: 3,
	}, {
		name: "unsupported protocol version",
		sc:   Scenario{ProtocolVersion: "1999-01-01"},
		run: func(t *testing.T, c *child) {
			var r struct{ ProtocolVersion string }
			if err := json.Unmarshal(c.handshake("2025-11-25"), &r); err != nil || r.ProtocolVersion != "1999-01-01" {
				t.Fatalf("protocolVersion %q (%v), want the scenario's", r.ProtocolVersion, err)
			}
			c.closeStdin()
		},
	}, {
		name: "noise before the handshake",
		sc:   Scenario{NoiseBeforeHandshake: 3},
		run: func(t *testing.T, c *child) {
			for i := range 3 {
				if l := c.rawLine(); json.Valid(l) || !strings.Contains(string(l), fmt.Sprint("noise line ", i)) {
					t.Fatalf("line %d: want non-JSON noise, got %q", i, l)
				}
			}
			c.handshake("2025-11-25")
			c.closeStdin()
		},
	}, {
		name: "stderr flood without reading stdin",
		sc:   Scenario{StderrFlood: 32 << 20},
		run: func(t *testing.T, c *child) {
			// Nothing is written to stdin until the whole flood has been
			// drained: the server must not need stdin to finish it.
			c.stderr.waitBytes(t, 32<<20)
			c.handshake("2025-11-25")
			c.closeStdin()
			c.expectEOF()
			if n, _ := c.stderr.snapshot(); n != 32<<20 {
				t.Fatalf("stderr carried %d bytes, want exactly %d", n, 32<<20)
			}
		},
	}, {
		name: "hang: one call never answered, others are",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "hang", "")
			c.call(2, "echo", `{"text":"after hang"}`)
			c.expectText("2", "after hang", false)
			c.closeStdin()
			c.expectEOF() // the hung call is abandoned, never answered
		},
	}, {
		// Which answer comes first is a race against the clock here;
		// TestServeSlowAfterFast pins the order on a fake clock, and the
		// hang case above shows a pending call holds up no other.
		name: "slow and a faster call both answer",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "slow", `{"ms":300,"text":"late"}`)
			c.call(2, "echo", `{"text":"early"}`)
			got := map[string]string{}
			for range 2 {
				m := c.recv()
				text, isErr := m.text(t)
				if isErr {
					t.Fatalf("response %s is an error: %s", m.ID, text)
				}
				got[string(m.ID)] = text
			}
			if got["1"] != "late" || got["2"] != "early" {
				t.Fatalf("answers by id: %v, want 1: late, 2: early", got)
			}
			c.closeStdin()
		},
	}, {
		name: "crash mid-call exits 1",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "crash", "")
			c.expectEOF()
			c.stderrHas("crashing in the middle of call 1")
		},
		code: 1,
	}, {
		name: "kill mid-call dies of SIGKILL",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "kill", "")
			c.expectEOF()
			c.stderrHas("SIGKILL in the middle of call 1")
		},
		sig: syscall.SIGKILL,
	}, {
		name: "noise lines mid-session",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "noise", `{"lines":2}`)
			for range 2 {
				if l := c.rawLine(); json.Valid(l) {
					t.Fatalf("want a non-JSON line, got %q", l)
				}
			}
			c.expectText("1", "printed 2 noise lines", false)
			c.closeStdin()
		},
	}, {
		name: "one line longer than 16 MiB",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "long_line", `{"bytes":17000000}`)
			// Checked by shape, not decoded: decoding 17 MB under the race
			// detector costs seconds and proves nothing more.
			l := c.rawLine()
			head, tail := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`, `"}]}}`
			pad, ok := strings.CutPrefix(string(l), head)
			pad, ok2 := strings.CutSuffix(pad, tail)
			if !ok || !ok2 || len(pad) != 17000000 || strings.Trim(pad, "x") != "" {
				t.Fatalf("want a text result of 17000000 x, got %d bytes starting %.100q", len(l), l)
			}
			c.closeStdin()
		},
	}, {
		name: "invalid UTF-8 inside a JSON string",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "bad_utf8", "")
			l := c.rawLine()
			if utf8.Valid(l) || !strings.HasPrefix(string(l), `{"jsonrpc":"2.0","id":1,"result":`) {
				t.Fatalf("want a response to 1 with invalid UTF-8, got %q", l)
			}
			c.closeStdin()
		},
	}, {
		name: "stderr during a call",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "stderr", `{"bytes":3000000}`)
			c.expectText("1", "wrote 3000000 bytes to stderr", false)
			c.closeStdin()
			c.expectEOF()
			c.exited()
			<-c.stderr.done
			if n, _ := c.stderr.snapshot(); n != 3000000 {
				t.Fatalf("stderr carried %d bytes, want 3000000", n)
			}
		},
	}, {
		name: "server to client requests",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			for i, tc := range []struct{ method, idKind, idPrefix, params string }{
				{"sampling/createMessage", "int", "", `"maxTokens"`},
				{"roots/list", "string", `"mcptest-`, ""},
				{"elicitation/create", "int", "", `"requestedSchema"`},
				{"ping", "string", `"mcptest-`, ""},
			} {
				c.call(i+1, "server_request", fmt.Sprintf(`{"method":%q,"id_kind":%q}`, tc.method, tc.idKind))
				req := c.recv()
				isString := strings.HasPrefix(string(req.ID), `"`)
				paramsOK := req.Params == nil
				if tc.params != "" {
					paramsOK = strings.Contains(string(req.Params), tc.params)
				}
				if req.Method != tc.method || isString != (tc.idKind == "string") || !strings.HasPrefix(string(req.ID), tc.idPrefix) || !paramsOK {
					t.Fatalf("%s: got request %s", tc.method, req.raw)
				}
				reply := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.ID)
				if tc.method == "ping" {
					reply = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
				}
				c.send(reply)
				c.expectText(fmt.Sprint(i+1), reply, false)
			}
			c.closeStdin()
		},
	}, {
		name: "notifications",
		sc:   Scenario{NotifyOnInitialized: []string{"notifications/tools/list_changed"}},
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			if m := c.recv(); m.Method != "notifications/tools/list_changed" || m.ID != nil {
				t.Fatalf("want list_changed after initialized, got %s", m.raw)
			}
			for i, method := range []string{"notifications/progress", "notifications/message", "notifications/tools/list_changed"} {
				c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"notify","arguments":{"method":%q},"_meta":{"progressToken":"tok"}}}`, i+1, method))
				n := c.recv()
				if n.Method != method || n.ID != nil {
					t.Fatalf("want notification %s, got %s", method, n.raw)
				}
				if method == "notifications/progress" && !strings.Contains(string(n.Params), `"progressToken":"tok"`) {
					t.Fatalf("progress without the call's token: %s", n.raw)
				}
				c.expectText(fmt.Sprint(i+1), "ok", false)
			}
			c.closeStdin()
		},
	}, {
		name: "progress for the call's token",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"interval_ms":1},"_meta":{"progressToken":7}}}`)
			for i := 1; i <= 3; i++ {
				n := c.recv()
				var p struct {
					ProgressToken json.RawMessage
					Progress      int
					Total         int
				}
				if err := json.Unmarshal(n.Params, &p); err != nil || n.Method != "notifications/progress" ||
					string(p.ProgressToken) != "7" || p.Progress != i || p.Total != 3 {
					t.Fatalf("step %d: got %s", i, n.raw)
				}
			}
			c.expectText("1", "done", false)
			c.closeStdin()
		},
	}, {
		name: "unknown, duplicate, string ids and result with error",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "unknown_id", "")
			if m := c.recv(); !strings.HasPrefix(string(m.ID), "-") {
				t.Fatalf("want a response to a negative id, got %s", m.raw)
			}
			c.expectText("1", "ok", false)

			c.call(2, "duplicate_id", "")
			c.expectText("2", "duplicate", false)
			c.expectText("2", "duplicate", false)

			c.call(3, "result_and_error", "")
			if m := c.recvID("3"); m.Result == nil || m.Error == nil {
				t.Fatalf("want both result and error, got %s", m.raw)
			}

			c.call(4, "string_id", "")
			c.expectText(`"4"`, "wrong", false)
			c.expectText("4", "right", false)
			c.closeStdin()
		},
	}, {
		name: "paginate forever with a repeated cursor",
		sc:   Scenario{PageSize: 2, RepeatCursor: true},
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			for i := 2; i < 6; i++ {
				var page struct {
					Tools      []struct{ Name string }
					NextCursor string
				}
				if err := json.Unmarshal(c.recvID(fmt.Sprint(i-1)).Result, &page); err != nil ||
					page.NextCursor != "again" || len(page.Tools) != 2 || page.Tools[0].Name != "add" {
					t.Fatalf("page %d: %+v (%v)", i-1, page, err)
				}
				c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"cursor":"again"}}`, i))
			}
			c.recvID("5")
			c.closeStdin()
		},
	}, {
		name: "hostile listing, calls still dispatch",
		sc: Scenario{Tools: []json.RawMessage{
			json.RawMessage(`"not an object"`), json.RawMessage(`{"inputSchema":{"type":"object"}}`),
			json.RawMessage(`{"name":"echo"}`), json.RawMessage(`null`),
		}},
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			want := `{"tools":["not an object",{"inputSchema":{"type":"object"}},{"name":"echo"},null]}`
			if m := c.recvID("1"); string(m.Result) != want {
				t.Fatalf("listing %s, want %s", m.Result, want)
			}
			c.call(2, "echo", `{"text":"still here"}`)
			c.expectText("2", "still here", false)
			c.closeStdin()
		},
	}, {
		name: "every content block kind",
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.call(1, "content", "")
			var r struct {
				Content []struct {
					Type     string
					Resource map[string]any
				}
				StructuredContent struct{ Kinds []string }
			}
			if err := json.Unmarshal(c.recvID("1").Result, &r); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, b := range r.Content {
				kinds = append(kinds, b.Type)
			}
			got := strings.Join(kinds, ",")
			if want := "text,image,audio,resource_link,resource,resource"; got != want || strings.Join(r.StructuredContent.Kinds, ",") != want {
				t.Fatalf("kinds %s / %v, want %s", got, r.StructuredContent.Kinds, want)
			}
			if r.Content[4].Resource["text"] == nil || r.Content[5].Resource["blob"] == nil {
				t.Fatalf("want one text and one blob embedded resource, got %+v", r.Content[4:])
			}
			c.closeStdin()
		},
	}, {
		name: "ignore stdin EOF until SIGTERM",
		sc:   Scenario{IgnoreStdinEOF: true},
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25")
			c.closeStdin()
			c.stderrHas("ignoring it")
			// A server that exited on EOF anyway would end with status 0,
			// not by the SIGTERM below; the window only catches that
			// sooner, and a slow machine can only make it miss, never
			// fail a server that lingers as it should.
			if !c.alive(300 * time.Millisecond) {
				t.Fatal("exited on stdin EOF")
			}
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		},
		sig: syscall.SIGTERM,
	}, {
		name: "ignore SIGTERM until SIGKILL",
		sc:   Scenario{IgnoreSIGTERM: true, IgnoreStdinEOF: true},
		run: func(t *testing.T, c *child) {
			c.handshake("2025-11-25") // by now signal.Ignore has run
			c.closeStdin()
			c.stderrHas("ignoring it")
			// The kernel drops a signal whose disposition is SIG_IGN when
			// it is sent, so once the mask says so, the SIGTERM below
			// cannot kill it however late it is scheduled, and the
			// SIGKILL is what it dies of.
			if !ignores(t, c.cmd.Process.Pid, syscall.SIGTERM) {
				t.Fatal("SIGTERM is not ignored")
			}
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
		sig: syscall.SIGKILL,
	}, {
		name: "grandchild holds stdout after the server exits",
		sc:   Scenario{Grandchild: true},
		run: func(t *testing.T, c *child) {
			gpid := c.grandchildPid()
			c.handshake("2025-11-25")
			c.closeStdin()
			expectStatus(t, c.exited(), 0, 0)
			// The grandchild's stdout is our stdout pipe, so that pipe
			// cannot end while it lives: no waiting for an EOF that must
			// not come.
			if got, want := fdTarget(t, fmt.Sprintf("/proc/%d/fd/1", gpid)), fdTarget(t, fmt.Sprintf("/proc/self/fd/%d", c.stdout.Fd())); got != want {
				t.Fatalf("the grandchild's stdout is %s, want our stdout pipe %s", got, want)
			}
			select {
			case l, ok := <-c.lines:
				t.Fatalf("stdout ended or spoke (%q, %v) while the grandchild holds it", l, ok)
			default:
			}
			// The client's group kill reaches the grandchild: stdout ends.
			if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			c.expectEOF()
			waitGone(t, gpid)
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c := startChild(t, tc.sc)
			defer c.reap()
			tc.run(t, c)
			expectStatus(t, c.exited(), tc.code, tc.sig)
		})
	}
}

// ignores reports whether pid's signal disposition for sig is SIG_IGN,
// from the SigIgn mask in /proc/pid/status.
func ignores(t *testing.T, pid int, sig syscall.Signal) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatalf("SigIgn %q: %v", hex, err)
			}
			return mask&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatalf("no SigIgn line in /proc/%d/status", pid)
	return false
}

// fdTarget is what a /proc fd link points at ("pipe:[1234]").
func fdTarget(t *testing.T, link string) string {
	t.Helper()
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// waitGone waits until pid no longer runs (gone, or a zombie awaiting a
// reaper that is not us).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still runs: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
