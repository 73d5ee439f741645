package codegen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestCompile builds the façade of every golden listing, and of the hostile
// listings that generate, with `go build` in a temporary module that
// replaces this module by the checkout, offline: generated source must
// compile against the real capwire client, not just parse.
func TestCompile(t *testing.T) {
	defer leakcheck.Check(t)()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module facades.test\n\ngo 1.26\n\nrequire github.com/capbridge/capbridge v0.0.0\n\n" +
		"replace github.com/capbridge/capbridge => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), []byte(gomod))
	write(t, filepath.Join(dir, "go.sum"), sum)

	listings, _ := filepath.Glob("testdata/*.json")
	hostileOK, _ := filepath.Glob("testdata/hostile/*.json")
	built := 0
	for _, path := range append(listings, hostileOK...) {
		g, err := generateFile(t, path, Options{})
		if err != nil {
			continue // refusals are TestHostile's business
		}
		write(t, filepath.Join(dir, g.ModuleName, g.ModuleName+".go"), g.Source)
		built++
	}
	if built < len(listings) {
		t.Fatalf("only %d façades generated", built)
	}
	write(t, filepath.Join(dir, "prog", "main.go"), []byte(compileProgram))
	bin := filepath.Join(dir, "prog.bin")
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build of %d façades: %v\n%s", built, err, clipLines(out.String(), 40))
	}
	cmd = exec.Command("go", "build", "-o", bin, "./prog")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the program: %v\n%s", err, clipLines(string(out), 40))
	}
	got, err := exec.Command(bin).CombinedOutput()
	if err != nil || string(got) != compileWant {
		t.Fatalf("program: %v\n%s\nwant:\n%s", err, got, compileWant)
	}
}

// compileProgram is what a model writes against v2 façades: struct
// literals with named fields, enum constants and untyped constants,
// sealed unions, recursive records, integers past int64; the arguments
// are encoded as a façade's call encodes them, and typed outputs come back
// through the generated accessors (capwire.Result.Decode), mismatches as
// errors.
const compileProgram = `package main

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/capbridge/capbridge/capwire"
	"github.com/vmihailenco/msgpack/v5"

	"facades.test/everything"
	"facades.test/memory"
	"facades.test/shapes"
)

func wire(v any) string {
	b, err := msgpack.Marshal(v)
	if err != nil {
		fail(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		fail(err)
	}
	var keys []string
	for k, v := range m {
		keys = append(keys, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}

func fail(err error) {
	fmt.Println("error:", err)
	os.Exit(1)
}

func result(v any) *capwire.Result {
	b, err := msgpack.Marshal(v)
	if err != nil {
		fail(err)
	}
	return &capwire.Result{Structured: b}
}

func main() {
	fmt.Println(wire(everything.GetAnnotatedMessageArgs{MessageType: everything.GetAnnotatedMessageMessageTypeError, IncludeImage: new(true)}))
	fmt.Println(wire(everything.GetStructuredContentArgs{Location: "Chicago"}))
	fmt.Println(wire(memory.CreateEntitiesArgs{Entities: []memory.CreateEntitiesEntity{{Name: "n", EntityType: "t", Observations: []string{"o"}}}}))
	fmt.Println(wire(shapes.DrawShapeArgs{
		Shape: shapes.DrawShapeShapeCircle{Kind: shapes.DrawShapeShapeCircleKindCircle, Radius: 2},
		Color: shapes.DrawShapeColorArray{255, 0, 0},
		Style: new(shapes.DrawShapeStyleDashed),
	}))
	fmt.Println(wire(shapes.SetPriorityArgs{Level: shapes.SetPriorityLevelV2, Mask: shapes.SetPriorityMaskV18446744073709551615}))
	fmt.Println(wire(shapes.WalkTreeArgs{Root: shapes.WalkTreeNode{Value: "r", Children: []shapes.WalkTreeNode{{Value: "c"}}}}))

	out, err := shapes.DecodeGetWeather(result(map[string]any{
		"current": map[string]any{"temp": 21.5, "conditions": "rain"},
		"history": []any{map[string]any{"day": "mon", "temp": 20}},
	}))
	if err != nil {
		fail(err)
	}
	fmt.Println(out.Current.Temp, *out.Current.Conditions == shapes.GetWeatherOutputCurrentConditionsRain, *out.History[0].Day, *out.History[0].Temp)
	sum, err := shapes.DecodeGetSum(result(map[string]any{"sum": 3, "parts": []any{"a", 1}}))
	if err != nil {
		fail(err)
	}
	fmt.Println(sum.Sum, sum.Detail == nil, sum.Parts)
	_, err = shapes.DecodeGetWeather(result(map[string]any{"current": map[string]any{"temp": "hot"}}))
	var de *capwire.DecodeError
	fmt.Println(errors.As(err, &de), de.Path)
}
`

const compileWant = `[includeImage=true messageType=error]
[location=Chicago]
[entities=[map[entityType:t name:n observations:[o]]]]
[color=[255 0 0] label=<nil> shape=map[kind:circle radius:2] style=dashed]
[level=2 mask=18446744073709551615]
[root=map[children:[map[value:c]] value:r]]
21.5 true mon 20
3 true [a 1]
true /current/temp
`

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func clipLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
