package codegen

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/truncate"
)

// Verification of TypeScript and Python source, in Go and without either
// toolchain: a lexer of the small subset the emitters write. It is the
// backstop the Go emitter has in go/parser: the file must be valid UTF-8
// with '\n' its only line terminator and no other control; every string
// literal closed on its line (Python docstrings excepted) and escaped as
// the emitter escapes; every comment of the emitter's forms; brackets
// balanced outside them; every identifier outside them one the emitter
// writes itself, an intended declaration, property key or parameter, so
// no server text stands as code; and the top-level declarations exactly
// the intended ones, each once.

// fIntent is what a TypeScript or Python file means to declare.
type fIntent struct {
	decls  map[string]bool // functions, types and helpers
	keys   map[string]bool // bare property keys (TypeScript) and keyword parameters (Python)
	vocab  map[string]bool // the emitter's own words
	header []string        // the exact top-level lines besides declarations: imports and the like
}

// Top-level declarations as the emitters write them.
var (
	tsDeclLine = regexp.MustCompile(`^export (?:async function|function|declare function|interface|type) ([A-Za-z_$][A-Za-z0-9_$]*)\b`)
	pyDeclLine = regexp.MustCompile(`^(?:async def|def|class) ([A-Za-z_][A-Za-z0-9_]*)\b|^([A-Za-z_][A-Za-z0-9_]*)(?:: typing\.TypeAlias)? = `)
)

// verifyForeign checks src, a TypeScript or Python module, against want.
func verifyForeign(lang Lang, src []byte, want fIntent) error {
	s := string(src)
	if !utf8.ValidString(s) {
		return &VerifyError{Reason: "not valid UTF-8"}
	}
	line := 1
	fail := func(format string, args ...any) error {
		return &VerifyError{Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	for _, r := range s {
		if r == '\n' {
			line++
			continue
		}
		if isHidden(r) || r == '\u0085' || r == '\u2028' || r == '\u2029' || r == '\t' {
			return fail("holds %s", strconv.QuoteRuneToASCII(r))
		}
	}
	line = 1
	var stack []byte
	seen := map[string]bool{}
	headers := map[string]bool{}
	for _, h := range want.header {
		headers[h] = true
	}
	pyLine := lang == Python
	commentMark := "//"
	if pyLine {
		commentMark = "#"
	}
	bol := true // at the beginning of a line, in code
	for i := 0; i < len(s); {
		c := s[i]
		if bol && c != '\n' && c != ' ' && len(stack) == 0 {
			rest := s[i:]
			if j := strings.IndexByte(rest, '\n'); j >= 0 {
				rest = rest[:j]
			}
			if err := topLevel(lang, rest, want, seen, headers, fail); err != nil {
				return err
			}
		}
		bol = false
		switch {
		case c == '\n':
			line++
			bol = true
			i++
		case strings.HasPrefix(s[i:], commentMark):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			text := s[i : i+end]
			if text != commentMark && !strings.HasPrefix(text, commentMark+" ") {
				return fail("comment is not a plain line comment: %s", strconv.QuoteToASCII(truncate.Ellipsis(text, 40)))
			}
			i += end
		case !pyLine && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i:], "*/")
			if !strings.HasPrefix(s[i:], "/** ") && !strings.HasPrefix(s[i:], "/**\n") || end < 0 {
				return fail("block comment is not a JSDoc block")
			}
			body := s[i+3 : i+end]
			for k, l := range strings.Split(body, "\n") {
				if l = strings.TrimLeft(l, " "); k > 0 && l != "" && l != "*" && !strings.HasPrefix(l, "* ") {
					return fail("JSDoc line %s", strconv.QuoteToASCII(truncate.Ellipsis(l, 40)))
				}
			}
			line += strings.Count(body, "\n")
			i += end + 2
		case pyLine && strings.HasPrefix(s[i:], `"""`):
			n, err := docstring(s[i:])
			if err != "" {
				return fail("%s", err)
			}
			line += strings.Count(s[i:i+n], "\n")
			i += n
		case c == '"':
			n, err := stringLiteral(lang, s[i:])
			if err != "" {
				return fail("%s", err)
			}
			i += n
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
			i++
		case c == ')' || c == ']' || c == '}':
			open := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fail("unbalanced %q", c)
			}
			stack = stack[:len(stack)-1]
			i++
		case isIdentStart(c, lang):
			j := i + 1
			for j < len(s) && (isIdentStart(s[j], lang) || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			w := s[i:j]
			if !want.vocab[w] && !want.decls[w] && !want.keys[w] {
				return fail("unintended identifier %s", truncate.Ellipsis(w, 40))
			}
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || strings.IndexByte(".eE", s[j]) >= 0 || (s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			i = j
		case strings.IndexByte(" :;,.?|=<>!&*-+", c) >= 0 && !(pyLine && c == ';'):
			i++
		default:
			return fail("unexpected %s", strconv.QuoteToASCII(truncate.Ellipsis(s[i:], 8)))
		}
	}
	if len(stack) > 0 {
		return &VerifyError{Reason: fmt.Sprintf("%d brackets left open", len(stack))}
	}
	for h := range headers {
		return &VerifyError{Reason: "missing " + strconv.QuoteToASCII(h)}
	}
	for d := range want.decls {
		if !seen[d] {
			return &VerifyError{Reason: "missing declaration " + d}
		}
	}
	return nil
}

// topLevel checks a line that starts at column 0 outside any bracket: a
// comment, a JSDoc block's start, an intended header line, or a
// declaration of an intended name, declared once.
func topLevel(lang Lang, l string, want fIntent, seen, headers map[string]bool, fail func(string, ...any) error) error {
	switch {
	case strings.HasPrefix(l, "//") && lang == TypeScript, strings.HasPrefix(l, "/**") && lang == TypeScript,
		strings.HasPrefix(l, "#") && lang == Python, l == "}":
		return nil
	case headers[l]:
		delete(headers, l)
		return nil
	}
	var name string
	if lang == TypeScript {
		if m := tsDeclLine.FindStringSubmatch(l); m != nil {
			name = m[1]
		}
	} else if m := pyDeclLine.FindStringSubmatch(l); m != nil {
		name = m[1] + m[2]
	}
	if name == "" || !want.decls[name] || seen[name] {
		return fail("unintended top-level line %s", strconv.QuoteToASCII(truncate.Ellipsis(l, 60)))
	}
	seen[name] = true
	return nil
}

func isIdentStart(c byte, lang Lang) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' && lang == TypeScript
}

