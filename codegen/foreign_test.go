package codegen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/need"
)

// foreign are the languages besides Go, with their files' extensions.
var foreign = []struct {
	lang Lang
	ext  string
}{{TypeScript, ".ts"}, {Python, ".py"}}

// TestForeignGolden generates every testdata/*.json listing in TypeScript
// and Python, twice (the output is deterministic), and compares module and
// surface with the goldens; -update rewrites them.
func TestForeignGolden(t *testing.T) {
	listings, err := filepath.Glob("testdata/*.json")
	if err != nil || len(listings) < 5 {
		t.Fatalf("want at least 5 golden listings, found %d (%v)", len(listings), err)
	}
	// testdata/foreign: listings whose cases only these languages have.
	only, _ := filepath.Glob("testdata/foreign/*.json")
	listings = append(listings, only...)
	for _, path := range listings {
		for _, fl := range foreign {
			t.Run(serverFor(path)+fl.ext, func(t *testing.T) {
				g, err := generateFile(t, path, Options{Lang: fl.lang})
				if err != nil {
					t.Fatal(err)
				}
				again, err := generateFile(t, path, Options{Lang: fl.lang})
				if err != nil || !bytes.Equal(g.Source, again.Source) || g.Surface != again.Surface {
					t.Fatalf("generation is not deterministic (err %v)", err)
				}
				pre, err := Preamble(fl.lang)
				if err != nil || strings.Contains(pre, "\n\n") || !strings.HasSuffix(pre, "\n") {
					t.Fatalf("preamble: %q, %v", pre, err)
				}
				base := strings.TrimSuffix(path, ".json")
				compareGolden(t, base+fl.ext+".golden", g.Source)
				compareGolden(t, base+fl.ext+".surface.golden", []byte(g.Surface))
				if fl.lang == TypeScript {
					// The forms Node runs as they are: JavaScript and its
					// declarations, from the same binding.
					compareGolden(t, base+".js.golden", g.JS)
					compareGolden(t, base+".d.ts.golden", g.DTS)
				} else if g.JS != nil || g.DTS != nil {
					t.Errorf("%s has JavaScript forms", fl.lang)
				}
			})
		}
	}
}

// TestForeignHostile runs the hostile corpus through both emitters: each
// listing yields a verified module whose every rendering is inert, or the
// refusal the Go emitter gives.
func TestForeignHostile(t *testing.T) {
	for name, want := range hostile {
		for _, fl := range foreign {
			t.Run(name+fl.ext, func(t *testing.T) {
				tools, err := readListing(t, "testdata/hostile/"+name+".json")
				var g *Generated
				if err == nil {
					g, err = Generate(serverFor(name), tools, Options{Lang: fl.lang})
				}
				if want != nil {
					if !errors.Is(err, want) {
						t.Fatalf("got %v, want %v", err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				checkForeignSource(t, fl.lang, g.Source)
				checkForeignRenderings(t, fl.lang, g, len(tools))
				// The ladder, each rung forced in turn.
				for budget := len(g.Surface) - 1; g.Level != SurfaceIndex; budget = len(g.Surface) - 1 {
					if g, err = Generate(serverFor(name), tools, Options{Lang: fl.lang, SurfaceBudget: budget}); err != nil {
						t.Fatal(err)
					}
					for _, s := range append([]string{g.Surface}, g.Pages...) {
						checkForeignSurface(t, fl.lang, s)
					}
				}
			})
		}
	}
}

// checkForeignSource asserts, beyond verification, what must hold of any
// module: no hidden codepoint, no line of server prose outside a comment.
func checkForeignSource(t *testing.T, lang Lang, src []byte) {
	t.Helper()
	if strings.ContainsAny(string(src), "\x00\r\t\u202e\u2066\u2028\u2029\ufeff") {
		t.Error("module holds a hidden codepoint")
	}
	mark := map[Lang]string{TypeScript: "//", Python: "#"}[lang]
	inDoc := false
	for i, line := range strings.Split(string(src), "\n") {
		trim := strings.TrimLeft(line, " ")
		if lang == TypeScript && (strings.HasPrefix(trim, "/**") || strings.HasPrefix(trim, "* ") || trim == "*" || trim == "*/") {
			continue
		}
		if n := strings.Count(line, `"""`); lang == Python && n > 0 {
			inDoc = inDoc != (n%2 == 1)
			continue
		}
		if inDoc || strings.HasPrefix(trim, mark) {
			continue
		}
		code := stripLiterals(line)
		if strings.Contains(code, "Evil") || forgedCall.MatchString(code) || strings.ContainsAny(code, "`'@\\") {
			t.Errorf("line %d: server text in code: %q", i+1, line)
		}
	}
}

// checkForeignRenderings checks the surface, every page, Describe and
// Search of g.
func checkForeignRenderings(t *testing.T, lang Lang, g *Generated, n int) {
	t.Helper()
	for _, s := range append([]string{g.Surface}, g.Pages...) {
		checkForeignSurface(t, lang, s)
	}
	d, err := g.Describe()
	if err != nil {
		t.Fatal(err)
	}
	checkForeignSurface(t, lang, d)
	for _, m := range g.Search("a e i o u func evil bad x", n) {
		code := stripLiterals(m.Signature)
		if strings.Contains(code, "Evil") || forgedCall.MatchString(code) || strings.ContainsAny(code, "`'\n") {
			t.Errorf("forged signature: %q", m.Signature)
		}
	}
}

// stripLiterals removes the double-quoted literals of a line, so what is
// left is code and comment marks.
func stripLiterals(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] != '"' {
			b.WriteByte(line[i])
			continue
		}
		for i++; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' {
				i++
			}
		}
		b.WriteString(`""`)
	}
	return b.String()
}

