package bridge

import (
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A tools.allow or tools.deny entry that names no tool boots with a
// warning, and fails the server's boot when it is strict, naming the entry.
func TestUnmatchedToolEntries(t *testing.T) {
	lax := mcptestServer("lax", mcptest.Scenario{})
	lax.ToolsDeny = []string{"no_such_tool"}
	strict := neverRestart(mcptestServer("strict", mcptest.Scenario{}))
	strict.ToolsAllow, strict.Strict = []string{"echo", "ecoh"}, true
	exact := mcptestServer("exact", mcptest.Scenario{})
	exact.ToolsAllow, exact.Strict = []string{"echo"}, true
	tb := startBridge(t, nil, lax, strict, exact)

	for name, want := range map[string]State{"lax": StateReady, "exact": StateReady, "strict": StateFailed} {
		if st := tb.srv(name).snapshot(); st.State != want {
			t.Errorf("%s is %s (%s), want %s", name, st.State, st.Reason, want)
		}
	}
	if st := tb.srv("strict").snapshot(); !strings.Contains(st.Reason, `tools.allow "ecoh" names no tool`) {
		t.Errorf("strict's reason %q does not name the entry", st.Reason)
	}
}
