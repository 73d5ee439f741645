package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/pointer"
)

const policyTOML = `[bridge]
lock = "capbridge.lock"
lock_mode = "warn"

[mcp.fs]
command = "/bin/fs"
destructive = ["delete_file"]

[mcp.fs.restrict.write_file]
"/path" = { prefix = "/srv/data/" }
"/mode" = { values = ["append", "create"], optional = true }

[mcp.fs.restrict.resize]
"/size" = { min = 1, max = 1024.5 }
"/opts/name" = { pattern = "[a-z]+" }
`

func TestLoadPolicy(t *testing.T) {
	cfg, err := Load("/etc/capbridge/capbridge.toml", []byte(policyTOML))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bridge.Lock != "/etc/capbridge/capbridge.lock" || cfg.Bridge.LockMode != LockWarn {
		t.Fatalf("lock %q mode %q", cfg.Bridge.Lock, cfg.Bridge.LockMode)
	}
	s := cfg.Servers[0]
	if !s.IsDestructive("delete_file") || s.IsDestructive("write_file") {
		t.Fatalf("destructive = %v", s.Destructive)
	}
	if len(s.Restrict) != 4 {
		t.Fatalf("restrict = %+v", s.Restrict)
	}
	w := s.Guards("write_file")
	if len(w) != 2 || w[0].Pointer != "/mode" || !w[0].Optional || len(w[0].Values) != 2 || w[1].Pointer != "/path" || *w[1].Prefix != "/srv/data/" || w[1].Line != 10 {
		t.Fatalf("write_file guards = %+v", w)
	}
	r := s.Guards("resize")
	if r[0].Pointer != "/opts/name" || r[1].Pointer != "/size" || r[1].Min.Text != "1" || r[1].Max.Text != "1024.5" {
		t.Fatalf("resize guards = %+v", r)
	}
	if !r[0].Pattern.MatchString("abc") || r[0].Pattern.MatchString("abc1") {
		t.Fatal("a pattern does not match the whole value")
	}
}