// checkForeignSurface asserts that every line of a surface is the
// generator's: server text only ever sits inside a literal, and prose only
// after the comment mark.
func checkForeignSurface(t *testing.T, lang Lang, s string) {
	t.Helper()
	if strings.ContainsAny(s, "\x00\r\u202e\u2066\u2028\ufeff") {
		t.Error("surface holds a hidden codepoint")
	}
	mark := map[Lang]string{TypeScript: "//", Python: "#"}[lang]
	starts := map[Lang][]string{
		TypeScript: {"// ", "function ", "interface ", "type ", "\t", "}"},
		Python:     {"# ", "async def ", "class ", "    ", ")", "})"},
	}[lang]
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		code := stripLiterals(line)
		code, _, _ = strings.Cut(code, mark)
		ok := line == ""
		for _, p := range starts {
			ok = ok || strings.HasPrefix(line, p)
		}
		// An index line or a Python alias: an identifier first.
		ok = ok || len(line) > 0 && (line[0] >= 'a' && line[0] <= 'z' || line[0] >= 'A' && line[0] <= 'Z')
		if !ok {
			t.Errorf("surface line is not the generator's: %q", line)
		}
		if strings.Contains(code, "Evil") || forgedCall.MatchString(code) || strings.ContainsAny(code, "`'\\") {
			t.Errorf("forged surface line: %q", line)
		}
	}
}

// TestForeignVerifyRejects feeds the verifier sources a broken sanitiser
// or emitter would produce.
func TestForeignVerifyRejects(t *testing.T) {
	ts := fIntent{decls: map[string]bool{"f": true}, keys: map[string]bool{}, vocab: tsVocabulary,
		header: []string{`import * as capwire from "@capbridge/capwire";`}}
	py := fIntent{decls: map[string]bool{"f": true}, keys: map[string]bool{}, vocab: pyVocabulary,
		header: []string{"import typing", "import capwire"}}
	const tsHead = "import * as capwire from \"@capbridge/capwire\";\n"
	const pyHead = "import typing\n\nimport capwire\n"
	for _, tc := range []struct {
		name string
		lang Lang
		in   fIntent
		src  string
		ok   bool
	}{
		{"ts ok", TypeScript, ts, tsHead + "/** a */\nexport function f(): string {\n  return \"x\";\n}\n", true},
		{"ts comment closed early", TypeScript, ts, tsHead + "/** a */ evil() /* */\nexport function f() {}\n", false},
		{"ts line separator", TypeScript, ts, tsHead + "// a\u2028evil()\nexport function f() {}\n", false},
		{"ts unintended name", TypeScript, ts, tsHead + "export function f() {\n  evil();\n}\n", false},
		{"ts unintended declaration", TypeScript, ts, tsHead + "export function f() {}\nexport function g() {}\n", false},
		{"ts missing declaration", TypeScript, ts, tsHead, false},
		{"ts unbalanced", TypeScript, ts, tsHead + "export function f() {\n", false},
		{"ts string escape", TypeScript, ts, tsHead + "export function f() {\n  return \"\\x41\";\n}\n", false},
		{"ts template", TypeScript, ts, tsHead + "export function f() {\n  return `x`;\n}\n", false},
		{"ts missing import", TypeScript, ts, "export function f() {}\n", false},
		{"py ok", Python, py, pyHead + "\n\ndef f() -> str:\n    \"\"\"Doc \\\"x\\\".\"\"\"\n    return \"x\"\n", true},
		{"py docstring escape", Python, py, pyHead + "\n\ndef f() -> None:\n    \"\"\"\\N{BULLET}\"\"\"\n", false},
		{"py docstring ends early", Python, py, pyHead + "\n\ndef f() -> None:\n    \"\"\"a\"\"\" + evil() + \"\"\"\"\"\"\n", false},
		{"py decorator", Python, py, pyHead + "\n\n@evil\ndef f() -> None:\n    return None\n", false},
		{"py single quote", Python, py, pyHead + "\n\ndef f() -> str:\n    return 'x'\n", false},
		{"py directive comment", Python, py, "#!evil\n" + pyHead + "\n\ndef f() -> None:\n    return None\n", false},
		{"py tab", Python, py, pyHead + "\n\ndef f() -> None:\n\treturn None\n", false},
	} {
		err := verifyForeign(tc.lang, []byte(tc.src), tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, ErrVerification) {
			t.Errorf("%s: %v is not ErrVerification", tc.name, err)
		}
	}
}

