package config

import (
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// guardsOf loads a config holding restrict guards for tool t of server s
// and returns them.
func guardsOf(t *testing.T, rules string) []Guard {
	t.Helper()
	cfg, err := Load("x.toml", []byte("[mcp.s]\ncommand = \"/x\"\n"+rules))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Servers[0].Guards("t")
}

type argCase struct{ args, broken string }

func checkCases(t *testing.T, guards []Guard, cases []argCase) {
	t.Helper()
	for _, c := range cases {
		v := CheckArgs(guards, []byte(c.args))
		got := ""
		if v != nil {
			got = v.Pointer + " " + v.Rule
		}
		if (c.broken == "") != (v == nil) || !strings.HasPrefix(got, c.broken) {
			t.Errorf("%s: %q, want %q", c.args, got, c.broken)
		}
	}
}

// A guard cannot be sidestepped by a key that a case-insensitive server
// (Go's encoding/json, .NET's defaults) reads as the guarded one: a case
// variant beside the guarded key, a case variant alone, on the way to a
// nested guard, under Unicode folding (the Kelvin sign is K to Go), and a
// collision anywhere in a guarded call's arguments.
func TestGuardCaseFolding(t *testing.T) {
	guards := guardsOf(t, `restrict.t."/path" = { prefix = "/srv/data/" }
restrict.t."/mode" = { values = ["append", "create"], optional = true }
restrict.t."/opts/kind" = { values = ["a"], optional = true }
`)
	checkCases(t, guards, []argCase{
		{`{"path":"/srv/data/a"}`, ""},
		{`{"path":"/srv/data/a","mode":"append"}`, ""},
		// The attack: the guard reads path, the server reads PATH.
		{`{"path":"/srv/data/a","PATH":"/etc/passwd"}`, `/PATH keys "path" and "PATH" differ only in case`},
		{`{"PATH":"/etc/passwd","path":"/srv/data/a"}`, `/path keys "PATH" and "path" differ only in case`},
		{`{"path":"/srv/data/a","mode":"append","MODE":"overwrite"}`, `/MODE keys "mode" and "MODE"`},
		// An optional guard is not skipped by spelling its key otherwise.
		{`{"path":"/srv/data/a","Mode":"overwrite"}`, `/Mode "Mode" differs from the guarded argument "mode" only in case`},
		{`{"Path":"/srv/data/a"}`, `/Path "Path" differs from the guarded argument "path" only in case`},
		// Unicode simple folding: U+212A KELVIN SIGN folds to k.
		{"{\"path\":\"/srv/data/a\",\"opts\":{\"kind\":\"a\",\"\u212aind\":\"b\"}}", "/opts/\u212aind keys \"kind\" and \"\u212aind\""},
		{"{\"path\":\"/srv/data/a\",\"opts\":{\"\u212aind\":\"b\"}}", "/opts/\u212aind \"\u212aind\" differs from the guarded argument \"kind\""},
		// A parent spelled twice.
		{`{"path":"/srv/data/a","opts":{"kind":"a"},"OPTS":{"kind":"b"}}`, `/OPTS keys "opts" and "OPTS"`},
		// Anywhere in a guarded call: the server may bind any of it.
		{`{"path":"/srv/data/a","extra":[{"id":1,"ID":2}]}`, `/extra/0/ID keys "id" and "ID"`},
		// Distinct keys that merely look alike are fine.
		{`{"path":"/srv/data/a","paths":1,"pat":2}`, ""},
	})
	// A tool without guards is not read at all.
	if v := CheckArgs(nil, []byte(`{"path":1,"PATH":2}`)); v != nil {
		t.Errorf("a tool without guards: %+v", v)
	}
	if v := FoldCollision([]byte(`{"a":{"x":1,"X":2}}`)); v == nil || v.Pointer != "/a/X" {
		t.Errorf("FoldCollision = %+v", v)
	}
}

// Every pair of strings equal under strings.EqualFold folds to the same
// key; so do the pairs .NET's invariant upper-casing joins beyond it.
func TestFoldAgreesWithEqualFold(t *testing.T) {
	pairs := [][2]string{{"path", "PATH"}, {"kind", "\u212aind"}, {"size", "\u017fize"}, {"σς", "ΣΣ"}, {"ı", "I"}, {"İ", "i"}, {"straße", "STRAßE"}}
	for _, p := range pairs {
		if !foldEqual(p[0], p[1]) {
			t.Errorf("%q and %q do not fold together", p[0], p[1])
		}
	}
	if foldEqual("path", "paths") || foldEqual("a", "b") {
		t.Error("distinct keys fold together")
	}
	// Every member of a rune's simple-folding orbit folds alike, so two
	// strings strings.EqualFold calls equal (rune by rune, within orbits)
	// fold to the same key.
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := foldRune(r)
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if foldRune(o) != want {
				t.Fatalf("%U folds to %U, but %U of its orbit to %U", r, want, o, foldRune(o))
			}
		}
	}
}

