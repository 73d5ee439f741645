package codegen

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMangle(t *testing.T) {
	d := digest8
	for _, tc := range []struct {
		in   []string
		st   style
		want []string
	}{
		// Separators and case are spelling, not change.
		{[]string{"get-sum"}, exported, []string{"GetSum"}},
		{[]string{"get_sum"}, exported, []string{"GetSum"}},
		{[]string{"getSum"}, exported, []string{"GetSum"}},
		{[]string{"API-get-user"}, exported, []string{"APIGetUser"}},
		{[]string{"files.read", "a/b:c d"}, exported, []string{"FilesRead", "ABCD"}},
		{[]string{"create_2"}, exported, []string{"Create2"}},
		{[]string{"2fa"}, exported, []string{"Tool2fa"}},
		// Two names of one scope meeting at one identifier: both suffixed.
		{[]string{"get-sum", "getSum", "other"}, exported, []string{"GetSum_" + d("get-sum"), "GetSum_" + d("getSum"), "Other"}},
		// Loss beyond separators and case.
		{[]string{"a+b"}, exported, []string{"AB_" + d("a+b")}},
		{[]string{"résumé"}, exported, []string{"RSum_" + d("résumé")}},
		{[]string{""}, exported, []string{"Tool_" + d("")}},
		{[]string{"数据"}, exported, []string{"Tool_" + d("数据")}},
		{[]string{strings.Repeat("a", 65)}, exported, []string{"A" + strings.Repeat("a", 63) + "_" + d(strings.Repeat("a", 65))}},
		{[]string{strings.Repeat("a", 64)}, exported, []string{"A" + strings.Repeat("a", 63)}},
		// Packages: lower case, no separators, reserved names suffixed.
		{[]string{"sequential-thinking"}, pkg, []string{"sequentialthinking"}},
		{[]string{"GitHub"}, pkg, []string{"github"}},
		{[]string{"vendor"}, pkg, []string{"vendor" + d("vendor")}},
		{[]string{"9x"}, pkg, []string{"mcp9x"}},
	} {
		fallback := map[style]string{exported: "Tool", pkg: "mcp"}[tc.st]
		reserved := isPkgReserved
		if tc.st == exported {
			reserved = notReserved
		}
		got, a, _ := mangleAll(tc.in, tc.st, reserved, fallback)
		if a >= 0 || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("mangleAll(%q, %d) = %q (collision %d), want %q", tc.in, tc.st, got, a, tc.want)
		}
	}
	if _, a, b := mangleAll([]string{"x", "y", "x"}, exported, notReserved, "Tool"); a != 0 || b != 2 {
		t.Errorf("identical names: collision %d %d, want 0 2", a, b)
	}
}