// TestForeignNames covers the naming rule in the new styles.
func TestForeignNames(t *testing.T) {
	d := digest8
	for _, tc := range []struct {
		in   []string
		st   style
		want []string
	}{
		{[]string{"create_issue", "API-get-user", "getHTTPResponse", "2fa"}, lowerCamel, []string{"createIssue", "apiGetUser", "getHttpResponse", "tool2fa"}},
		{[]string{"create_issue", "API-get-user", "getHTTPResponse", "userId"}, snake, []string{"create_issue", "api_get_user", "get_http_response", "user_id"}},
		{[]string{"get-sum", "getSum"}, snake, []string{"get_sum_" + d("get-sum"), "get_sum_" + d("getSum")}},
		{[]string{"a+b"}, lowerCamel, []string{"aB_" + d("a+b")}},
	} {
		got, a, _ := mangleAll(tc.in, tc.st, notReserved, "tool")
		if a >= 0 || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("mangleAll(%q, %d) = %q, want %q", tc.in, tc.st, got, tc.want)
		}
	}
	tools := []Tool{
		{Name: "delete", InputSchema: []byte(`{"type":"object","properties":{"class":{"type":"string"},"type":{"type":"string"},"capwire":{"type":"string"}},"required":["class"]}`)},
		{Name: "print", InputSchema: []byte(`{"type":"object","properties":{}}`)},
	}
	ts, err := Generate("typing", tools, Options{Lang: TypeScript})
	if err != nil {
		t.Fatal(err)
	}
	py, err := Generate("typing", tools, Options{Lang: Python})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"export async function delete_" + d("delete") + "(", "  class: string;"} {
		if !strings.Contains(string(ts.Source), want) {
			t.Errorf("TypeScript lacks %q", want)
		}
	}
	for _, want := range []string{"async def delete(", "async def print_" + d("print") + "(", "    class_" + d("class") + ": str,", "    type: str | None = None,", "    capwire_" + d("capwire") + ": str | None"} {
		if !strings.Contains(string(py.Source), want) {
			t.Errorf("Python lacks %q", want)
		}
	}
	if py.ModuleName != "typing"+d("typing") || ts.ModuleName != "typing" {
		t.Errorf("modules %q and %q", py.ModuleName, ts.ModuleName)
	}
}