// "/paths/*" guards every element; "/paths/0" would guard the first only,
// so a guard like that is refused against a list's schema.
func TestGuardWildcard(t *testing.T) {
	guards := guardsOf(t, `restrict.t."/paths/*" = { prefix = "/srv/data/" }
restrict.t."/items/*/name" = { pattern = "[a-z]+", optional = true }
`)
	checkCases(t, guards, []argCase{
		{`{"paths":["/srv/data/a","/srv/data/b"]}`, ""},
		{`{"paths":[]}`, ""},
		{`{"paths":["/srv/data/a","/etc/shadow"]}`, "/paths/1 prefix"},
		{`{"paths":"/srv/data/a"}`, "/paths must be an array, not a string"},
		{`{"paths":{"0":"/etc/shadow"}}`, "/paths must be an array: the guard applies to each"},
		{`{}`, "/paths/* the argument is required"},
		{`{"paths":["/srv/data/a"],"items":[{"name":"ok"},{},{"name":"BAD"}]}`, "/items/2/name pattern"},
		{`{"paths":["/srv/data/a"],"items":[{"name":"ok"},"x"]}`, "/items/1 must be an object with member \"name\", not a string"},
	})

	schema := `{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}},"path":{"type":"string"}}}`
	for _, c := range []struct{ rules, want string }{
		{`restrict.t."/paths/*" = { prefix = "/srv/" }`, ""},
		{`restrict.t."/paths/0" = { prefix = "/srv/" }`, "/paths/0 guards element 0 of the list /paths only, and leaves every other element unguarded; write /paths/* to guard each element"},
		{`restrict.t."/path/*" = { prefix = "/srv/" }`, "/path is not declared as an array (its schema has no items), so /path/* can match nothing"},
	} {
		cfg, err := Load("x.toml", []byte("[mcp.s]\ncommand = \"/x\"\n"+c.rules+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		errs := cfg.Servers[0].CheckGuards(func(string) ([]byte, bool) { return []byte(schema), true })
		got := ""
		if len(errs) > 0 {
			got = errs.Error()
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.rules, got, c.want)
		}
	}
}

// min, max and numeric values compare exactly: a float64 reads 2^53+1 as
// 2^53, and 1.0000000000000001 as 1.
func TestGuardExactNumbers(t *testing.T) {
	guards := guardsOf(t, `restrict.t."/n" = { max = 9007199254740992, min = -9007199254740992 }
restrict.t."/v" = { values = [1, 0.1, "x"], optional = true }
restrict.t."/f" = { min = 0.1, max = 1e21, optional = true }
`)
	checkCases(t, guards, []argCase{
		{`{"n":9007199254740992}`, ""},
		{`{"n":9007199254740993}`, "/n range: must be at most 9007199254740992"},
		{`{"n":9007199254740992.5}`, "/n range: must be at most"},
		{`{"n":90071992547409921e-1}`, "/n range: must be at most"},
		{`{"n":-9007199254740993}`, "/n range: must be at least -9007199254740992"},
		{`{"n":0,"v":1}`, ""},
		{`{"n":0,"v":1.0}`, ""},
		{`{"n":0,"v":10e-1}`, ""},
		{`{"n":0,"v":1.0000000000000001}`, "/v values"},
		{`{"n":0,"v":0.1}`, ""},
		{`{"n":0,"v":0.1000000000000000055511151231257827}`, "/v values"},
		{`{"n":0,"f":0.1}`, ""},
		{`{"n":0,"f":0.09999999999999999999}`, "/f range: must be at least 0.1"},
		{`{"n":0,"f":1e21}`, ""},
		{`{"n":0,"f":1.0000000000000000001e21}`, "/f range: must be at most 1e+21"},
		{`{"n":0,"f":1e999999999999999999999}`, "/f range: must be a finite number"},
		{`{"n":-0}`, ""},
	})
}

// An optional guard allows only absence: a parent of another shape (an
// array, a string, null) is not "absent", since a server may read it its
// own way.
func TestGuardOptionalShapes(t *testing.T) {
	guards := guardsOf(t, `restrict.t."/opts/mode" = { values = ["safe"], optional = true }
`)
	checkCases(t, guards, []argCase{
		{`{}`, ""},
		{`{"opts":{}}`, ""},
		{`{"opts":{"mode":"safe"}}`, ""},
		{`{"opts":{"mode":"unsafe"}}`, "/opts/mode values"},
		{`{"opts":["unsafe"]}`, `/opts must be an object with member "mode", not an array`},
		{`{"opts":"mode=unsafe"}`, `/opts must be an object with member "mode", not a string`},
		{`{"opts":null}`, `/opts must be an object with member "mode", not null`},
	})
}

// prefix is lexical; what a server might decode or normalise into a step
// out of the prefix is refused rather than guessed at.
func TestGuardPrefixEscapes(t *testing.T) {
	guards := guardsOf(t, `restrict.t."/p" = { prefix = "/srv/data/" }
`)
	checkCases(t, guards, []argCase{
		{`{"p":"/srv/data/a.txt"}`, ""},
		{`{"p":"/srv/data/100%25x"}`, "/p prefix: must not contain a percent-encoded"},
		{`{"p":"/srv/data/%2e%2e/etc/passwd"}`, "/p prefix: must not contain a percent-encoded"},
		{`{"p":"/srv/data/%2E%2E%2Fetc"}`, "/p prefix: must not contain a percent-encoded"},
		{`{"p":"/srv/data/..\\etc"}`, `/p prefix: must not contain a ".." segment`},
		{"{\"p\":\"/srv/data/\uff0e\uff0e/etc\"}", "/p prefix: must not contain U+FF0E"},
		{"{\"p\":\"/srv/data/\u2025/etc\"}", "/p prefix: must not contain U+2025"},
		{`{"p":"/srv/data/a\u0000.txt"}`, "/p prefix: must not contain a NUL"},
		{"{\"p\":\"/srv/data/caf\u00e9\"}", ""},
	})
}

// The exact comparison agrees with math/big on every pair of numbers the
// fuzzer finds, within exponents big can afford.
func FuzzDecimal(f *testing.F) {
	for _, s := range [][2]string{{"1", "1.0"}, {"9007199254740993", "9007199254740992"}, {"-0", "0e5"}, {"1e-400", "0"}, {"0.1", "1e-1"}, {"-12.5e3", "-12500"}, {"123456789012345678901234567890", "1.2345678901234567890123456789e29"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		da, oka := parseDecimal(a)
		db, okb := parseDecimal(b)
		ra, rokA := ratOf(a)
		rb, rokB := ratOf(b)
		if oka != rokA || okb != rokB {
			t.Fatalf("parse %q: %v (big %v); %q: %v (big %v)", a, oka, rokA, b, okb, rokB)
		}
		if !oka || !okb || ra == nil || rb == nil {
			return
		}
		if got, want := da.cmp(db), ra.Cmp(rb); got != want {
			t.Fatalf("cmp(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}

// ratOf reads s as parseDecimal's grammar, with math/big for the value;
// nil (but ok) when the exponent is too large for big to be cheap.
func ratOf(s string) (*big.Rat, bool) {
	if !decimalSyntax(s) {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 64)
		if err != nil || e > 4000 || e < -4000 {
			return nil, true
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, false
	}
	return r, true
}

func decimalSyntax(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	d := 0
	for i < len(s) && isDigit(s[i]) {
		i, d = i+1, d+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		f := 0
		for i < len(s) && isDigit(s[i]) {
			i, f = i+1, f+1
		}
		if f == 0 {
			return false
		}
		d += f
	}
	if d == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := 0
		for i < len(s) && isDigit(s[i]) {
			i, e = i+1, e+1
		}
		if e == 0 {
			return false
		}
	}
	return i == len(s)
}

// Guards evaluated on arbitrary arguments never panic, and a call they
// pass has no two keys that fold together.
func FuzzCheckArgs(f *testing.F) {
	for _, s := range []string{`{"path":"/srv/data/a","PATH":"/etc"}`, `{"paths":["/srv/data/a","/etc"]}`, `{"opts":{"mode":"x"}}`, `{"n":1e400}`, `[]`, `{"a":{"b":[{"c":1}]}}`} {
		f.Add(s)
	}
	cfg, err := Load("x.toml", []byte(`[mcp.s]
command = "/x"
restrict.t."/path" = { prefix = "/srv/data/", optional = true }
restrict.t."/paths/*" = { prefix = "/srv/data/", optional = true }
restrict.t."/opts/mode" = { values = ["x", 1, true], optional = true }
restrict.t."/n" = { min = -1.5, max = 1e3, optional = true }
`))
	if err != nil {
		f.Fatal(err)
	}
	guards := cfg.Servers[0].Guards("t")
	f.Fuzz(func(t *testing.T, args string) {
		v := CheckArgs(guards, []byte(args))
		if v == nil && FoldCollision([]byte(args)) != nil {
			t.Fatalf("%q passed with keys that fold together", args)
		}
		if v != nil && !utf8.ValidString(v.Rule) {
			t.Fatalf("rule %q is not UTF-8", v.Rule)
		}
	})
}
