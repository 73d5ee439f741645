package bridge

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// e2eProgram is the program a model would write: it imports the façades
// the running bridge generated, calls through them with nothing but
// CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN, and prints what it got, one
// "what: value" line per call. {{name}} placeholders are the façade
// functions of server-everything's hyphenated tools, whose Go names
// codegen chooses (found in the source, not assumed).
const e2eProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/capbridge/capbridge/capwire"

	ev "e2e.test/everything"
	mt "e2e.test/t"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(r *capwire.Result, err error) *capwire.Result {
		if err != nil {
			fmt.Fprintln(os.Stderr, "call failed:", err)
			os.Exit(1)
		}
		return r
	}

	r := must(ev.Echo(ctx, ev.EchoArgs{Message: "hello e2e"}))
	fmt.Printf("echo: %s is_error=%v\n", r.Text(), r.IsError)

	r = must(ev.{{get-tiny-image}}(ctx))
	var kinds []string
	for _, b := range r.Content {
		if b.Type == capwire.BlockText {
			kinds = append(kinds, "text")
		} else {
			kinds = append(kinds, b.Type+":"+b.Kind)
		}
	}
	fmt.Printf("image: %s\n", strings.Join(kinds, ","))

	r = must(ev.{{get-structured-content}}(ctx, ev.{{get-structured-content}}Args{Location: "Chicago"}))
	var weather map[string]any
	if err := r.Decode(&weather); err != nil {
		fmt.Fprintln(os.Stderr, "decode:", err)
		os.Exit(1)
	}
	var keys []string
	for k := range weather {
		keys = append(keys, fmt.Sprintf("%s=%v", k, weather[k]))
	}
	sort.Strings(keys)
	fmt.Printf("structured: %s\n", strings.Join(keys, " "))

	r = must(mt.Add(ctx, mt.AddArgs{A: 40, B: 2}))
	var sum struct{ Sum int64 ` + "`msgpack:\"sum\"`" + ` }
	if err := r.Decode(&sum); err != nil {
		fmt.Fprintln(os.Stderr, "decode:", err)
		os.Exit(1)
	}
	fmt.Printf("add: %s sum=%d\n", r.Text(), sum.Sum)

	msg := "as asked"
	r = must(mt.Fail(ctx, mt.FailArgs{Message: &msg}))
	fmt.Printf("fail: %s is_error=%v\n", r.Text(), r.IsError)

	// content takes no arguments (its schema is closed), so bytes JSON
	// cannot carry are sent past its façade, on the façades' connection.
	c, err := capwire.Shared(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	_, err = c.Call(ctx, "t", "content", map[string]any{"blob": map[string]any{"bytes": []byte{1, 2, 3}}})
	var d *capwire.Denied
	if !errors.As(err, &d) {
		fmt.Fprintln(os.Stderr, "want a denial, got", err)
		os.Exit(1)
	}
	fmt.Printf("denied: %s at %s\n", d.Code, d.Path)
}
`

// e2eWant is the program's whole output.
const e2eWant = `echo: Echo: hello e2e is_error=false
image: text,other:image,text
structured: conditions=Light rain / drizzle humidity=82 temperature=36
add: 42 sum=42
fail: as asked is_error=true
denied: bad_arguments at /blob/bytes
`

// TestEndToEnd is the end-to-end test with real processes: the
// bridge serves server-everything and mcptest; the façades come from the
// control plane; a program importing them is built with the go command
// (offline, against this checkout) and run with only the two environment
// variables a jail would give it.
func TestEndToEnd(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, everythingServer(t), mcptestServer("t", mcptest.Scenario{}))
	for _, name := range tb.Servers() {
		if st := tb.srv(name).snapshot(); st.State != StateReady {
			t.Fatalf("server %s: %s: %s", name, st.State, st.Reason)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctl := tb.control()
	granted, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"everything": nil, "t": nil}})
	if err != nil {
		t.Fatal(err)
	}

	dir := goProgramDir(t, "e2e.test")
	program := e2eProgram
	for _, server := range []string{"everything", "t"} {
		f, err := ctl.Facade(ctx, &control.FacadeRequest{Server: server, Lang: "go"})
		if err != nil {
			t.Fatal(err)
		}
		if f.Module != server || !strings.Contains(f.Surface, "package "+server) {
			t.Fatalf("façade of %s: module %q, surface %.200q", server, f.Module, f.Surface)
		}
		writeFile(t, filepath.Join(dir, f.Module, f.Module+".go"), f.Source)
		if server == "everything" {
			for _, tool := range []string{"get-tiny-image", "get-structured-content"} {
				m := regexp.MustCompile(`(?m)^// (\w+) calls tool "` + tool + `" of server "everything"\.$`).FindStringSubmatch(f.Source)
				if m == nil {
					t.Fatalf("no façade function for %s", tool)
				}
				program = strings.ReplaceAll(program, "{{"+tool+"}}", m[1])
			}
		}
	}
	writeFile(t, filepath.Join(dir, "main.go"), program)
	ctl.Close()

	bin := buildGoProgram(t, dir)

	if out := runGoProgram(t, bin, tb.CallSocket(), granted.Token); out != e2eWant {
		t.Errorf("program output:\n%s\nwant:\n%s", out, e2eWant)
	}
	tb.shutdown()
}

// everythingServer configures the pinned npm server-everything, whose
// first start may take a while.
func everythingServer(t *testing.T) config.Server {
	t.Helper()
	argv := interop.Command(t, interop.Everything, t.TempDir())
	s := config.NewServer("everything", argv[0])
	s.Args = argv[1:]
	s.StartupTimeout = time.Minute
	return s
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goProgramDir returns a fresh directory for module, a Go program that
// imports capbridge from this checkout (a replace directive, the
// checkout's go.sum), as a jailed program's build would.
func goProgramDir(t *testing.T, module string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module "+module+"\n\ngo 1.26\n\nrequire github.com/capbridge/capbridge v0.0.0\n\n"+
		"replace github.com/capbridge/capbridge => "+root+"\n")
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
	return dir
}

// buildGoProgram builds the program in dir, offline, and returns the
// binary's path.
func buildGoProgram(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "prog")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runGoProgram runs bin with only what a jail hands in (the call socket
// and a token: nothing that could point it elsewhere), within two
// minutes, and returns its standard output; a failed run fails t.
func runGoProgram(t *testing.T, bin, socket, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin)
	run.Env = []string{"CAPBRIDGE_SOCKET=" + socket, "CAPBRIDGE_TOKEN=" + token}
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("program: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
