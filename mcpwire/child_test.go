package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	rawecho.MaybeServe()
	leakcheck.Main(m)
}

// testCommand is the child-process spec for an mcptest scenario. Every
// shutdown wait is waitFor: each ends as soon as the server exits (or its
// pipes drain), so a generous bound costs nothing when things work, and
// a loaded machine can never make a well-behaved server look like one
// that needed the next rung of the ladder. TestChildShutdown shortens the
// rungs it wants the server to fall through.
func testCommand(sc mcptest.Scenario) Command {
	argv, env := mcptest.Command(sc)
	return Command{
		Argv: argv, Env: env, Inherit: []string{"PATH", "HOME", "TMPDIR", "GOCOVERDIR"},
		StdinGrace: waitFor, TermGrace: waitFor, KillGrace: waitFor, ExitDrain: waitFor,
	}
}

func startTest(t *testing.T, sc mcptest.Scenario, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := Start(ctx, testCommand(sc), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return c
}

func closeClean(t *testing.T, c *Client) {
	t.Helper()
	ex, err := c.Close()
	if err != nil || ex.How != ExitedOnEOF || ex.Code != 0 {
		t.Errorf("close: %+v, %v; want a clean exit after stdin closed", ex, err)
	}
}

// waitFor bounds every wait on a real server in these tests. It is a
// backstop, not an expectation: each wait ends on an event (a line, an
// exit), and a loaded machine with the race detector is slow.
const waitFor = time.Minute

// writeWatch is a Conn that closes seen once a write to the server's
// stdin carries mark, so a test can wait for a request to be on the wire
// instead of sleeping and hoping it is.
type writeWatch struct {
	Conn
	mark []byte
	once sync.Once
	seen chan struct{}
}

func (w *writeWatch) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if n == len(p) && bytes.Contains(p, w.mark) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// startWatched is startTest over a writeWatch for the request that calls
// tool; the returned channel closes when that request has been written.
func startWatched(t *testing.T, sc mcptest.Scenario, cfg Config, tool string) (*Client, <-chan struct{}) {
	t.Helper()
	conn, err := spawn(testCommand(sc))
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	w := &writeWatch{Conn: conn, mark: []byte(`"name":"` + tool + `"`), seen: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := Connect(ctx, w, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return c, w.seen
}

func callT(t *testing.T, c *Client, name, args string, opt CallOptions) (*CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	return c.CallTool(ctx, name, JSONArgs([]byte(args)), opt)
}

func texts(r *CallToolResult) string {
	var s []string
	for _, b := range r.Content {
		s = append(s, b.Type+":"+b.Text)
	}
	return strings.Join(s, ",")
}

// TestChildTools drives every well-behaved and misbehaving tool of the
// test server that leaves the connection alive, with its exact outcome.
func TestChildTools(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startTest(t, mcptest.Scenario{}, Config{})
	defer closeClean(t, c)
	if v := c.Initialize().ProtocolVersion; v != requestedVersion {
		t.Errorf("negotiated %q", v)
	}
	tools, err := c.ListTools(context.Background())
	if err != nil || len(tools) < 19 {
		t.Fatalf("tools: %d, %v", len(tools), err)
	}
	for _, tt := range []struct {
		tool, args string
		texts      string
		isError    bool
		structured string
		rpcCode    int64
		stray      int64
	}{
		{tool: "echo", args: `{"text":"hi"}`, texts: "text:hi"},
		{tool: "echo", args: "{\n\"text\": \"multi\\nline\"\n}", texts: "text:multi\nline"},
		{tool: "add", args: `{"a":2,"b":3}`, texts: "text:5", structured: `{"sum":5}`},
		{tool: "fail", args: `{"message":"boom"}`, isError: true},
		{tool: "content", texts: "text:a text block,image:,audio:,resource_link:,resource:,resource:", structured: `{"kinds":["text","image","audio","resource_link","resource","resource"]}`},
		{tool: "nope", rpcCode: -32602},
		{tool: "noise", args: `{"lines":3}`, texts: "text:printed 3 noise lines", stray: 3},
		{tool: "unknown_id", texts: "text:"},
		{tool: "duplicate_id", texts: "text:duplicate"},
		{tool: "string_id", texts: "text:right"},
		{tool: "stderr", args: `{"bytes":100000}`, texts: "text:wrote 100000 bytes to stderr"},
		{tool: "long_line", args: `{"bytes":100000}`},
		{tool: "progress", args: `{"steps":3,"interval_ms":5}`, texts: "text:done"},
		{tool: "notify", args: `{"method":"notifications/message"}`, texts: "text:ok"},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			before, _ := c.Stray()
			r, err := callT(t, c, tt.tool, tt.args, CallOptions{})
			if tt.rpcCode != 0 {
				if !errors.Is(err, &RPCError{Code: tt.rpcCode}) {
					t.Fatalf("err = %v, want RPC error %d", err, tt.rpcCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.texts != "" && tt.tool != "unknown_id" && texts(r) != tt.texts {
				t.Errorf("content = %q, want %q", texts(r), tt.texts)
			}
			if r.IsError != tt.isError || string(r.StructuredContent) != tt.structured {
				t.Errorf("isError %v structured %s", r.IsError, r.StructuredContent)
			}
			if tt.tool == "long_line" && (len(r.Content) != 1 || len(r.Content[0].Text) < 100000-200) {
				t.Errorf("long line text is %d bytes", len(r.Content[0].Text))
			}
			if after, _ := c.Stray(); after-before != tt.stray {
				t.Errorf("stray lines counted: %d, want %d", after-before, tt.stray)
			}
		})
	}
	// A broken envelope fails the one call it names; the connection lives.
	if _, err := callT(t, c, "result_and_error", "", CallOptions{}); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), `both "result" and "error"`) {
		t.Errorf("result_and_error: %v", err)
	}
	for _, m := range []struct{ method, kind, want string }{
		{"sampling/createMessage", "int", `"error":{"code":-32601,"message":"Method not found"}`},
		{"roots/list", "string", `"error":{"code":-32601,"message":"Method not found"}`},
		{"elicitation/create", "int", `"error":{"code":-32601,"message":"Method not found"}`},
		{"ping", "string", `"result":{}`},
	} {
		r, err := callT(t, c, "server_request", `{"method":"`+m.method+`","id_kind":"`+m.kind+`"}`, CallOptions{})
		if err != nil || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, m.want) {
			t.Errorf("server_request %s: %+v, %v; want the client's response to contain %s", m.method, r, err, m.want)
		}
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
	// Unsolicited tools/list_changed reaches the owner.
	if _, err := callT(t, c, "notify", `{"method":"notifications/tools/list_changed"}`, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.ToolsChanged():
	case <-time.After(waitFor):
		t.Error("tools/list_changed not surfaced")
	}
}

// TestChildTimeouts: a call to a real server that never answers ends by
// its idle bound or by the caller's context, and the server survives
// both. Only the outcome is checked, never how long it took: a loaded
// machine may take longer to notice. The exact instants, and progress
// extending the idle deadline but never past the maximum, are pinned on
// the bubble's fake clock by the TestMemory* tests.
func TestChildTimeouts(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startTest(t, mcptest.Scenario{}, Config{})
	defer closeClean(t, c)

	if _, err := callT(t, c, "hang", "", CallOptions{IdleTimeout: 200 * time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Errorf("hang: %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := c.CallTool(ctx, "hang", JSONArgs(nil), CallOptions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang with ctx: %v", err)
	}
	if r, err := callT(t, c, "echo", `{"text":"alive"}`, CallOptions{}); err != nil || texts(r) != "text:alive" {
		t.Errorf("server not alive after timeouts: %v %v", r, err)
	}
}

// TestChildConcurrent: many calls in flight at once, each answered with
// its own text.
func TestChildConcurrent(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startTest(t, mcptest.Scenario{}, Config{})
	defer closeClean(t, c)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			want := "n" + strconv.Itoa(i)
			tool, args := "echo", `{"text":"`+want+`"}`
			if i%8 == 0 {
				tool, args = "slow", `{"ms":50,"text":"`+want+`"}`
			}
			r, err := callT(t, c, tool, args, CallOptions{})
			if err == nil && texts(r) != "text:"+want {
				err = errors.New("got " + texts(r) + " want " + want)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestChildDeath: every way the connection dies settles the call in
// flight at once with the reason and the stderr tail, later calls fail
// fast, and shutdown reports the evidence.
func TestChildDeath(t *testing.T) {
	for _, tt := range []struct {
		name, tool, args string
		sc               mcptest.Scenario
		cfg              Config
		reason           error  // errors.Is target
		reasonText       string // in the error text
		stderr           string // in the stderr tail
		how              ExitHow
	}{
		{name: "crash", tool: "crash", reason: ErrExited, reasonText: "exit status 1", stderr: "crashing in the middle of call", how: ExitedBefore},
		{name: "kill", tool: "kill", reason: ErrExited, reasonText: "signal: killed", stderr: "killing myself", how: ExitedBefore},
		{name: "noise bound", tool: "noise", args: `{"lines":20}`, cfg: Config{MaxStrayLines: 10}, reason: ErrNoise, how: ExitedOnEOF},
		{name: "ignores sigterm", tool: "crash", sc: mcptest.Scenario{IgnoreSIGTERM: true}, reason: ErrExited, how: ExitedBefore},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c, hangSent := startWatched(t, tt.sc, tt.cfg, "hang")
			// A hanging call in flight must be settled by the death too.
			hung := make(chan error, 1)
			go func() { _, err := callT(t, c, "hang", "", CallOptions{}); hung <- err }()
			select {
			case <-hangSent:
			case <-time.After(waitFor):
				t.Fatal("the hang request was never written")
			}
			_, err := callT(t, c, tt.tool, tt.args, CallOptions{})
			var de *DeadError
			if !errors.As(err, &de) || !errors.Is(err, tt.reason) || !strings.Contains(err.Error(), tt.reasonText) {
				t.Fatalf("err = %v, want death by %v (%q)", err, tt.reason, tt.reasonText)
			}
			if !strings.Contains(string(de.Stderr), tt.stderr) {
				t.Errorf("stderr tail %q lacks %q", de.Stderr, tt.stderr)
			}
			select {
			case herr := <-hung:
				if !errors.Is(herr, ErrDead) {
					t.Errorf("in-flight call: %v", herr)
				}
			case <-time.After(waitFor):
				t.Fatal("in-flight call not settled by death")
			}
			if _, err := callT(t, c, "echo", `{"text":"x"}`, CallOptions{}); !errors.Is(err, ErrDead) || !errors.Is(err, tt.reason) {
				t.Errorf("call after death: %v", err)
			}
			ex, err := c.Close()
			if err != nil || ex.How != tt.how {
				t.Errorf("exit %+v %v, want %v", ex, err, tt.how)
			}
		})
	}
}

func TestChildStartFailures(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx := context.Background()
	_, err := Start(ctx, testCommand(mcptest.Scenario{ExitBeforeHandshake: true}), Config{})
	var de *DeadError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(string(de.Stderr), "exiting before the handshake") {
		t.Errorf("exit before handshake: %v", err)
	}
	_, err = Start(ctx, testCommand(mcptest.Scenario{ProtocolVersion: "2099-01-01"}), Config{})
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Offered != "2099-01-01" || ve.Requested != requestedVersion {
		t.Errorf("bad version: %v", err)
	}
	_, err = Start(ctx, Command{Argv: []string{"/nonexistent/server"}}, Config{})
	if err == nil {
		t.Error("spawning a missing binary succeeded")
	}
	_, err = Start(ctx, Command{Argv: []string{"no-such-server-anywhere"}, Inherit: []string{"PATH"}}, Config{})
	if err == nil || !strings.Contains(err.Error(), "not found in the server's PATH") {
		t.Errorf("missing from PATH: %v", err)
	}
}

func TestChildScenarios(t *testing.T) {
	for _, v := range supportedVersions {
		t.Run("version "+v, func(t *testing.T) {
			defer leakcheck.Check(t)()
			c := startTest(t, mcptest.Scenario{ProtocolVersion: v}, Config{})
			defer closeClean(t, c)
			if c.Initialize().ProtocolVersion != v {
				t.Errorf("negotiated %q", c.Initialize().ProtocolVersion)
			}
			if r, err := callT(t, c, "echo", `{"text":"v"}`, CallOptions{}); err != nil || texts(r) != "text:v" {
				t.Errorf("echo: %v %v", r, err)
			}
		})
	}
	t.Run("pagination", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c := startTest(t, mcptest.Scenario{PageSize: 2}, Config{})
		defer closeClean(t, c)
		tools, err := c.ListTools(context.Background())
		if err != nil || len(tools) < 19 {
			t.Fatalf("%d tools, %v", len(tools), err)
		}
	})
	t.Run("repeated cursor", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c := startTest(t, mcptest.Scenario{PageSize: 1, RepeatCursor: true}, Config{})
		defer closeClean(t, c)
		if _, err := c.ListTools(context.Background()); !errors.Is(err, ErrTooManyPages) || !strings.Contains(err.Error(), "repeated") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("page bound", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c := startTest(t, mcptest.Scenario{PageSize: 1}, Config{MaxPages: 3})
		defer closeClean(t, c)
		if _, err := c.ListTools(context.Background()); !errors.Is(err, ErrTooManyPages) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("lying tool", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c := startTest(t, mcptest.Scenario{Tools: []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`), json.RawMessage(`{"name":"x"}`)}}, Config{})
		defer closeClean(t, c)
		var pf *ProtocolFault
		if _, err := c.ListTools(context.Background()); !errors.As(err, &pf) || pf.Index != 1 || pf.Path != "/tools/1/inputSchema" {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("noise and stderr flood before handshake", func(t *testing.T) {
		defer leakcheck.Check(t)()
		c := startTest(t, mcptest.Scenario{NoiseBeforeHandshake: 5, StderrFlood: 1 << 20, NotifyOnInitialized: []string{"notifications/tools/list_changed"}}, Config{})
		defer closeClean(t, c)
		if n, _ := c.Stray(); n != 5 {
			t.Errorf("stray = %d", n)
		}
		select {
		case <-c.ToolsChanged():
		case <-time.After(waitFor):
			t.Error("list_changed after initialized not surfaced")
		}
	})
}

// TestChildShutdown: each rung of the shutdown ladder, with evidence,
// and a grandchild holding stdout does not outlive it. A rung the server
// is meant to fall through is cut short (its server ignores what that
// rung sends, so no machine is too slow for it); the rung it is meant to
// stop at waits up to waitFor, which it never needs.
func TestChildShutdown(t *testing.T) {
	const skip = 300 * time.Millisecond
	for _, tt := range []struct {
		name          string
		sc            mcptest.Scenario
		stdinG, termG time.Duration
		how           ExitHow
		code          int
	}{
		{name: "stdin eof", stdinG: waitFor, termG: waitFor, how: ExitedOnEOF, code: 0},
		{name: "sigterm", sc: mcptest.Scenario{IgnoreStdinEOF: true}, stdinG: skip, termG: waitFor, how: ExitedOnSIGTERM, code: -1},
		{name: "sigkill", sc: mcptest.Scenario{IgnoreStdinEOF: true, IgnoreSIGTERM: true}, stdinG: skip, termG: skip, how: ExitedOnSIGKILL, code: -1},
		{name: "grandchild", sc: mcptest.Scenario{Grandchild: true}, stdinG: waitFor, termG: waitFor, how: ExitedOnEOF, code: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			cmd := testCommand(tt.sc)
			cmd.StdinGrace, cmd.TermGrace = tt.stdinG, tt.termG
			c, err := Start(context.Background(), cmd, Config{})
			if err != nil {
				t.Fatal(err)
			}
			ex, err := c.Close()
			if err != nil || ex.How != tt.how || ex.Code != tt.code {
				t.Errorf("exit %+v, %v; want %v code %d", ex, err, tt.how, tt.code)
			}
			// The grandchild would hold stdout for GrandchildLife; shutdown
			// must not wait for it. The bound is the grandchild's own
			// lifetime, so only a shutdown that waited for it fails.
			if ex.Took >= mcptest.GrandchildLife {
				t.Errorf("shutdown took %v, as long as the grandchild lives", ex.Took)
			}
			if kids := leakcheck.Children(); len(kids) > 0 {
				t.Errorf("left behind: %v", kids)
			}
			if _, err := callT(t, c, "echo", `{}`, CallOptions{}); !errors.Is(err, ErrClosed) {
				t.Errorf("call after close: %v", err)
			}
		})
	}
}

// The status view's facts: the server's pid is our child and the leader
// of its own process group, and its recent stderr is readable while it
// lives.
func TestChildPidAndStderrTail(t *testing.T) {
	defer leakcheck.Check(t)()
	c := startTest(t, mcptest.Scenario{}, Config{})
	pid := c.Pid()
	if pid <= 0 {
		t.Fatalf("Pid() = %d", pid)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("pgid of %d = %d, %v; want its own group", pid, pgid, err)
	}
	if _, err := callT(t, c, "stderr", `{"bytes":100}`, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	// The tail is filled by the stderr drainer, which nothing signals;
	// poll it, bounded.
	deadline := time.Now().Add(waitFor)
	for !strings.Contains(string(c.StderrTail()), "mcptest stderr flood") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr tail %q lacks the bytes the server wrote", c.StderrTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	closeClean(t, c)
	conn, _ := newMemory(time.Second, 0)
	if p := (&streamCarrier{conn: conn}).pid(); p != 0 {
		t.Errorf("an in-memory transport reports pid %d, want 0", p)
	}
	if _, err := conn.Shutdown(); err != nil {
		t.Error(err)
	}
}

// A server that closes its stdin and exits before reading a byte (a
// wrapper that cannot find its package, say) fails the start with its
// exit status and what it printed, whichever the client meets first: the
// broken pipe of its write or the end of stdout.
func TestChildGoneBeforeFirstWrite(t *testing.T) {
	defer leakcheck.Check(t)()
	cmd := Command{
		Argv:       []string{"/bin/sh", "-c", `exec 0<&-; echo "npm error 404 Not Found - the package does not exist" >&2; exit 3`},
		StdinGrace: waitFor, TermGrace: waitFor, KillGrace: waitFor, ExitDrain: waitFor,
	}
	for range 20 {
		_, err := Start(context.Background(), cmd, Config{})
		var de *DeadError
		if !errors.As(err, &de) || !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
			t.Fatalf("err = %v, want the server's exit status", err)
		}
		if !strings.Contains(string(de.Stderr), "the package does not exist") {
			t.Fatalf("stderr tail %q lacks what the server printed (err %v)", de.Stderr, err)
		}
	}
}
