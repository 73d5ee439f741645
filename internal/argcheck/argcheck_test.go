package argcheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func mp(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const memorySchema = `{"type":"object","properties":{"entities":{"type":"array","items":{"type":"object",
 "properties":{"name":{"type":"string","description":"The name"},"entityType":{"type":"string"},
 "observations":{"type":"array","items":{"type":"string"}}},"required":["name","entityType","observations"],
 "additionalProperties":false}}},"required":["entities"],"additionalProperties":false,
 "$schema":"http://json-schema.org/draft-07/schema#"}`

const rangesSchema = `{"type":"object","properties":{
 "count":{"type":"integer","minimum":1,"maximum":10},
 "ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
 "old":{"type":"number","minimum":0,"exclusiveMinimum":true},
 "name":{"type":["string","null"],"minLength":2,"maxLength":4},
 "mode":{"enum":["fast","deep",3]},
 "kind":{"const":"x"},
 "tags":{"type":"array","minItems":1,"maxItems":2},
 "extra":{"type":"object","additionalProperties":{"type":"boolean"}},
 "never":false}}`

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		args         any
		path, want   string // "" path and want: accepted
	}{
		{"memory ok", memorySchema, map[string]any{"entities": []any{map[string]any{"name": "a", "entityType": "b", "observations": []any{"c"}}}}, "", ""},
		{"memory nil slice", memorySchema, map[string]any{"entities": []any{map[string]any{"name": "a", "entityType": "b", "observations": nil}}}, "/entities/0/observations", "an array"},
		{"memory missing", memorySchema, map[string]any{"entities": []any{map[string]any{"name": "a", "observations": []any{}}}}, "/entities/0/entityType", "required"},
		{"memory extra key", memorySchema, map[string]any{"entities": []any{}, "x/y": 1}, "/x~1y", `allows only "entities"`},
		{"memory wrong type", memorySchema, map[string]any{"entities": "all"}, "/entities", "an array"},
		{"memory empty args", memorySchema, map[string]any{}, "/entities", "required"},
		{"int in range", rangesSchema, map[string]any{"count": 10}, "", ""},
		{"int as integral float", rangesSchema, map[string]any{"count": 3.0}, "", ""},
		{"int fraction", rangesSchema, map[string]any{"count": 2.5}, "/count", "an integer"},
		{"int over", rangesSchema, map[string]any{"count": 11}, "/count", "<= 10"},
		{"int under", rangesSchema, map[string]any{"count": 0}, "/count", ">= 1"},
		{"int negative", rangesSchema, map[string]any{"count": -5}, "/count", ">= 1"},
		{"int huge", rangesSchema, map[string]any{"count": uint64(1) << 63}, "/count", "<= 10"},
		{"string for int", rangesSchema, map[string]any{"count": "3"}, "/count", "an integer"},
		{"exclusive ok", rangesSchema, map[string]any{"ratio": 0.5}, "", ""},
		{"exclusive edge", rangesSchema, map[string]any{"ratio": 1}, "/ratio", "< 1"},
		{"exclusive low edge", rangesSchema, map[string]any{"ratio": 0.0}, "/ratio", "> 0"},
		{"draft 4 exclusive", rangesSchema, map[string]any{"old": 0}, "/old", "> 0"},
		{"nullable null", rangesSchema, map[string]any{"name": nil}, "", ""},
		{"length in code points", rangesSchema, map[string]any{"name": "éé"}, "", ""},
		{"too short", rangesSchema, map[string]any{"name": "é"}, "/name", "2..4 characters"},
		{"too long", rangesSchema, map[string]any{"name": "abcde"}, "/name", "2..4 characters"},
		{"enum ok", rangesSchema, map[string]any{"mode": "deep"}, "", ""},
		{"enum number", rangesSchema, map[string]any{"mode": 3.0}, "", ""},
		{"enum miss", rangesSchema, map[string]any{"mode": "slow"}, "/mode", `one of "fast", "deep", 3`},
		{"const miss", rangesSchema, map[string]any{"kind": "y"}, "/kind", `the constant "x"`},
		{"items count", rangesSchema, map[string]any{"tags": []any{}}, "/tags", "1..2 items"},
		{"additional schema", rangesSchema, map[string]any{"extra": map[string]any{"a": true, "b": "no"}}, "/extra/b", "a boolean"},
		{"false schema", rangesSchema, map[string]any{"never": 1}, "/never", "no value"},
		{"undeclared open", rangesSchema, map[string]any{"anything": map[string]any{"deep": []any{1}}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			f := s.Check(mp(t, tc.args))
			switch {
			case tc.path == "" && f != nil:
				t.Fatalf("refused: %v", f)
			case tc.path == "":
			case f == nil:
				t.Fatalf("accepted, want a fault at %s", tc.path)
			case f.Path != tc.path || !strings.Contains(f.Want, tc.want):
				t.Fatalf("fault %v; want at %s wanting %q", f, tc.path, tc.want)
			}
		})
	}
}

