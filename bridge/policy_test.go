package bridge

import (
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
)

func TestCheckGuards(t *testing.T) {
	cfg, err := config.Load("x.toml", []byte(`[mcp.s]
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
	for _, c := range []struct{ args, broken string }{
		{`{"branch":"main"}`, ""},
		{`{"branch":3.0}`, ""},
		{`{"branch":true}`, ""},
		{`{"branch":"prod"}`, "/branch values"},
		{`{"branch":"3"}`, "/branch values"},
		{`{"branch":null}`, "/branch values"},
		{`{}`, "/branch the argument is required"},
		{`[]`, "/branch the argument is required"},
		{`"x"`, "/branch the argument is required"},
		{`{"branch":"dev","name":"abc"}`, ""},
		{`{"branch":"dev","name":"abc\n"}`, "/name pattern"},
		{`{"branch":"dev","name":"ab1"}`, "/name pattern"},
		{`{"branch":"dev","name":5}`, "/name pattern"},
		{`{"branch":"dev","opts":{"n":-1.5}}`, ""},
		{`{"branch":"dev","opts":{"n":3}}`, ""},
		{`{"branch":"dev","opts":{"n":3.0001}}`, "/opts/n range: must be at most 3"},
		{`{"branch":"dev","opts":{"n":-2}}`, "/opts/n range: must be at least -1.5"},
		{`{"branch":"dev","opts":{"n":"1"}}`, "/opts/n range: must be a number"},
		{`{"branch":"dev","opts":{"n":1e400}}`, "/opts/n range: must be a number"},
		{`{"branch":"dev","list":["a","b"]}`, ""},
		{`{"branch":"dev","list":["a","c"]}`, "/list/1 values"},
		{`{"branch":"dev","list":["a"]}`, ""},
		{`{"branch":"dev","a/b":"xy"}`, ""},
		{`{"branch":"dev","a/b":"yx"}`, "/a~1b prefix"},
		{`{"branch":"dev","a/b":"x/..\\y"}`, "/a~1b prefix: must not contain"},
		{`not json`, " the arguments are not a JSON object"},
	} {
		v := checkGuards(guards, []byte(c.args))
		got := ""
		if v != nil {
			got = v.pointer + " " + v.rule
		}
		if (c.broken == "") != (v == nil) || !strings.HasPrefix(got, c.broken) {
			t.Errorf("%s: %q, want %q", c.args, got, c.broken)
		}
	}
	if checkGuards(nil, []byte("not json")) != nil {
		t.Error("a tool without guards has its arguments parsed")
	}
}

func TestDestructiveDecision(t *testing.T) {
	s := config.NewServer("s", "/x")
	s.Destructive = []string{"rm"}
	every := &Grant{servers: map[string]map[string]bool{"s": nil}}
	named := &Grant{servers: map[string]map[string]bool{"s": {"rm": true}}}
	opted := &Grant{servers: map[string]map[string]bool{"s": nil}, allowDestructive: true}
	for _, c := range []struct {
		g    *Grant
		tool string
		want string
		ok   bool
	}{
		{every, "ls", "", true},
		{every, "rm", policyDestructiveRefuse, false},
		{named, "rm", policyDestructiveNamed, true},
		{opted, "rm", policyDestructiveOptIn, true},
		{nil, "rm", policyOperator, true},
	} {
		got, ok := destructiveDecision(&s, c.g, "s", c.tool)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.tool, got, ok, c.want, c.ok)
		}
	}
}
