package capwire

import (
	"os/exec"
	"strings"
	"testing"
)

// Every compiled façade links capwire and everything it imports, so the
// server side (bridge/internal/capserver) must stay out of that graph, and any
// other package of this module that enters it must be a deliberate,
// reviewed choice: it is listed here.
func TestFacadeImportGraph(t *testing.T) {
	const module = "github.com/capbridge/capbridge/"
	allowed := map[string]bool{
		module + "capwire":             true,
		module + "internal/bound":      true,
		module + "internal/framewrite": true,
		module + "internal/msgpk":      true,
		module + "internal/pointer":    true,
		module + "internal/readside":   true,
		module + "internal/unixconn":   true,
	}
	// go test puts its own go command first on PATH.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var inModule int
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module) {
			continue
		}
		inModule++
		if pkg == module+"bridge/internal/capserver" {
			t.Errorf("capwire imports the server side %s", pkg)
		} else if !allowed[pkg] {
			t.Errorf("capwire imports %s, which is not on the façade import list", pkg)
		}
	}
	if inModule == 0 {
		t.Fatalf("go list -deps named no package of this module:\n%s", out)
	}
}
