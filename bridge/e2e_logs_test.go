package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/auditlog"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// logLines is a log sink safe for concurrent writers that reads back as
// decoded JSON lines.
type logLines struct{ syncbuf.Buffer }

type logLine struct {
	Message    string `json:"message"`
	Of         string `json:"of"`
	Suppressed int64  `json:"suppressed"`
	Event      string `json:"event"`
	Tool       string `json:"tool"`
}

func (l *logLines) lines(t *testing.T) []logLine {
	t.Helper()
	var out []logLine
	for line := range strings.Lines(l.String()) {
		var ll logLine
		if err := json.Unmarshal([]byte(line), &ll); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, ll)
	}
	return out
}

func (l *logLines) size() int {
	return l.Len()
}

// count returns how many lines of msg were logged, and how many the
// summaries say were suppressed.
func count(lines []logLine, msg string) (logged, suppressed int64) {
	for _, l := range lines {
		switch {
		case l.Message == msg:
			logged++
		case l.Of == msg && l.Suppressed > 0:
			suppressed += l.Suppressed
		}
	}
	return logged, suppressed
}

// Across the bridge, with a real server: a 2 MiB stderr flood at boot,
// server→client requests refused and notifications, each logged within
// its rate, every line accounted for (logged or counted), and the audit
// trail one line per call, never limited.
func TestLogsCannotBeInflated(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink logLines
	start := time.Now()
	const flood = 2 << 20
	tb := startBridgeLog(t, zerolog.New(&sink), nil, mcptestServer("t", mcptest.Scenario{StderrFlood: flood}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	ctx := denialCtx(t)
	const calls = 300
	for range calls {
		if _, err := c.Call(ctx, "t", "server_request", map[string]any{"method": "sampling/createMessage"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(ctx, "t", "notify", map[string]any{"method": "notifications/message"}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	tb.shutdown()
	elapsed := time.Since(start)

	lines := sink.lines(t)
	within := func(rate auditlog.Rate) int64 {
		return int64(rate.Burst) + int64(elapsed/rate.Every) + 1
	}
	floodLines := int64(flood / len("mcptest stderr flood: the client must drain stderr while it waits on stdout\n"))
	for _, tc := range []struct {
		msg       string
		rate      auditlog.Rate
		atLeast   int64 // lines the server caused
		exactly   bool
		whatCause string
	}{
		{"mcpwire: server stderr", auditlog.RateOf("mcpwire: server stderr"), floodLines, false, "stderr lines"},
		{"mcpwire: server request refused (-32601)", auditlog.DefaultRate, calls, true, "refused requests"},
		{"mcpwire: server log message", auditlog.DefaultRate, calls, true, "notifications"},
	} {
		logged, held := count(lines, tc.msg)
		if logged > within(tc.rate) {
			t.Errorf("%s: %d lines logged in %v, more than the rate allows (%d)", tc.whatCause, logged, elapsed, within(tc.rate))
		}
		if logged+held < tc.atLeast || (tc.exactly && logged+held != tc.atLeast) {
			t.Errorf("%s: %d logged + %d counted as suppressed, want %d accounted for", tc.whatCause, logged, held, tc.atLeast)
		}
	}
	audited := 0
	for _, l := range lines {
		if l.Event == "call" {
			audited++
		}
	}
	if audited != 2*calls {
		t.Errorf("%d audit lines for %d calls; the audit trail must have one per call", audited, 2*calls)
	}
	t.Logf("%d bytes of log for a %d-byte stderr flood and %d calls in %v", sink.size(), flood, 2*calls, elapsed)
}

// Connections refused at the socket's limit are logged within the rate,
// and every refusal is accounted for once the bridge has shut down. The
// control socket refuses at accept, one warning each, once its
// connections are all taken, answering busy: its client learns why,
// rather than finding the connection reset.
func TestRefusedConnectionsRateLimited(t *testing.T) {
	defer leakcheck.Check(t)()
	var sink logLines
	start := time.Now()
	tb := startBridgeLog(t, zerolog.New(&sink), nil, mcptestServer("t", mcptest.Scenario{}))
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxControlConns {
		nc, err := net.Dial("unix", tb.ControlSocket())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, nc)
	}
	const tries = 100
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl, err := control.Dial(ctx, tb.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Status(ctx); !errors.Is(err, &control.Error{Code: control.CodeBusy}) || !strings.Contains(err.Error(), "control connections open") {
		t.Fatalf("a request over the limit: %v, want busy", err)
	}
	ctl.Close()
	for range tries - 1 {
		nc, err := net.Dial("unix", tb.ControlSocket())
		if err != nil {
			t.Fatal(err)
		}
		// Refused: answered busy, then closed by the bridge.
		_ = nc.SetReadDeadline(time.Now().Add(backstop))
		fr := capwire.NewFrameReader(nc, control.MaxFrame)
		if _, err := fr.ReadFrame(nil); err != nil {
			t.Fatalf("a connection over the limit: %v, want its refusal", err)
		}
		if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("a connection over the limit: read %v after the refusal, want EOF", err)
		}
		nc.Close()
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	tb.shutdown()
	elapsed := time.Since(start)
	var logged, suppressed int64
	for _, l := range sink.lines(t) {
		switch {
		case strings.HasPrefix(l.Message, "refusing a control connection"):
			logged++
		case strings.HasPrefix(l.Of, "refusing a control connection"):
			suppressed += l.Suppressed
		}
	}
	if limit := int64(auditlog.DefaultRate.Burst) + int64(elapsed/auditlog.DefaultRate.Every) + 1; logged > limit || logged+suppressed != tries {
		t.Errorf("%d refusals: %d logged (at most %d in %v), %d counted as suppressed", tries, logged, limit, elapsed, suppressed)
	}
}
