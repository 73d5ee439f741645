package bridge

import (
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// TestBadResponseLineIsOneDenial: a server's unusable response line (not
// UTF-8, NaN, nested past the bound, longer than the line cap) is a
// result_malformed denial naming what was wrong for the one call it
// answered; the server is neither dead nor restarted, and the next call
// is answered.
func TestBadResponseLineIsOneDenial(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, func(c *config.Config) { c.Bridge.MaxFrame = 256 << 10 }, mcptestServer("t", mcptest.Scenario{}))
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	pid := tb.srv("t").status().PID
	for _, tt := range []struct {
		tool   string
		args   map[string]any
		reason string
	}{
		{tool: "bad_utf8", reason: "invalid UTF-8"},
		{tool: "nan_result", reason: "invalid character 'N'"},
		{tool: "deep_result", args: map[string]any{"depth": 600}, reason: "nesting"},
		{tool: "long_line", args: map[string]any{"bytes": 1 << 20}, reason: "is longer than 262144"},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			_, err := c.Call(denialCtx(t), "t", tt.tool, tt.args)
			d := wantDenial(t, err, capwire.CodeResultMalformed, "")
			if !strings.Contains(d.Message, `server "t" sent a malformed result`) || !strings.Contains(d.Message, tt.reason) {
				t.Errorf("message %q: want the server and %q", d.Message, tt.reason)
			}
			r, err := c.Call(denialCtx(t), "t", "echo", map[string]any{"text": "after"})
			if err != nil || r.Text() != "after" {
				t.Fatalf("call after the bad line: %v, %v", r, err)
			}
			if st := tb.srv("t").status(); st.State != string(StateReady) || st.Restarts != 0 || st.PID != pid {
				t.Fatalf("server is %s, pid %d after %d restarts; want ready, pid %d, never restarted", st.State, st.PID, st.Restarts, pid)
			}
		})
	}
	tb.shutdown()
}
