package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// Every command prints its help on stdout and exits 0 for --help, -h
// and `capbridge help CMD`, and the three agree.
func TestHelp(t *testing.T) {
	for name := range commands() {
		var want bytes.Buffer
		if code := run([]string{"help", name}, &want, &bytes.Buffer{}); code != exitOK || !strings.HasPrefix(want.String(), "usage: capbridge "+name) {
			t.Errorf("help %s: exit %d, stdout %q", name, code, want.String())
		}
		for _, flag := range []string{"--help", "-h"} {
			var out, errOut bytes.Buffer
			if code := run([]string{name, flag}, &out, &errOut); code != exitOK || out.String() != want.String() || errOut.Len() != 0 {
				t.Errorf("%s %s: exit %d, stderr %q, stdout differs from help's: %v", name, flag, code, errOut.String(), out.String() != want.String())
			}
		}
	}
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, &bytes.Buffer{}); code != exitOK || !strings.Contains(out.String(), "listing ") {
		t.Errorf("capbridge --help: exit %d, %q", code, out.String())
	}
	var errOut bytes.Buffer
	if code := run([]string{"status", "--nope"}, &bytes.Buffer{}, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "capbridge help status") {
		t.Errorf("a bad flag: exit %d, stderr %q; want 2 and where the help is", code, errOut.String())
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := newCmdFlags("x", "capbridge x", "")
	j := fs.Bool("json", false, "")
	c := fs.String("c", "", "")
	pos, _, ok := fs.parse([]string{"demo", "--json", "echo", "-c", "f.toml", "text=hi", "--", "--json=x"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !ok || !*j || *c != "f.toml" || strings.Join(pos, " ") != "demo echo text=hi --json=x" {
		t.Errorf("positional %q, json %v, c %q", pos, *j, *c)
	}
}

// A client command that cannot reach capbridge names the path it tried,
// how it chose it, and what to do.
func TestControlResolution(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv(envControl, "")
	cfg := filepath.Join(dir, "capbridge.toml")
	if err := os.WriteFile(cfg, []byte("[bridge]\ncontrol_socket = \""+dir+"/from-config.sock\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "bare.toml")
	if err := os.WriteFile(bare, []byte("[mcp.a]\ncommand = \"/bin/a\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  string
		args []string
		says []string
	}{
		{"", nil, []string{dir + "/capbridge/control.sock (the default)"}},
		{dir + "/env.sock", nil, []string{dir + "/env.sock (from $CAPBRIDGE_CONTROL)"}},
		{dir + "/env.sock", []string{"-c", cfg}, []string{dir + "/from-config.sock (from " + cfg + ")"}},
		{"", []string{"-c", bare}, []string{dir + "/capbridge/control.sock (the default, as " + bare + " names no control_socket)"}},
		{dir + "/env.sock", []string{"--control", dir + "/flag.sock", "-c", cfg}, []string{dir + "/flag.sock (from --control)"}},
		{"", []string{"-c", dir + "/missing.toml"}, []string{"missing.toml", "check the path"}},
	} {
		t.Setenv(envControl, tc.env)
		var errOut bytes.Buffer
		code := run(append([]string{"status"}, tc.args...), &bytes.Buffer{}, &errOut)
		ok := code == exitError
		for _, s := range append(tc.says, "; ") {
			ok = ok && strings.Contains(errOut.String(), s)
		}
		if !ok {
			t.Errorf("status %q with $%s=%q: exit %d, stderr %q; want it to say %q", tc.args, envControl, tc.env, code, errOut.String(), tc.says)
		}
	}
}

// A client command left to the default control socket sends nothing to
// one in a directory another local user could have made or may write to
// (/tmp/capbridge-UID, where $XDG_RUNTIME_DIR is unset, is anyone's to
// create first): a request carries tokens and a call's arguments. It
// says why, and how to name the socket meant.
func TestDefaultControlSquatted(t *testing.T) {
	defer leakcheck.Check(t)()
	rt := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv(envControl, "")
	dir := filepath.Join(rt, "capbridge")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "control.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	heard := make(chan string, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		heard <- string(buf[:n])
	}()
	var errOut bytes.Buffer
	code := run([]string{"status"}, &bytes.Buffer{}, &errOut)
	for _, want := range []string{"will not use " + path + " (the default)", "mode 0777", "nothing was sent", "--control"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("status at a squatted default: exit %d, stderr %q; want it to say %q", code, errOut.String(), want)
		}
	}
	// Ours comes first in the listener's queue unless status connected.
	mark, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer mark.Close()
	if _, err := mark.Write([]byte("mark")); err != nil {
		t.Fatal(err)
	}
	if got := <-heard; got != "mark" {
		t.Errorf("the squatter heard %q from status before our mark", got)
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out bytes.Buffer
		if code := run([]string{"completion", sh}, &out, &bytes.Buffer{}); code != exitOK || !strings.Contains(out.String(), "listing") {
			t.Fatalf("completion %s: exit %d", sh, code)
		}
		if sh == "bash" && !strings.Contains(out.String(), `call) flags="-c --control --json --timeout"`) {
			t.Errorf("bash completion lacks call's flags:\n%s", out.String())
		}
		bin, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s is not installed: its script is not syntax-checked", sh)
			continue
		}
		check := exec.Command(bin, "-n")
		if sh == "fish" {
			check = exec.Command(bin, "--no-execute")
		}
		check.Stdin = &out
		if msg, err := check.CombinedOutput(); err != nil {
			t.Errorf("%s -n rejects the script: %v\n%s", sh, err, msg)
		}
	}
	if code := run([]string{"completion", "csh"}, &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
		t.Errorf("completion csh: exit %d, want %d", code, exitUsage)
	}
}

func TestTypedArgs(t *testing.T) {
	schema := gjson.Parse(`{"type":"object","properties":{
		"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},
		"a":{"type":"array","items":{"type":"string"}},"o":{"type":"object"},"opt":{"type":["integer","null"]},
		"e":{"enum":["x","y"]},"free":{}},
		"required":["s"],"additionalProperties":false}`)
	files := map[string]string{"body.txt": "line one\nline two", "obj.json": `{"k":1}`}
	read := func(name string) ([]byte, error) {
		if v, ok := files[name]; ok {
			return []byte(v), nil
		}
		return nil, os.ErrNotExist
	}
	for _, tc := range []struct {
		words []string
		want  string // the JSON, or the error's text
	}{
		{[]string{"s=hi", "n=1.5", "i=-3", "b=true", `a=["x"]`, `o={"k":"v"}`, "opt=7", "e=y", "free=1"},
			`{"a":["x"],"b":true,"e":"y","free":"1","i":-3,"n":1.5,"o":{"k":"v"},"opt":7,"s":"hi"}`},
		{[]string{"s=a=b"}, `{"s":"a=b"}`},
		{[]string{"s:=\"quoted\"", "free:=[1,2]"}, `{"free":[1,2],"s":"quoted"}`},
		{[]string{"s=@body.txt", "o=@obj.json"}, `{"o":{"k":1},"s":"line one\nline two"}`},
		{[]string{"s=x", "n=abc"}, `n wants a number, not "abc"; write n=1.5`},
		{[]string{"s=x", "i=1.5"}, `i wants an integer, not "1.5"`},
		{[]string{"s=x", "b=yes"}, `b wants a boolean, not "yes"`},
		{[]string{"s=x", "a=x,y"}, `a wants a JSON array, not "x,y"`},
		{[]string{"s=x", `o=["x"]`}, `o wants a JSON object`},
		{[]string{"s=x", "e=z"}, `e wants one of x, y, not "z"`},
		{[]string{"s=x", "nope=1"}, `t takes no argument "nope"; it takes: s, n, i, b, a, o, opt, e, free`},
		{[]string{"n=1"}, "t requires s; add s=…"},
		{[]string{"s=x", "s=y"}, "s is given twice"},
		{[]string{"s=@missing"}, "s=@missing: file does not exist; name a readable file"},
		{[]string{"s:=nope"}, `s:= wants JSON, and "nope" is not`},
		{[]string{"justaword"}, `"justaword" is not an argument: write key=value`},
	} {
		got, err := typedArgs(schema, "t", tc.words, read)
		if err != nil {
			if _, ok := err.(*argError); !ok || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: error %v (%T), want %q", tc.words, err, err, tc.want)
			}
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%q: got %s, want %s", tc.words, got, tc.want)
		}
	}
}

// TestOperatorCLI runs call with typed arguments, tools, listing and gen
// with the real binary against a real `capbridge serve`: the listing fed
// to gen --listing generates the same façade as gen from the service.
func TestOperatorCLI(t *testing.T) {
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rt := shortTempDir(t)
	env := []string{"XDG_RUNTIME_DIR=" + rt}
	srv, _ := startServe(t, bin, env, "serve")

	for _, tc := range []struct {
		args      []string
		code      int
		out, says string
	}{
		{[]string{"call", "demo", "add", "a=2", "b=0.5"}, exitOK, `"sum": 2.5`, ""},
		{[]string{"call", "demo", "echo", "text=hello world", "--json"}, exitOK, `"text":"hello world"`, ""},
		{[]string{"call", "--timeout", "30s", "demo", "echo", `{"text":"raw"}`}, exitOK, "raw\n", ""},
		{[]string{"call", "demo", "add", "a=two", "b=1"}, exitUsage, "", `a wants a number, not "two"`},
		{[]string{"call", "demo", "add", "a=1"}, exitUsage, "", "add requires b; add b=…"},
		{[]string{"call", "demo", "echo", "text=@/dev/zero"}, exitUsage, "", "text=@/dev/zero: more than"},
		{[]string{"call", "demo", "nope", "x=1"}, exitUsage, "", `server "demo" has no tool "nope"; its tools: add,`},
		{[]string{"call", "ghost", "echo", "text=x"}, exitError, "", "unknown_server"},
		{[]string{"tools", "demo"}, exitOK, "      a  number  required  first addend", ""},
		{[]string{"tools", "demo", "--schema"}, exitOK, `schema: {`, ""},
		{[]string{"listing"}, exitUsage, "", "name one server"},
		{[]string{"call", "-c", filepath.Join(rt, "nope.toml"), "demo", "echo"}, exitError, "", "check the path"},
	} {
		out, errOut, code := runCLI(t, bin, env, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out, tc.says)
		}
	}

	// "-": the arguments object from stdin.
	cmd := exec.Command(bin, "call", "demo", "echo", "-")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(`{"text":"from stdin"}`)
	if out, err := cmd.Output(); err != nil || string(out) != "from stdin\n" {
		t.Errorf("call demo echo -: %q, %v", out, err)
	}

	// tools --json: each server's tools/list entries.
	out, _, _ := runCLI(t, bin, env, "tools", "--json")
	var byServer map[string][]map[string]any
	if err := json.Unmarshal([]byte(out), &byServer); err != nil || len(byServer["demo"]) != 6 {
		t.Errorf("tools --json: %v, %q", err, out)
	}

	// listing → gen --listing: the same façade as gen from the service.
	listing, errOut, code := runCLI(t, bin, env, "listing", "demo")
	if code != exitOK {
		t.Fatalf("listing: exit %d, %s", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(file, []byte(listing), 0o644); err != nil {
		t.Fatal(err)
	}
	live, offline := t.TempDir(), t.TempDir()
	if _, errOut, code := runCLI(t, bin, env, "gen", "--server", "demo", "--out", live); code != exitOK {
		t.Fatalf("gen: %s", errOut)
	}
	if _, errOut, code := runCLI(t, bin, nil, "gen", "--server", "demo", "--listing", file, "--out", offline); code != exitOK {
		t.Fatalf("gen --listing: %s", errOut)
	}
	for _, f := range []string{filepath.Join("demo", "demo.go"), "demo.surface.go.txt"} {
		a, errA := os.ReadFile(filepath.Join(live, f))
		b, errB := os.ReadFile(filepath.Join(offline, f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s differs between gen from the service and gen --listing of `capbridge listing` (%v, %v)", f, errA, errB)
		}
	}

	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, more stdout %q", err, rest)
	}
}

// contrib/capbridge.service is a unit systemd accepts without a warning,
// with the settings serve relies on.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("../../contrib/capbridge.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nType=notify\n", "\nRuntimeDirectory=capbridge\n", "\nRuntimeDirectoryMode=0700\n", "\nNoNewPrivileges=yes\n",
		"\nProtectSystem=strict\n", "\nReadWritePaths=/run/capbridge ", "\nPrivateTmp=yes\n", "\nExecStart=/usr/local/bin/capbridge serve -c /etc/capbridge/capbridge.toml"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed, so the unit is not verified")
	}
	// verify checks that ExecStart's program exists: point it at the
	// binary this package builds.
	dir := t.TempDir()
	bin := filepath.Join(dir, "capbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "capbridge.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/capbridge"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	// verify exits 0 on an unknown key or a bad value, only warning:
	// any output is a failure.
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