// TestForeignIn generates the other languages from a Go façade, as the
// bridge does, and caches them.
func TestForeignIn(t *testing.T) {
	g, err := generateFile(t, "testdata/typical.json", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := g.In(TypeScript)
	if err != nil || ts.Lang != TypeScript {
		t.Fatal(err)
	}
	again, _ := g.In(TypeScript)
	direct, _ := generateFile(t, "testdata/typical.json", Options{Lang: TypeScript})
	if again != ts || !bytes.Equal(direct.Source, ts.Source) || ts.ListingSHA256 != g.ListingSHA256 {
		t.Error("In is not cached, or differs from Generate")
	}
	if same, _ := g.In(""); same != g {
		t.Error("In of the own language is not itself")
	}
	if _, err := g.In("rust"); !errors.Is(err, ErrUnsupportedLang) {
		t.Errorf("In(rust): %v", err)
	}
	m := ts.Search("issue", 1)
	if len(m) != 1 || !strings.HasPrefix(m[0].Signature, "typical.createIssue_") {
		t.Errorf("search: %+v", m)
	}
}

// TestForeignToolchains hands every golden listing's and every generating
// hostile listing's modules to the languages' own checkers: tsc --strict
// (with exactOptionalPropertyTypes and no unused locals) against capwire's
// TypeScript sources, and python3's py_compile and ast, and mypy --strict
// against capwire's Python package. CAPWIRE_TS and CAPWIRE_PY name those
// packages' directories; they default to the repository's capwire/ts and
// capwire/python. A checker that is not installed fails its part under the
// test command and skips it elsewhere (internal/testkit/need).
func TestForeignToolchains(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tsc and mypy")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var tsFiles, pyFiles, jsFiles []string
	write := func(lang Lang, name string, tools []Tool) {
		g, err := Generate(name, tools, Options{Lang: lang})
		if err != nil {
			t.Fatalf("%s %s: %v", name, lang, err)
		}
		ext := map[Lang]string{TypeScript: ".ts", Python: ".py"}[lang]
		file := fmt.Sprintf("m%03d_%s%s", len(tsFiles)+len(pyFiles), g.ModuleName, ext)
		if err := os.WriteFile(filepath.Join(dir, file), g.Source, 0o644); err != nil {
			t.Fatal(err)
		}
		if lang == TypeScript {
			tsFiles = append(tsFiles, file)
			// The JavaScript form and its declarations, as other modules.
			base := fmt.Sprintf("j%03d_%s", len(jsFiles), g.ModuleName)
			writeFile(t, filepath.Join(dir, base+".js"), string(g.JS))
			writeFile(t, filepath.Join(dir, base+".d.ts"), string(g.DTS))
			jsFiles = append(jsFiles, base+".js")
			tsFiles = append(tsFiles, base+".d.ts")
		} else {
			pyFiles = append(pyFiles, file)
		}
	}
	listings, _ := filepath.Glob("testdata/*.json")
	only, _ := filepath.Glob("testdata/foreign/*.json")
	listings = append(listings, only...)
	for name, want := range hostile {
		if want == nil {
			listings = append(listings, "testdata/hostile/"+name+".json")
		}
	}
	for _, path := range listings {
		tools, err := readListing(t, path)
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range foreign {
			write(fl.lang, serverFor(path), tools)
		}
	}
	t.Run("tsc", func(t *testing.T) {
		capTS := envOr("CAPWIRE_TS", filepath.Join(root, "capwire", "ts"))
		tsc := filepath.Join(capTS, "node_modules", ".bin", "tsc")
		files, err := json.Marshal(tsFiles)
		if err != nil {
			t.Fatal(err)
		}
		need.File(t, tsc, "tsc at "+tsc, "`make deps` installs it; CAPWIRE_TS names capwire's TypeScript package")
		cfg := fmt.Sprintf(`{"compilerOptions":{"strict":true,"noEmit":true,"target":"ES2022","lib":["ES2022"],
"module":"NodeNext","moduleResolution":"NodeNext","skipLibCheck":true,"types":["node"],"typeRoots":[%q],
"exactOptionalPropertyTypes":true,"noUnusedLocals":true,"noUnusedParameters":true,
"paths":{"@capbridge/capwire":[%q]}},"files":%s}`,
			filepath.Join(capTS, "node_modules", "@types"), filepath.Join(capTS, "src", "index.ts"), files)
		writeFile(t, filepath.Join(dir, "tsconfig.json"), cfg)
		writeFile(t, filepath.Join(dir, "package.json"), `{"type":"module"}`)
		run(t, dir, nil, tsc, "-p", "tsconfig.json")
	})
	t.Run("node", func(t *testing.T) {
		node := need.Command(t, "node", "the README names Node.js 20 with npm")
		// Syntax only: each JavaScript façade parses as an ES module.
		for _, f := range jsFiles {
			run(t, dir, nil, node, "--check", f)
		}
	})
	t.Run("python", func(t *testing.T) {
		py := need.Command(t, "python3", "the README names Python >= 3.10")
		check := `import ast, py_compile, sys
for f in sys.argv[1:]:
    py_compile.compile(f, doraise=True)
    ast.parse(open(f, encoding="utf-8").read(), f)
`
		run(t, dir, nil, py, append([]string{"-c", check}, pyFiles...)...)
		mypy := need.Command(t, "mypy", "`make mypy` installs it")
		capPy := envOr("CAPWIRE_PY", filepath.Join(root, "capwire", "python"))
		need.File(t, filepath.Join(capPy, "capwire", "__init__.py"), "the capwire Python package at "+capPy, "CAPWIRE_PY names it")
		// Python 3.10 is the oldest capwire supports: typing names added
		// later (NotRequired, 3.11) are errors there.
		run(t, dir, []string{"MYPYPATH=" + capPy}, mypy, append([]string{"--strict", "--python-version", "3.10", "--no-incremental", "--cache-dir", filepath.Join(dir, ".mypy")}, pyFiles...)...)
	})
}

func envOr(k, dflt string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return dflt
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, clipLines(string(out), 40))
	}
}
