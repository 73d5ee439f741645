package codegen

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMangle(t *testing.T) {
	d := digest8
	for _, tc := range []struct {
		in   string
		st   style
		want string
	}{
		{"create_issue", exported, "CreateIssue"},
		{"createIssue", exported, "CreateIssue_" + d("createIssue")},
		{"create-issue", exported, "CreateIssue_" + d("create-issue")},
		{"API-get-user", exported, "APIGetUser_" + d("API-get-user")},
		{"read", exported, "Read"},
		{"a_1", exported, "A1_" + d("a_1")},
		{"a1", exported, "A1"},
		{"create__issue", exported, "CreateIssue_" + d("create__issue")},
		{"_x", exported, "X_" + d("_x")},
		{"2fa", exported, "Tool2fa_" + d("2fa")},
		{"", exported, "Tool_" + d("")},
		{"数据", exported, "Tool_" + d("数据")},
		{strings.Repeat("a", 33), exported, "A" + strings.Repeat("a", 31) + "_" + d(strings.Repeat("a", 33))},
		{strings.Repeat("a", 32), exported, "A" + strings.Repeat("a", 31)},
		{"includeImage", field, "IncludeImage"},
		{"include_image", field, "IncludeImage_" + d("include_image")},
		{"X", field, "X_" + d("X")},
		{"file_path", local, "file_path"},
		{"filePath", local, "filePath"},
		{"file-path", local, "filePath_" + d("file-path")},
		{"type", local, "type_" + d("type")},
		{"ctx", local, "ctx_" + d("ctx")},
		{"_", local, "__" + d("_")},
		{"", local, "param_" + d("")},
		{"Name", local, "Name"},
		{"github", pkg, "github"},
		{"GitHub", pkg, "github" + d("GitHub")},
		{"sequential-thinking", pkg, "sequentialthinking" + d("sequential-thinking")},
		{"context", pkg, "context" + d("context")},
		{"9x", pkg, "mcp9x" + d("9x")},
	} {
		fallback := map[style]string{exported: "Tool", field: "Field", local: "param", pkg: "mcp"}[tc.st]
		reserved := isGoReserved
		if tc.st == exported || tc.st == field {
			reserved = notReserved
		}
		if got := mangle(tc.in, tc.st, reserved, fallback); got != tc.want {
			t.Errorf("mangle(%q, %d) = %q, want %q", tc.in, tc.st, got, tc.want)
		}
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
}

func TestPlanSchema(t *testing.T) {
	type p = struct {
		wire     string
		kind     kind
		list     bool
		required bool
	}
	for _, tc := range []struct {
		name, schema string
		whole        bool
		params       []p
	}{
		{"typed subset", `{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},"l":{"type":"array","items":{"type":"integer"}}},"required":["b","s"]}`,
			false, []p{{"s", kString, false, true}, {"b", kBoolean, false, true}, {"i", kInteger, false, false}, {"n", kNumber, false, false}, {"l", kInteger, true, false}}},
		{"string enum", `{"type":"object","properties":{"e":{"enum":["a","b"]}}}`, false, []p{{"e", kString, false, false}}},
		{"integer enum", `{"type":"object","properties":{"e":{"type":"integer","enum":[1,2]}}}`, false, []p{{"e", kInteger, false, false}}},
		{"nullable is any", `{"type":"object","properties":{"x":{"type":["string","null"]}},"required":["x"]}`, false, []p{{"x", kAny, false, true}}},
		{"single type array", `{"type":"object","properties":{"x":{"type":["string"]}}}`, false, []p{{"x", kString, false, false}}},
		{"ref", `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/s"}}}`, false, []p{{"x", kString, false, false}}},
		{"ref cycle", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}`, false, []p{{"x", kAny, false, true}}},
		{"ref escapes", `{"type":"object","$defs":{"a/b":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a~1b"}}}`, false, []p{{"x", kString, false, false}}},
		{"ref into array", `{"type":"object","d":[{"type":"string"}],"properties":{"x":{"$ref":"#/d/0"},"y":{"$ref":"#/d/1"}}}`, false, []p{{"x", kString, false, false}, {"y", kAny, false, false}}},
		{"array of objects", `{"type":"object","properties":{"x":{"type":"array","items":{"type":"object"}}},"required":["x"]}`, false, []p{{"x", kAny, false, true}}},
		{"required undeclared", `{"type":"object","properties":{},"required":["ghost"]}`, false, []p{{"ghost", kAny, false, true}}},
		{"empty properties", `{"type":"object","properties":{}}`, false, nil},
		{"no properties", `{"type":"object"}`, true, nil},
		{"not object", `[1]`, true, nil},
		{"top anyOf", `{"anyOf":[],"properties":{}}`, true, nil},
		{"top type array", `{"type":["object","null"],"properties":{}}`, true, nil},
		{"duplicate key", `{"type":"object","properties":{"a":{"type":"string","type":"object"}}}`, true, nil},
		{"trailing data", `{"type":"object","properties":{}} {}`, true, nil},
		{"invalid", `{"type":`, true, nil},
		{"empty", ``, true, nil},
		{"deep", strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100), true, nil},
		{"required not strings", `{"type":"object","properties":{},"required":[1]}`, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := planSchema([]byte(tc.schema))
			if (pl.whole != "") != tc.whole {
				t.Fatalf("whole = %q, want whole %v", pl.whole, tc.whole)
			}
			if len(pl.params) != len(tc.params) {
				t.Fatalf("got %d params %+v, want %+v", len(pl.params), pl.params, tc.params)
			}
			for i, w := range tc.params {
				g := pl.params[i]
				if g.wire != w.wire || g.kind != w.kind || g.list != w.list || g.required != w.required {
					t.Errorf("param %d = %+v, want %+v", i, g, w)
				}
				if g.kind == kAny && g.reason == "" {
					t.Errorf("param %d is any without a reason", i)
				}
			}
		})
	}
	big := `{"type":"object","properties":{"x":{"type":"string","description":"` + strings.Repeat("x", maxSchemaBytes) + `"}}}`
	if pl := planSchema([]byte(big)); pl.whole == "" {
		t.Error("an oversized schema was typed")
	}
}

// TestVerifyRejects proves each verification check can fail: the source
// of a tiny façade is altered one way per case.
func TestVerifyRejects(t *testing.T) {
	g, err := Generate("s", []Tool{{Name: "t", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := intent{pkg: "s", funcs: map[string]bool{"T": true}, types: map[string]bool{"TOptions": true}}
	if err := verifyGo(g.Source, want); err != nil {
		t.Fatalf("the genuine source fails: %v", err)
	}
	src := string(g.Source)
	for _, tc := range []struct{ name, src string }{
		{"parse", src + "\nfunc {"},
		{"gofmt", strings.Replace(src, "\targs := ", "\targs  := ", 1)},
		{"directive", strings.Replace(src, "// T calls", "//go:linkname x y\n// T calls", 1)},
		{"line directive", strings.Replace(src, "// T calls", "//line x.go:1\n// T calls", 1)},
		{"block comment", strings.Replace(src, "// T calls", "/* x */\n// T calls", 1)},
		{"build constraint", strings.Replace(src, "// T calls", "// +build ignore\n// T calls", 1)},
		{"init", src + "\nfunc init() {}\n"},
		{"extra func", src + "\nfunc Evil() {}\n"},
		{"var", src + "\nvar X = 1\n"},
		{"method", src + "\nfunc (TOptions) M() {}\n"},
		{"import", strings.Replace(src, "\t\"context\"\n", "\t\"context\"\n\t\"os\"\n", 1)},
		{"cgo", strings.Replace(src, "import (", "import \"C\"\n\nimport (", 1)},
		{"package", strings.Replace(src, "package s\n", "package t\n", 1)},
		{"missing decl", src[:strings.Index(src, "\n// TOptions holds")+1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyGo([]byte(tc.src), want)
			var ve *VerifyError
			if !errors.As(err, &ve) || !errors.Is(err, ErrVerification) {
				t.Fatalf("accepted (err %v)", err)
			}
		})
	}
}
