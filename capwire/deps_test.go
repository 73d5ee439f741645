package capwire

import (
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/deptest"
)

// Every compiled façade links capwire and everything it imports, so the
// server side (bridge/internal/capserver) must stay out of that graph, and any
// other package of this module that enters it must be a deliberate,
// reviewed choice: it is listed here.
func TestFacadeImportGraph(t *testing.T) {
	allowed := map[string]bool{
		"capwire":             true,
		"internal/bound":      true,
		"internal/framewrite": true,
		"internal/msgpk":      true,
		"internal/pointer":    true,
		"internal/readside":   true,
		"internal/unixconn":   true,
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, pkg := range deptest.Deps(t, goos, ".") {
			rel, ok := deptest.InModule(pkg)
			switch {
			case !ok:
			case rel == "bridge/internal/capserver":
				t.Errorf("GOOS=%s: capwire imports the server side %s", goos, pkg)
			case !allowed[rel]:
				t.Errorf("GOOS=%s: capwire imports %s, which is not on the façade import list", goos, pkg)
			}
		}
	}
}
