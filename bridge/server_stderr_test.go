package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/redact"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// chattyServer is an mcptest server behind a shell that first prints
// about 7 KiB of filler and then its secret to stderr, as a server that
// logs its configuration would, with the secret in its env.
func chattyServer(name, secret string) config.Server {
	s := mcptestServer(name, mcptest.Scenario{})
	s.Args = append([]string{"-c", `i=0
while [ $i -lt 100 ]; do echo "filler line $i: nothing to see here, only bytes to push the tail past 2 KiB" >&2; i=$((i+1)); done
echo "starting with API_KEY=$API_KEY (short=$SHORT)" >&2
exec "$0" "$@"`, s.Command}, s.Args...)
	s.Command = "/bin/sh"
	s.Env["API_KEY"] = secret
	s.Env["SHORT"] = "abc" // under minRedacted: left alone
	// Dead stays dead, so what status and callers see after the death
	// is the death's, not a restart's.
	return neverRestart(s)
}

// A dead server's stderr reaches the operator (status) and, by default,
// not its callers, whose denial names the server and the reason. With
// stderr_to_caller, callers get one copy of its end, at most 2 KiB, with
// the values of its env redacted.
func TestStderrReachesCallersOnlyWhenConfigured(t *testing.T) {
	defer leakcheck.Check(t)()
	const secret = "sk-live-0123456789abcdef"
	quiet, loud := chattyServer("quiet", secret), chattyServer("loud", secret)
	loud.StderrToCaller = true
	tb := startBridge(t, nil, quiet, loud)
	c := tb.dial(tb.grant(map[string][]string{"quiet": nil, "loud": nil}))
	ctx := denialCtx(t)
	const lastWords = "mcptest: crashing in the middle of call"

	for _, name := range []string{"quiet", "loud"} {
		// The call that meets the death, then one refused after it.
		for _, tool := range []string{"crash", "echo"} {
			args := map[string]any{"text": "x"}
			if tool == "crash" {
				args = nil // crash takes no arguments, and its schema says so
			}
			_, err := c.Call(ctx, name, tool, args)
			var d *capwire.Denied
			if !errors.As(err, &d) || d.Code != capwire.CodeServerUnavailable {
				t.Fatalf("%s %s: %v, want server_unavailable", name, tool, err)
			}
			msg := d.Message
			if strings.Contains(msg, secret) || strings.Contains(msg, secret[:8]) || !strings.Contains(msg, `server "`+name+`"`) {
				t.Errorf("%s %s: message %q leaks the secret or does not name the server", name, tool, msg)
			}
			if name == "quiet" {
				if strings.Contains(msg, "filler") || strings.Contains(msg, lastWords) || !strings.Contains(msg, "its stderr is in capbridge's status and logs") {
					t.Errorf("quiet %s: message %q; want no stderr, and where to find it", tool, msg)
				}
				continue
			}
			_, tail, ok := strings.Cut(msg, "; stderr tail: ")
			switch {
			case !ok || strings.Count(msg, lastWords) != 1:
				t.Errorf("loud %s: message %q; want the stderr tail once", tool, msg)
			case len(tail) > redact.MaxTail:
				t.Errorf("loud %s: the tail is %d bytes, more than %d", tool, len(tail), redact.MaxTail)
			case !strings.Contains(tail, "API_KEY=[redacted:API_KEY] (short=abc)"):
				t.Errorf("loud %s: tail %q lacks the redacted line", tool, tail)
			case !strings.HasPrefix(tail, "…"):
				t.Errorf("loud %s: tail %q is not marked as cut", tool, tail)
			}
		}
	}

	// The operator sees everything, unredacted: the env is theirs.
	cc := tb.control()
	st, err := cc.Status(ctx)
	cc.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Servers {
		if State(s.State) != StateDead || !strings.Contains(s.StderrTail, "API_KEY="+secret) || !strings.Contains(s.StderrTail, lastWords) ||
			strings.Contains(s.Reason, "filler") {
			t.Errorf("status of %s: state %s, reason %q, stderr_tail %d bytes with the secret %v; want dead, the tail in stderr_tail only",
				s.Name, s.State, s.Reason, len(s.StderrTail), strings.Contains(s.StderrTail, secret))
		}
	}
	c.Close()
	tb.shutdown()
}

// A server that fails to boot: its facade is refused on the control
// plane without its stderr, and its status keeps it.
func TestFailedBootReasonHasNoStderr(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, neverRestart(mcptestServer("broken", mcptest.Scenario{ExitBeforeHandshake: true})))
	ctx := denialCtx(t)
	cc := tb.control()
	_, err := cc.Facade(ctx, &control.FacadeRequest{Server: "broken"})
	if err == nil || strings.Contains(err.Error(), "exiting before the handshake") || !strings.Contains(err.Error(), `server "broken" is failed`) {
		t.Errorf("facade of a failed server: %v; want unavailable, with the reason and without the stderr", err)
	}
	st, err := cc.Status(ctx)
	if err != nil || len(st.Servers) != 1 || !strings.Contains(st.Servers[0].StderrTail, "exiting before the handshake") || strings.Contains(st.Servers[0].Reason, "exiting before") {
		t.Errorf("status: %+v, %v; want the stderr in stderr_tail and not in the reason", st, err)
	}
	cc.Close()
	tb.shutdown()
}