func TestCleanText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "hello world", 100, "hello world"},
		{"whitespace", "  a\n\n\tb \r\n c  ", 100, "a b c"},
		{"controls", "a\x00b\x1b[31mc\x7f", 100, "ab[31mc"},
		{"bidi", "admin\u202e\u2066txt\u2069\u202c\u200f", 100, "admintxt"},
		{"separators", "a\u2028b\u2029c", 100, "a b c"},
		{"bom and zero width", "\ufeffa\u200bb\u200dc", 100, "abc"},
		{"invalid utf8", "a\xffb", 100, "a\ufffdb"},
		{"cap", "abcdefghij", 5, "abcd…"},
		{"cap exact", "abcde", 5, "abcde"},
		{"cap at space", "abc defgh", 5, "abc…"},
		{"cap runes", "ééééééé", 3, "éé…"},
		{"only hidden", "\u202e\x00", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cleanText(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("cleanText(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > tc.max {
				t.Fatalf("%d runes over the cap of %d", n, tc.max)
			}
		})
	}
	if got := wrap("aa bb cc dd", 5); strings.Join(got, "|") != "aa bb|cc dd" {
		t.Errorf("wrap = %q", got)
	}
	if got := wrap(strings.Repeat("x", 9)+" y", 5); strings.Join(got, "|") != "xxxxxxxxx|y" {
		t.Errorf("wrap of a long word = %q", got)
	}
	// Lines are cut out of clean text; text with runs of spaces (which
	// callers do not pass) still wraps to single-spaced words.
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"", 5, ""},
		{"  ", 5, ""},
		{"aa  bb cc", 5, "aa bb|cc"},
		{" aa bb  cc dd ", 8, "aa bb cc|dd"},
		{"aa bb  cc dd", 20, "aa bb cc dd"},
		{"é é é é", 3, "é é|é é"},
		{"a bbbbbbb c", 3, "a|bbbbbbb|c"},
	} {
		if got := strings.Join(wrap(tc.in, tc.width), "|"); got != tc.want {
			t.Errorf("wrap(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
}

// typeString renders a planned type compactly for the table below.
func typeString(t typ) string {
	var s string
	switch t.kind {
	case kAny:
		s = "any"
	case kString:
		s = "string"
	case kInteger:
		s = "int"
		if t.unsigned {
			s = "uint"
		}
	case kNumber:
		s = "number"
	case kBoolean:
		s = "bool"
	case kList:
		s = "[]" + typeString(*t.elem)
	case kMap:
		s = "map:" + typeString(*t.elem)
	case kNamed:
		s = map[defKind]string{dRecord: "record", dEnum: "enum", dUnion: "union"}[t.def.kind] + ":" + strings.Join(t.def.hint, ".")
	}
	if t.nullable {
		s += "?"
	}
	return s
}

func TestPlanSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema    string
		whole, optional bool   // taken whole; and then, may be left out
		fields          string // "wire:type[!]" for each field, ! when required
	}{
		{"scalars", `{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},"l":{"type":"array","items":{"type":"integer"}}},"required":["b","s"]}`,
			false, false, "s:string! b:bool! i:int n:number l:[]int"},
		{"string enum", `{"type":"object","properties":{"e":{"enum":["a","b"]}}}`, false, false, "e:enum:e"},
		{"integer enum", `{"type":"object","properties":{"e":{"type":"integer","enum":[1,2]}}}`, false, false, "e:enum:e"},
		{"nullable", `{"type":"object","properties":{"x":{"type":["string","null"]}},"required":["x"]}`, false, false, "x:string?!"},
		{"nullable via anyOf", `{"type":"object","properties":{"x":{"anyOf":[{"type":"integer"},{"type":"null"}]}}}`, false, false, "x:int?"},
		{"ref", `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/s"}}}`, false, false, "x:string"},
		{"ref cycle", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}`, false, false, "x:any!"},
		{"recursive record", `{"type":"object","$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}}}},"properties":{"x":{"$ref":"#/$defs/N"}}}`, false, false, "x:record:N"},
		{"ref escapes", `{"type":"object","$defs":{"a/b":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a~1b"}}}`, false, false, "x:string"},
		{"ref into array", `{"type":"object","d":[{"type":"string"}],"properties":{"x":{"$ref":"#/d/0"},"y":{"$ref":"#/d/1"}}}`, false, false, "x:string y:any"},
		{"array of objects", `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"object","properties":{"a":{"type":"string"}}}}},"required":["xs"]}`, false, false, "xs:[]record:xs.item!"},
		{"open object", `{"type":"object","properties":{"m":{"type":"object"}}}`, false, false, "m:map:any"},
		{"map", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"number"}}}}`, false, false, "m:map:number"},
		{"discriminated", `{"type":"object","properties":{"u":{"oneOf":[{"type":"object","properties":{"k":{"const":"a"}}},{"type":"object","properties":{"k":{"const":"b"}}}]}}}`, false, false, "u:union:u"},
		{"const union", `{"type":"object","properties":{"u":{"oneOf":[{"const":"a"},{"const":"b"}]}}}`, false, false, "u:enum:u"},
		{"mixed enum", `{"type":"object","properties":{"e":{"enum":[1,"a"]}}}`, false, false, "e:any"},
		{"huge integer enum", `{"type":"object","properties":{"e":{"type":"integer","enum":[1,18446744073709551616]}}}`, false, false, "e:any"},
		{"tuple", `{"type":"object","properties":{"t":{"type":"array","items":[{"type":"string"}]}}}`, false, false, "t:any"},
		{"required undeclared", `{"type":"object","properties":{},"required":["ghost"]}`, false, false, "ghost:any!"},
		{"top allOf", `{"type":"object","allOf":[{"properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}}}]}`, false, false, "a:string! b:int"},
		{"empty properties", `{"type":"object","properties":{}}`, false, false, ""},
		// No properties and none required: no arguments when closed or
		// declared empty; else taken whole, and a call may leave them out.
		{"no properties", `{"type":"object"}`, true, true, ""},
		{"no properties, closed", `{"type":"object","additionalProperties":false}`, false, false, ""},
		{"no properties, open", `{"type":"object","additionalProperties":true}`, true, true, ""},
		{"no properties, a map", `{"type":"object","properties":{},"additionalProperties":{"type":"string"}}`, true, true, ""},
		{"no properties, patterns", `{"type":"object","properties":{},"patternProperties":{"^x":{}}}`, true, true, ""},
		{"no properties, required", `{"type":"object","required":["q"]}`, true, false, ""},
		{"no properties, closed, required", `{"type":"object","additionalProperties":false,"required":["q"]}`, true, false, ""},
		{"not object", `[1]`, true, false, ""},
		{"top anyOf", `{"anyOf":[],"properties":{}}`, true, false, ""},
		{"top type array", `{"type":["object","null"],"properties":{}}`, true, false, ""},
		{"duplicate key", `{"type":"object","properties":{"a":{"type":"string","type":"object"}}}`, true, false, ""},
		{"trailing data", `{"type":"object","properties":{}} {}`, true, false, ""},
		{"invalid", `{"type":`, true, false, ""},
		{"empty", ``, true, false, ""},
		{"deep", strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100), true, false, ""},
		{"required not strings", `{"type":"object","properties":{},"required":[1]}`, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := planTool(&Tool{Name: "t", InputSchema: []byte(tc.schema)})
			if (tp.whole != "") != tc.whole || tp.optional != tc.optional {
				t.Fatalf("whole = %q, optional %v; want whole %v, optional %v", tp.whole, tp.optional, tc.whole, tc.optional)
			}
			var got []string
			if tp.args != nil {
				for _, f := range tp.args.fields {
					s := f.wire + ":" + typeString(f.typ)
					if f.required {
						s += "!"
					}
					got = append(got, s)
					if untypedReason(f.typ) == "" && strings.Contains(typeString(f.typ), "any") && f.typ.kind != kMap {
						t.Errorf("field %s is untyped without a reason", f.wire)
					}
				}
			}
			if strings.Join(got, " ") != tc.fields {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tc.fields)
			}
		})
	}
	big := `{"type":"object","properties":{"x":{"type":"string","description":"` + strings.Repeat("x", maxSchemaBytes) + `"}}}`
	if tp := planTool(&Tool{Name: "t", InputSchema: []byte(big)}); tp.whole == "" {
		t.Error("an oversized schema was typed")
	}
	// Bounded: a schema that would plan ever more types stops at maxDefs.
	var props []string
	for i := range 2 * maxDefs {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"object","properties":{"a":{"type":"string"}}}`, i))
	}
	wide := `{"type":"object","properties":{"o":{"type":"object","properties":{` + strings.Join(props[:maxFields], ",") + `}},"q":{"type":"object","properties":{` + strings.Join(props[maxFields:], ",") + `}}}}`
	if tp := planTool(&Tool{Name: "t", InputSchema: []byte(wide)}); len(tp.defs) > maxDefs+1 {
		t.Errorf("%d named types planned", len(tp.defs))
	}
}

// TestVerifyRejects proves each verification check can fail: the source
// of a tiny façade is altered one way per case.
func TestVerifyRejects(t *testing.T) {
	g, err := Generate("s", []Tool{{Name: "t", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := intent{pkg: "s", funcs: map[string]bool{"T": true}, types: map[string]bool{"TArgs": true}, consts: map[string]bool{}, methods: map[string]bool{}}
	if err := verifyGo(g.Source, want); err != nil {
		t.Fatalf("the genuine source fails: %v", err)
	}
	src := string(g.Source)
	for _, tc := range []struct{ name, src string }{
		{"parse", src + "\nfunc {"},
		{"directive", strings.Replace(src, "// T calls", "//go:linkname x y\n// T calls", 1)},
		{"line directive", strings.Replace(src, "// T calls", "//line x.go:1\n// T calls", 1)},
		{"block comment", strings.Replace(src, "// T calls", "/* x */\n// T calls", 1)},
		{"build constraint", strings.Replace(src, "// T calls", "// +build ignore\n// T calls", 1)},
		{"init", src + "\nfunc init() {}\n"},
		{"extra func", src + "\nfunc Evil() {}\n"},
		{"var", src + "\nvar X = 1\n"},
		{"method", src + "\nfunc (TArgs) M() {}\n"},
		{"marker with a body", src + "\nfunc (TArgs) isT() { panic(1) }\n"},
		{"const", src + "\nconst X = 1\n"},
		{"import", strings.Replace(src, "\t\"context\"\n", "\t\"context\"\n\t\"os\"\n", 1)},
		{"cgo", strings.Replace(src, "import (", "import \"C\"\n\nimport (", 1)},
		{"package", strings.Replace(src, "package s\n", "package t\n", 1)},
		{"missing decl", src[:strings.Index(src, "\n// TArgs is")+1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyGo([]byte(tc.src), want)
			var ve *VerifyError
			if !errors.As(err, &ve) || !errors.Is(err, ErrVerification) {
				t.Fatalf("accepted (err %v)", err)
			}
		})
	}
	// Each of these parses and declares what was intended; only the
	// layout check stands between it and the caller.
	for _, tc := range []struct{ name, src string }{
		{"two spaces", strings.Replace(src, "\tc, err := ", "\tc, err  := ", 1)},
		{"trailing space", strings.Replace(src, "\tc, err := capwire.Shared(ctx)\n", "\tc, err := capwire.Shared(ctx) \n", 1)},
		{"indented too far", strings.Replace(src, "\tc, err := ", "\t\tc, err := ", 1)},
		{"indented too little", strings.Replace(src, "\t\treturn nil, err", "\treturn nil, err", 1)},
		{"indented with spaces", strings.Replace(src, "\tc, err := ", "\t c, err := ", 1)},
		{"two blank lines", strings.Replace(src, "\n\n// T calls", "\n\n\n// T calls", 1)},
		{"blank line at the end", src + "\n"},
		{"no new line at the end", strings.TrimSuffix(src, "\n")},
		{"comment after code", strings.Replace(src, "\tc, err := capwire.Shared(ctx)", "\tc, err := capwire.Shared(ctx) // x", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.src == src {
				t.Fatal("the case alters nothing")
			}
			err := verifyGo([]byte(tc.src), want)
			var ve *VerifyError
			if !errors.As(err, &ve) || !strings.Contains(ve.Reason, "layout") && !strings.Contains(ve.Reason, "new line") {
				t.Fatalf("not refused for its layout (err %v)", err)
			}
		})
	}
}

// TestVerifyConstLayout: a const block must be aligned as gofmt aligns
// it, one space past its longest name, and no further.
func TestVerifyConstLayout(t *testing.T) {
	g, err := Generate("s", []Tool{{Name: "t", InputSchema: []byte(`{"type":"object","properties":{"a":{"enum":["x","longer"]}}}`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := intent{pkg: "s", funcs: map[string]bool{"T": true}, types: map[string]bool{"TArgs": true, "TA": true},
		consts: map[string]bool{"TAX": true, "TALonger": true}, methods: map[string]bool{}}
	src := string(g.Source)
	if !strings.Contains(src, "\tTAX      TA = \"x\"\n\tTALonger TA = \"longer\"\n") {
		t.Fatalf("the const block is not as gofmt aligns it:\n%s", src)
	}
	if err := verifyGo(g.Source, want); err != nil {
		t.Fatalf("the genuine source fails: %v", err)
	}
	for name, bad := range map[string]string{
		"one column too far":  strings.ReplaceAll(src, "TAX      TA", "TAX       TA"),
		"misaligned":          strings.Replace(src, "TAX      TA", "TAX     TA", 1),
		"aligned one too far": strings.NewReplacer("TAX      TA", "TAX       TA", "TALonger TA", "TALonger  TA").Replace(src),
	} {
		var ve *VerifyError
		if err := verifyGo([]byte(bad), want); !errors.As(err, &ve) {
			t.Errorf("%s: accepted (err %v)", name, err)
		}
	}
}

// TestPlanFanOut: schemas whose references fan out (each type using the
// next twice, thirty deep) plan and emit in bounded work, whether the
// shared type is a record (planned once) or an allOf (re-planned at each
// use, stopped by the step budget).
func TestPlanFanOut(t *testing.T) {
	for _, shape := range []string{
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`,
		`{"allOf":[{"properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}]}`,
	} {
		var defs []string
		for i := range 30 {
			defs = append(defs, fmt.Sprintf(`"d%d":`+shape, i, i+1, i+1))
		}
		defs = append(defs, `"d30":{"type":"string"}`)
		schema := `{"type":"object","$defs":{` + strings.Join(defs, ",") + `},"properties":{"root":{"$ref":"#/$defs/d0"}}}`
		g, err := Generate("fan", []Tool{{Name: "t", InputSchema: []byte(schema), OutputSchema: []byte(schema)}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := typeCheck(g.Source); err != nil {
			t.Fatal(err)
		}
	}
}