// docstring measures the docstring s starts with: it ends at the first
// unescaped triple quote, and holds no escape but \\ and \".
func docstring(s string) (int, string) {
	for i := 3; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			if i+1 == len(s) || s[i+1] != '\\' && s[i+1] != '"' {
				return 0, "docstring escape " + strconv.QuoteToASCII(truncate.Ellipsis(s[i:], 8))
			}
			i++
		case strings.HasPrefix(s[i:], `"""`):
			return i + 3, ""
		}
	}
	return 0, "docstring does not end"
}

// stringLiteral measures the double-quoted literal s starts with, holding
// only printable ASCII and the escapes jsLit and pyLit write.
func stringLiteral(lang Lang, s string) (int, string) {
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, ""
		case c == '\\':
			if i+1 == len(s) {
				return 0, "string literal does not end"
			}
			switch e := s[i+1]; {
			case e == '"' || e == '\\':
				i++
			case e == 'u' && hexRun(s[i+2:], 4):
				i += 5
			case e == 'U' && lang == Python && hexRun(s[i+2:], 8):
				i += 9
			default:
				return 0, "string literal escape " + strconv.QuoteToASCII(truncate.Ellipsis(s[i:], 8))
			}
		case c < 0x20 || c >= 0x7f:
			return 0, "string literal holds " + strconv.QuoteToASCII(truncate.Ellipsis(s[i:], 4))
		}
	}
	return 0, "string literal does not end"
}

func hexRun(s string, n int) bool {
	if len(s) < n {
		return false
	}
	for i := 0; i < n; i++ {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return false
		}
	}
	return true
}