// A schema argcheck cannot judge exactly is not compiled, so its tool
// is forwarded unchecked; one it can is.
func TestCompileRefuses(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}`,
		`{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"number"}]}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":[{"type":"string"}]}}}`,
		`{"type":"object","properties":{"a":{"type":"number","multipleOf":2}}}`,
		`{"type":"object","properties":{"a":{"enum":[{"x":1}]}}}`,
		`{"type":"object","properties":{"a":{"type":"date"}}}`,
		`{"type":"string"}`,
		`false`,
		`{"type":"object","properties":{"a":{"minimum":1,"exclusiveMinimum":2}}}`,
		`not json`,
		strings.Repeat(`{"type":"object","properties":{"a":`, 40) + `{}` + strings.Repeat(`}}`, 40),
	} {
		if s, err := Compile([]byte(schema)); s != nil || err == nil {
			t.Errorf("compiled %.80s", schema)
		} else if schema != "not json" && !errors.Is(err, errUnsupported) {
			t.Errorf("%.80s: %v", schema, err)
		}
	}
	for _, schema := range []string{
		`{}`,
		`{"type":"object"}`,
		`{"type":"object","properties":{"a":{"type":"string","format":"uri","description":"x","default":"y","x-vendor":1}},"$schema":"x","title":"t"}`,
	} {
		if s, err := Compile([]byte(schema)); s == nil || err != nil {
			t.Errorf("not compiled: %s: %v", schema, err)
		}
	}
}

// A nil Schema checks nothing.
func TestNilSchema(t *testing.T) {
	var s *Schema
	if f := s.Check([]byte{0x80}); f != nil {
		t.Fatal(f)
	}
}

// The 64-byte call of the bridge's call-path benchmark, against the kind
// of schema an npm server declares: what checking adds to every call.
func BenchmarkCheck(b *testing.B) {
	s, err := Compile([]byte(`{"type":"object","properties":{"text":{"type":"string","description":"the text"},"count":{"type":"integer","minimum":1,"maximum":100}},"required":["text"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	args := mp(b, map[string]any{"text": strings.Repeat("x", 40), "count": 7})
	b.ReportAllocs()
	for b.Loop() {
		if f := s.Check(args); f != nil {
			b.Fatal(f)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(memorySchema), mp(f, map[string]any{"entities": []any{map[string]any{"name": "a"}}}))
	f.Add([]byte(rangesSchema), mp(f, map[string]any{"count": 3, "name": "ab", "extra": map[string]any{"x": false}}))
	f.Add([]byte(`{"type":"object","additionalProperties":false}`), []byte{0x81, 0xa1, 'a', 0xc0})
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		s, err := Compile(schema)
		if err != nil {
			return
		}
		// Total on any bytes; the same answer twice; a fault names a
		// pointer ("" or starting with "/") and what was wanted.
		a, b := s.Check(args), s.Check(args)
		if (a == nil) != (b == nil) || a != nil && *a != *b {
			t.Fatalf("two checks differ: %v, %v", a, b)
		}
		if a != nil && (a.Path != "" && a.Path[0] != '/' || a.Want == "" || a.Got == "") {
			t.Fatalf("fault %+v", a)
		}
	})
}