func TestPolicyErrors(t *testing.T) {
	for _, c := range []struct{ name, toml, want string }{
		{"bad lock mode", "[bridge]\nlock_mode = \"lenient\"\n", `x.toml:2: bridge.lock_mode: bad value "lenient"; use one of: enforce, warn`},
		{"empty lock", "[bridge]\nlock = \"\"\n", "x.toml:2: bridge.lock: is empty"},
		{"not a pointer", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.path = { prefix = \"/\" }\n", `x.toml:3: mcp.a.restrict.t.path: "path" is not a JSON Pointer`},
		{"bad escape", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/a~2\" = { prefix = \"/\" }\n", "has a ~ that is not ~0 or ~1"},
		{"unknown rule", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/p\" = { prefx = \"/\" }\n", `x.toml:3: mcp.a.restrict.t./p.prefx: unknown key "prefx"; did you mean "prefix"?`},
		{"no rule", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/p\" = { optional = true }\n", "restricts nothing"},
		{"bad pattern", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/p\" = { pattern = \"(\" }\n", "bad pattern"},
		{"min over max", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/p\" = { min = 5, max = 1 }\n", "min 5 is more than max 1"},
		{"empty values", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/p\" = { values = [] }\n", "non-empty array"},
		{"table value", "[mcp.a]\ncommand = \"/a\"\nrestrict.t.\"/p\" = { values = [{}] }\n", "cannot be an argument's allowed value"},
		{"destructive not strings", "[mcp.a]\ncommand = \"/a\"\ndestructive = \"rm\"\n", "x.toml:3: mcp.a.destructive: must be an array of strings"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load("x.toml", []byte(c.toml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load = %v, want %q", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Line == 0 {
				t.Fatalf("%v is not located", err)
			}
		})
	}
}

func TestCheckGuards(t *testing.T) {
	cfg, err := Load("x.toml", []byte(policyTOML))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers[0]
	schemas := map[string]string{
		"write_file": `{"type":"object","properties":{"path":{"type":"string"},"mode":{"type":"string"}}}`,
		"resize":     `{"type":"object","properties":{"size":{"type":"number"},"opts":{"type":"object","properties":{"nmae":{}}}}}`,
	}
	errs := s.CheckGuards(func(tool string) ([]byte, bool) {
		sc, ok := schemas[tool]
		return []byte(sc), ok
	})
	if len(errs) != 1 {
		t.Fatalf("CheckGuards = %v, want one error", errs)
	}
	want := `x.toml:15: mcp.fs.restrict.resize./opts/name: /opts/name names no argument of tool "resize": no property "name" in /opts (it has nmae); did you mean "nmae"?`
	if !strings.HasPrefix(errs[0].Error(), want) {
		t.Fatalf("got  %s\nwant %s", errs[0], want)
	}
	// An array's items are reached by the wildcard; an index reaches one
	// element of a tuple only.
	if why := resolveInSchema([]byte(`{"properties":{"a":{"type":"array","items":{"properties":{"b":{}}}}}}`), pointer.Tokens("/a/*/b")); why != "" {
		t.Fatal(why)
	}
	if why := resolveInSchema([]byte(`{"properties":{"a":{"type":"array","prefixItems":[{},{"properties":{"b":{}}}]}}}`), pointer.Tokens("/a/1/b")); why != "" {
		t.Fatal(why)
	}
	if why := resolveInSchema([]byte(`{"type":"object"}`), pointer.Tokens("/x")); !strings.Contains(why, "declares no properties") {
		t.Fatal(why)
	}
}

func TestUnmatchedPolicy(t *testing.T) {
	cfg, err := Load("x.toml", []byte(policyTOML))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Servers[0].UnmatchedTools(func(n string) bool { return n == "write_file" })
	want := `destructive "delete_file"|restrict "resize"`
	if strings.Join(got, "|") != want {
		t.Fatalf("UnmatchedTools = %q, want %q", got, want)
	}
}

func TestCheckArgs(t *testing.T) {
	cfg, err := Load("x.toml", []byte(`[mcp.s]
command = "/x"
restrict.t."/branch" = { values = ["main", "dev", 3, true] }
restrict.t."/name" = { pattern = "[a-z]+", optional = true }
restrict.t."/opts/n" = { min = -1.5, max = 3, optional = true }
restrict.t."/list/1" = { values = ["b"], optional = true }
restrict.t."/a~1b" = { prefix = "x", optional = true }
`))
	if err != nil {
		t.Fatal(err)
	}
	guards := cfg.Servers[0].Guards("t")
	checkCases(t, guards, []argCase{
		{`{"branch":"main"}`, ""},
		{`{"branch":3.0}`, ""},
		{`{"branch":true}`, ""},
		{`{"branch":"prod"}`, "/branch values"},
		{`{"branch":"3"}`, "/branch values"},
		{`{"branch":null}`, "/branch values"},
		{`{}`, "/branch the argument is required"},
		{`[]`, " the arguments are not a JSON object"},
		{`"x"`, " the arguments are not a JSON object"},
		{`{"branch":"dev","name":"abc"}`, ""},
		{`{"branch":"dev","name":"abc\n"}`, "/name pattern"},
		{`{"branch":"dev","name":"ab1"}`, "/name pattern"},
		{`{"branch":"dev","name":5}`, "/name pattern"},
		{`{"branch":"dev","opts":{"n":-1.5}}`, ""},
		{`{"branch":"dev","opts":{"n":3}}`, ""},
		{`{"branch":"dev","opts":{"n":3.0001}}`, "/opts/n range: must be at most 3"},
		{`{"branch":"dev","opts":{"n":-2}}`, "/opts/n range: must be at least -1.5"},
		{`{"branch":"dev","opts":{"n":"1"}}`, "/opts/n range: must be a number"},
		{`{"branch":"dev","opts":{"n":1e400}}`, "/opts/n range: must be a finite number"},
		{`{"branch":"dev","list":["a","b"]}`, ""},
		{`{"branch":"dev","list":["a","c"]}`, "/list/1 values"},
		{`{"branch":"dev","list":["a"]}`, ""},
		{`{"branch":"dev","a/b":"xy"}`, ""},
		{`{"branch":"dev","a/b":"yx"}`, "/a~1b prefix"},
		{`{"branch":"dev","a/b":"x/..\\y"}`, "/a~1b prefix: must not contain"},
		{`not json`, " the arguments are not a JSON object"},
	})
	if CheckArgs(nil, []byte("not json")) != nil {
		t.Error("a tool without guards has its arguments parsed")
	}
}
