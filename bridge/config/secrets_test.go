package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSources is a machine's secrets: files by path, commands by their
// joined argv, variables by name; every command run is recorded.
type fakeSources struct {
	files map[string]string
	cmds  map[string]string
	env   map[string]string
	ran   []string
}

func (f *fakeSources) sources() SecretSources {
	return SecretSources{
		LookupEnv: func(k string) (string, bool) { v, ok := f.env[k]; return v, ok },
		ReadFile: func(p string) ([]byte, error) {
			if v, ok := f.files[p]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		},
		Run: func(_ context.Context, argv []string) ([]byte, error) {
			cmd := strings.Join(argv, "|")
			f.ran = append(f.ran, cmd)
			if v, ok := f.cmds[cmd]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("exit status 1: no such item")
		},
	}
}

const secretsTOML = `[mcp.gh]
command = "/bin/gh"
env = { TOKEN = "${cmd:op read 'op://ci/gh token'}", KEY = "${file:keys/gh}", URL = "postgres://app:${env:DB_PASS}@db/app", PLAIN = "as written" }

[mcp.api]
url = "https://api.example.com/mcp"
headers = { "X-Api-Key" = "${file:/run/secrets/api}", "X-Team" = "core" }
`

// References in env and header values resolve from files (relative ones
// beside the config), commands (no shell; quotes group words) and
// variables, once; every resolved value is recorded; and what a file
// holds is never expanded again.
func TestResolveSecrets(t *testing.T) {
	cfg, err := Load("/etc/capbridge/capbridge.toml", []byte(secretsTOML))
	if err != nil {
		t.Fatal(err)
	}
	api, gh := &cfg.Servers[0], &cfg.Servers[1]
	if !gh.Unresolved() || !api.Unresolved() || gh.Env["TOKEN"] != "${cmd:op read 'op://ci/gh token'}" {
		t.Fatalf("before ResolveSecrets: unresolved %v %v, env %v", gh.Unresolved(), api.Unresolved(), gh.Env)
	}
	src := &fakeSources{
		files: map[string]string{"/etc/capbridge/keys/gh": "file-secret-1\n", "/run/secrets/api": "api-key-${cmd:rm -rf}\n"},
		cmds:  map[string]string{"op|read|op://ci/gh token": "cmd-secret-2\n"},
		env:   map[string]string{"DB_PASS": "pw-3333"},
	}
	if err := ResolveSecrets(cfg, src.sources()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"TOKEN": "cmd-secret-2", "KEY": "file-secret-1", "URL": "postgres://app:pw-3333@db/app", "PLAIN": "as written"}
	if !reflect.DeepEqual(gh.Env, want) {
		t.Errorf("env %v, want %v", gh.Env, want)
	}
	if h := api.Remote.Headers; h["X-Api-Key"] != "api-key-${cmd:rm -rf}" || h["X-Team"] != "core" {
		t.Errorf("headers %v: a file's content must be taken as it is", h)
	}
	if !slices.Equal(src.ran, []string{"op|read|op://ci/gh token"}) {
		t.Errorf("commands run: %q", src.ran)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for _, s := range cfg.Servers {
			for _, v := range s.SecretValues() {
				if !yield(v) {
					return
				}
			}
		}
	})
	for _, v := range []string{"cmd-secret-2", "file-secret-1", "pw-3333", "postgres://app:pw-3333@db/app", "api-key-${cmd:rm -rf}"} {
		if !slices.Contains(got, v) {
			t.Errorf("%q is not recorded for redaction (recorded: %q)", v, got)
		}
	}
	if gh.Unresolved() || api.Unresolved() {
		t.Error("still unresolved after ResolveSecrets")
	}
}

// A reference that does not resolve names its file, line and key, and
// never its value; each is reported.
func TestResolveSecretsErrors(t *testing.T) {
	cfg, err := Load("c.toml", []byte(`[mcp.a]
command = "/bin/a"
env = { A = "${file:/missing}", B = "${cmd:false}", C = "${env:UNSET}", D = "${cmd:bigcat}", E = "${file:/bin.dat}" }
[mcp.b]
url = "https://b.example.com"
headers = { "X-K" = "${file:/two-lines}" }
`))
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSources{
		files: map[string]string{"/two-lines": "line1\nline2-secret\n", "/bin.dat": "\xff\xfe"},
		cmds:  map[string]string{"bigcat": strings.Repeat("x", MaxSecret+1)},
	}
	err = ResolveSecrets(cfg, src.sources())
	for _, want := range []string{
		"c.toml:3: mcp.a.env.A: cannot read /missing",
		"c.toml:3: mcp.a.env.B: command false failed: exit status 1",
		"c.toml:3: mcp.a.env.C: uses ${env:UNSET} and UNSET is not set",
		"mcp.a.env.D: command bigcat yields more than 65536 bytes",
		"mcp.a.env.E: file /bin.dat yields bytes that are not UTF-8",
		"c.toml:6: mcp.b.headers.X-K: resolves to a value with a line break",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors %v lack %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "line2-secret") {
		t.Errorf("an error quotes a secret: %v", err)
	}
	// Sources left nil resolve nothing, and say so, where they crashed.
	err = ResolveSecrets(cfg, SecretSources{})
	for _, want := range []string{
		"mcp.a.env.A: cannot read /missing: capbridge was given no way to resolve such a reference here",
		"mcp.a.env.B: command false failed: capbridge was given no way",
		"mcp.a.env.C: uses ${env:UNSET} and UNSET is not set",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("with no sources, errors %v lack %q", err, want)
		}
	}
}

