package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// Every flag whose help says "(required)" is: the command, given every
// other required flag, refuses to run without it, with exit 2 and a first
// line naming it. (gen's --listing once said so and was not: gen fetches
// the façade from the running capbridge without it.)
func TestRequiredFlagsAreRequired(t *testing.T) {
	// No command may reach a real capbridge.
	t.Setenv(envControl, t.TempDir()+"/none.sock")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	checked := 0
	for name, c := range commands() {
		docs := commandFlags(c)
		var required []flagDoc
		for _, d := range docs {
			if strings.Contains(d.usage, "(required)") {
				required = append(required, d)
			}
		}
		for _, missing := range required {
			var args []string
			for _, d := range required {
				if d != missing {
					args = append(args, "--"+d.name, valueFor(t, name, d.name))
				}
			}
			var stderr bytes.Buffer
			code := c.run(args, io.Discard, &stderr)
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if code != exitUsage || !strings.Contains(first, "--"+missing.name) {
				t.Errorf("capbridge %s %s (without --%s, which its help says is required): exit %d, stderr %q; want exit %d naming --%s",
					name, strings.Join(args, " "), missing.name, code, stderr.String(), exitUsage, missing.name)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("checked %d required flags; gen's --server and --out and grant's --servers at least", checked)
	}
}

// valueFor is a value of the type of the command's flag, as its help
// line names it.
func valueFor(t *testing.T, cmd, flag string) string {
	var out bytes.Buffer
	commands()[cmd].run([]string{"--help"}, &out, io.Discard)
	m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(flag) + ` (\w+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("capbridge %s --%s: no type in its help", cmd, flag)
	}
	return map[string]string{"string": t.TempDir(), "int": "1", "uint": "1", "duration": "1s"}[m[1]]
}

// A command's usage line names only flags it has.
func TestUsageLinesNameRealFlags(t *testing.T) {
	flagRef := regexp.MustCompile(`(?:^|[\s\[|])--?([a-z][a-z0-9-]*)`)
	for name, c := range commands() {
		var out bytes.Buffer
		c.run([]string{"--help"}, &out, io.Discard)
		head, _, _ := strings.Cut(out.String(), "\n\n") // the usage lines
		var have []string
		for _, d := range commandFlags(c) {
			have = append(have, d.name)
		}
		for _, m := range flagRef.FindAllStringSubmatch(head, -1) {
			if !slices.Contains(have, m[1]) {
				t.Errorf("capbridge %s: its usage names --%s, which it does not take:\n%s", name, m[1], head)
			}
		}
	}
}

// login and logout read a remote server's definition; they boot nothing
// and ask no running capbridge, so lock's --running, --control and
// --strict are not theirs. gen's --surface-budget shapes only a façade it
// generates itself. A flag whose help says it works "with" another is
// refused without it.
func TestFlagsThatWouldLie(t *testing.T) {
	t.Setenv(envControl, t.TempDir()+"/none.sock")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"login", "--running", "web"}, "not defined: -running"},
		{[]string{"login", "--control", "x", "web"}, "not defined: -control"},
		{[]string{"logout", "--strict", "web"}, "not defined: -strict"},
		{[]string{"gen", "--server", "s", "--out", "x", "--surface-budget", "1000"}, "--surface-budget applies to --listing only"},
		// A flag that means something only beside another is refused
		// alone, not ignored.
		{[]string{"lock", "--control", "x"}, "use it with --running"},
		{[]string{"skew", "--control", "x"}, "use it with --running"},
		{[]string{"tools", "--lang", "ts"}, "use it with --surface"},
		{[]string{"tools", "--surface", "--json"}, "do not apply to it"},
		{[]string{"tools", "--surface", "--schema"}, "do not apply to it"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("capbridge %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr.String(), exitUsage, tc.msg)
		}
	}
}

// frontConfig writes a capbridge.toml of one server, s (mcptest's),
// with more of its keys, and returns its path.
func frontConfig(t *testing.T, more string) string {
	t.Helper()
	cfg := filepath.Join(shortTempDir(t), "capbridge.toml")
	argv, env := mcptest.Command(mcptest.Scenario{})
	var envs []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envs = append(envs, k+" = "+strconv.Quote(v))
	}
	toml := "[mcp.s]\ncommand = " + strconv.Quote(argv[0]) + "\nargs = " + tomlList(argv[1:]) + "\nrestart = \"never\"\n" +
		"env = { " + strings.Join(envs, ", ") + " }\n" + more
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mcp and run --strict do what serve --strict does (the flag once only
// reached the editor-config reader, which refuses nothing more under it):
// a tools.deny entry that names no tool of the server fails its boot.
func TestFrontStrict(t *testing.T) {
	cfg := frontConfig(t, "tools.deny = [\"no_such_tool\"]\n")
	for _, strict := range []bool{false, true} {
		fs := newCmdFlags("mcp", "capbridge mcp", "")
		ff := addFrontFlags(fs)
		args := []string{"-c", cfg, "--warm", "0", "--languages", "python", "--strict=" + strconv.FormatBool(strict)}
		if _, _, ok := fs.parse(args, io.Discard, io.Discard); !ok {
			t.Fatal("flags refused")
		}
		var log syncbuf.Buffer
		f, code := ff.start(context.Background(), &log)
		if f == nil {
			t.Fatalf("mcp --strict=%v did not start (exit %d):\n%s", strict, code, log.String())
		}
		f.close()
		failed := strings.Contains(log.String(), "names no tool of this server (an error under --strict)")
		if failed != strict {
			t.Errorf("mcp --strict=%v: the server's boot failed: %v; log:\n%s", strict, failed, log.String())
		}
	}
}

// mcp makes its sockets' directory under a name nobody can know in
// advance: another user who made the directory mcp would use (its name
// was the uid and the pid) kept it from starting.
func TestMCPSocketDirUnguessable(t *testing.T) {
	taken := filepath.Join(os.TempDir(), "capbridge-mcp-"+strconv.Itoa(os.Getuid())+"-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(taken)
	if os.Getuid() == 0 {
		if err := os.Chown(taken, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	flags := newCmdFlags("mcp", "capbridge mcp", "")
	ff := addFrontFlags(flags)
	if _, _, ok := flags.parse([]string{"-c", frontConfig(t, ""), "--warm", "0", "--languages", "python"}, io.Discard, io.Discard); !ok {
		t.Fatal("flags refused")
	}
	var log syncbuf.Buffer
	f, code := ff.start(context.Background(), &log)
	if f == nil {
		t.Fatalf("mcp did not start (exit %d) beside another user's %s:\n%s", code, taken, log.String())
	}
	dir := f.dir
	f.close()
	if dir == taken || !strings.HasPrefix(filepath.Base(dir), "capbridge-mcp-") {
		t.Errorf("sockets in %s", dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind: %v", dir, err)
	}
}
