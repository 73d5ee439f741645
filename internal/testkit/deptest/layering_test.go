package deptest

import (
	"strings"
	"testing"
)

// The house's layering, checked on the whole module: internal/ is the
// ground floor and imports nothing above it; a mechanism under
// bridge/internal is a leaf that never imports the bridge it serves; and
// no binary links test scaffolding.
func TestLayering(t *testing.T) {
	pkgs := Imports(t, Module+"/...")
	if len(pkgs) < 20 {
		t.Fatalf("go list named %d packages; want the whole module", len(pkgs))
	}
	for _, p := range pkgs {
		from, _ := InModule(p.ImportPath)
		for _, imp := range p.Imports {
			to, ok := InModule(imp)
			if !ok {
				continue
			}
			switch {
			case strings.HasPrefix(from, "internal/") && !strings.HasPrefix(to, "internal/"):
				t.Errorf("%s imports %s: nothing in internal/ imports a package above it", from, to)
			case strings.HasPrefix(from, "bridge/internal/") && (to == "bridge" || strings.HasPrefix(to, "bridge/bridgetest")):
				t.Errorf("%s imports %s: the bridge's leaves never import the bridge", from, to)
			}
		}
	}
}

// Neither capbridge nor any other command of the module links test
// scaffolding, on Linux or darwin.
func TestBinariesLinkNoScaffolding(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		deps := Deps(t, goos, Module+"/cmd/...")
		var inModule int
		for _, d := range deps {
			rel, ok := InModule(d)
			if !ok {
				continue
			}
			inModule++
			if strings.HasPrefix(rel, "internal/testkit/") || strings.HasSuffix(rel, "test") {
				t.Errorf("GOOS=%s: the commands link %s, which is test scaffolding", goos, d)
			}
		}
		if inModule < 10 {
			t.Fatalf("GOOS=%s: the commands link %d packages of the module; want the whole CLI", goos, inModule)
		}
	}
}
