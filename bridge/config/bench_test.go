package config

import (
	"strings"
	"testing"
)

// BenchmarkCheckArgs measures what restrict guards cost a call, on the
// 64-byte argument object of the call-path benchmarks: a tool without
// guards (its arguments are not read at all), the case rule alone
// (FoldCollision: what it would cost every call, were it applied to
// tools without guards too), and one and four guards (the case rule
// included).
func BenchmarkCheckArgs(b *testing.B) {
	args := []byte(`{"text":"` + strings.Repeat("a", 64) + `"}`)
	one := guardsFor(b, `restrict.t."/text" = { prefix = "a" }`)
	four := guardsFor(b, `restrict.t."/text" = { prefix = "a" }
restrict.t."/mode" = { values = ["x", "y"], optional = true }
restrict.t."/n" = { min = 0, max = 10, optional = true }
restrict.t."/paths/*" = { prefix = "/srv/", optional = true }`)
	for _, c := range []struct {
		name  string
		check func() bool
	}{
		{"no_guards", func() bool { return CheckArgs(nil, args) == nil }},
		{"case_rule_alone", func() bool { return FoldCollision(args) == nil }},
		{"one_guard", func() bool { return CheckArgs(one, args) == nil }},
		{"four_guards", func() bool { return CheckArgs(four, args) == nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.check() {
					b.Fatal("refused")
				}
			}
		})
	}
}

func guardsFor(b *testing.B, rules string) []Guard {
	b.Helper()
	cfg, err := Load("x.toml", []byte("[mcp.s]\ncommand = \"/x\"\n"+rules+"\n"))
	if err != nil {
		b.Fatal(err)
	}
	return cfg.Servers[0].Guards("t")
}