// The forms are checked as the file is read, before anything is run.
func TestSecretRefForms(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{`env = { A = "${file:}" }`, "${file:} names no file"},
		{`env = { A = "${cmd:}" }`, "names no command"},
		{`env = { A = "${cmd:op read 'x}" }`, "an unterminated '"},
		{`env = { A = "${cmd:op ${env:X}}" }`, "holds a placeholder"},
		{`env = { A = "${nope:x}" }`, "which capbridge does not expand"},
		{`env = { A = "${A" }`, "unterminated ${"},
		// In a default, which a set variable leaves unused: they passed
		// until the day the variable was not set.
		{`env = { A = "${X:-${cmd:}}" }`, "names no command"},
		{`env = { A = "${X:-pre-${file:}}" }`, "${file:} names no file"},
		{`env = { A = "${X:-${Y:-${cmd:op read 'x}}}" }`, "an unterminated '"},
	} {
		_, err := Load("f.toml", []byte("[mcp.a]\ncommand = \"/a\"\n"+tc.toml+"\n"))
		if err == nil || !strings.Contains(err.Error(), "f.toml:3: mcp.a.env.A: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want f.toml:3 and %q", tc.toml, err, tc.want)
		}
	}
	// Editors' files: a reference is kept for ResolveSecrets in env and
	// headers, and refused where only variables are expanded.
	servers, _, err := LoadEditor("m.json", []byte(`{"mcpServers":{"a":{"command":"/a","env":{"T":"${cmd:pass show t}","H":"${HOME}"}}}}`), EditorOptions{LookupEnv: func(k string) (string, bool) { return "/home/u", k == "HOME" }})
	if err != nil || servers[0].Env["H"] != "/home/u" || len(servers[0].Refs) != 1 || servers[0].Refs[0].Template != "${cmd:pass show t}" {
		t.Fatalf("editor env: %+v, %v", servers, err)
	}
	_, _, err = LoadEditor("m.json", []byte(`{"mcpServers":{"a":{"command":"/a","args":["${file:/x}"]}}}`), EditorOptions{})
	if err == nil || !strings.Contains(err.Error(), "a secret reference, where only variables are expanded") {
		t.Errorf("a reference in args: %v", err)
	}
}

func TestSplitArgv(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"pass show x", []string{"pass", "show", "x"}},
		{"  op  read\top://a/b  ", []string{"op", "read", "op://a/b"}},
		{`security find-generic-password -s "my service" -w`, []string{"security", "find-generic-password", "-s", "my service", "-w"}},
		{`a 'b c'"d"e ''`, []string{"a", "b cde", ""}},
	} {
		got, err := splitArgv(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitArgv(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", `a "b`} {
		if _, err := splitArgv(bad); err == nil {
			t.Errorf("splitArgv(%q) accepted", bad)
		}
	}
}

// The commands of one resolution share one deadline, and a command named
// by several references runs once: 64 servers whose secret commands wait
// for a password manager to be unlocked held a boot for 10 s a
// reference, one after another (over 21 minutes here), and asked the
// manager for the shared item 64 times.
func TestSecretCommandsShareADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var doc strings.Builder
		for i := range 64 {
			fmt.Fprintf(&doc, "[mcp.s%d]\ncommand = \"/bin/s\"\nenv = { TOKEN = \"${cmd:op read op://v/item%d}\", SHARED = \"${cmd:op read op://v/shared}\" }\n", i, i)
		}
		cfg, err := Load("/etc/capbridge/capbridge.toml", []byte(doc.String()))
		if err != nil {
			t.Fatal(err)
		}
		runs := map[string]int{}
		src := (&fakeSources{}).sources()
		src.Run = func(ctx context.Context, argv []string) ([]byte, error) {
			runs[strings.Join(argv, " ")]++
			<-ctx.Done() // the manager waits to be unlocked
			return nil, errors.New("signal: killed")
		}
		start := time.Now()
		err = ResolveSecrets(cfg, src)
		if took := time.Since(start); took > SecretsTimeout {
			t.Errorf("resolving took %v, more than %v", took, SecretsTimeout)
		}
		if n := runs["op read op://v/shared"]; n != 1 {
			t.Errorf("the shared command ran %d times", n)
		}
		if err == nil || !strings.Contains(err.Error(), "did not finish in time") && !strings.Contains(err.Error(), "not run: the secret commands before it took") {
			t.Errorf("ResolveSecrets: %v", err)
		}
	})
}
