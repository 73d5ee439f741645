package codegen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/truncate"
)

// VerifyError says which check the emitted source failed, and where. It is
// the generator's last backstop: the sanitiser is meant to
// make every such failure impossible, so one means a generator bug and the
// source is withheld rather than handed to a compiler.
type VerifyError struct {
	Line   int // 1-based; 0 when the failure has no single line
	Reason string
}

func (e *VerifyError) Error() string {
	if e.Line == 0 {
		return "codegen: generated source failed verification: " + e.Reason
	}
	return fmt.Sprintf("codegen: generated source failed verification: line %d: %s", e.Line, e.Reason)
}

// Is makes every VerifyError match ErrVerification.
func (e *VerifyError) Is(target error) bool { return target == ErrVerification }

// intent is what the emitter meant to declare.
type intent struct {
	pkg     string
	funcs   map[string]bool
	types   map[string]bool
	consts  map[string]bool
	methods map[string]bool // "Type.method": the empty marker methods that seal a union
}

// verifyGo checks src before it is handed out:
// it parses; it is laid out as gofmt lays out what the emitter writes (see
// checkLayout); it is package want.pkg; it imports
// only goImports, unrenamed (so no import "C" and no cgo preamble); every
// comment is a line comment beginning "// " (so no //go: or //line
// directive, no //export, no build constraint, no block comment); and its
// top-level declarations are exactly the intended functions, types,
// constants and empty marker methods, with no init, no variable and no
// generic.
//
// The emitter writes gofmt's output directly, so nothing formats src here:
// printing a 10 000-tool façade (20 MB) with go/printer costs more than
// everything else generation does. That src equals gofmt of itself is held
// by the tests over every golden and every façade the fuzz target makes.
func verifyGo(src []byte, want intent) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "facade.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return &VerifyError{Reason: "does not parse: " + truncate.Ellipsis(err.Error(), 200)}
	}
	line := func(p token.Pos) int { return fset.Position(p).Line }
	if err := checkLayout(src); err != nil {
		return err
	}
	if f.Name.Name != want.pkg {
		return &VerifyError{Line: line(f.Name.Pos()), Reason: fmt.Sprintf("package %s, want %s", f.Name.Name, want.pkg)}
	}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || imp.Name != nil || !slices.Contains(goImports, path) {
			return &VerifyError{Line: line(imp.Pos()), Reason: "import outside the allowlist: " + truncate.Ellipsis(imp.Path.Value, 80)}
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			t := c.Text
			if t != "//" && (!strings.HasPrefix(t, "// ") || strings.HasPrefix(t, "// +build")) {
				return &VerifyError{Line: line(c.Pos()), Reason: "comment is not a plain line comment: " + strconv.QuoteToASCII(truncate.Ellipsis(t, 40))}
			}
		}
	}
	seen := map[string]bool{}
	declare := func(name string, pos token.Pos, allowed map[string]bool, what string) error {
		if !allowed[name] || seen[name] {
			return &VerifyError{Line: line(pos), Reason: "unintended " + what + " " + name}
		}
		seen[name] = true
		return nil
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil {
				if err := checkMarker(d, want.methods, line); err != nil {
					return err
				}
				continue
			}
			if d.Type.TypeParams != nil || d.Name.Name == "init" {
				return &VerifyError{Line: line(d.Pos()), Reason: "unintended init or generic " + d.Name.Name}
			}
			if err := declare(d.Name.Name, d.Pos(), want.funcs, "function"); err != nil {
				return err
			}
		case *ast.GenDecl:
			switch d.Tok {
			case token.IMPORT:
			case token.CONST:
				for _, s := range d.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						if err := declare(n.Name, n.Pos(), want.consts, "constant"); err != nil {
							return err
						}
					}
				}
			case token.TYPE:
				for _, s := range d.Specs {
					ts := s.(*ast.TypeSpec)
					if ts.TypeParams != nil || ts.Assign.IsValid() {
						return &VerifyError{Line: line(ts.Pos()), Reason: "unintended alias or generic " + ts.Name.Name}
					}
					if err := declare(ts.Name.Name, ts.Pos(), want.types, "type"); err != nil {
						return err
					}
				}
			default:
				return &VerifyError{Line: line(d.Pos()), Reason: "unintended " + d.Tok.String() + " declaration"}
			}
		default:
			return &VerifyError{Line: line(d.Pos()), Reason: "unintended declaration"}
		}
	}
	if n := len(want.funcs) + len(want.types) + len(want.consts); len(seen) != n {
		return &VerifyError{Reason: fmt.Sprintf("%d declarations, want %d", len(seen), n)}
	}
	return nil
}

// checkMarker admits a method only if it is an intended marker: a value
// receiver of an intended type, no parameters, no results, an empty body.
func checkMarker(d *ast.FuncDecl, methods map[string]bool, line func(token.Pos) int) error {
	bad := &VerifyError{Line: line(d.Pos()), Reason: "unintended method " + d.Name.Name}
	if len(d.Recv.List) != 1 || len(d.Recv.List[0].Names) != 0 || d.Type.Params.NumFields() != 0 ||
		d.Type.Results != nil || d.Body == nil || len(d.Body.List) != 0 {
		return bad
	}
	recv, ok := d.Recv.List[0].Type.(*ast.Ident)
	if !ok || !methods[recv.Name+"."+d.Name.Name] {
		return bad
	}
	return nil
}

// checkLayout checks, in one pass over the bytes, the layout gofmt gives
// the forms the emitter writes: the file ends in one new line; no line is
// followed by a second blank one or ends in white space; a line is indented
// by tabs only, one per bracket open at its start (one fewer when it
// starts by closing one); outside literals and comments, tokens are
// separated by at most one space, except in a const block, whose types
// gofmt aligns one space past the longest name. A stray space, tab or new
// line in a template breaks one of these; what they do not cover (the
// spacing of tokens that touch, doc comments' canonical form) the tests
// compare with gofmt itself.
func checkLayout(src []byte) error {
	if len(src) == 0 || src[len(src)-1] != '\n' {
		return &VerifyError{Reason: "does not end in a new line"}
	}
	depth := 0       // brackets open outside literals and comments
	blank := true    // the previous line was empty (or there was none)
	inConst := false // within "const (" ... ")"
	col, gap := 0, 0 // a const block's type column, and its narrowest gap
	for n, rest := 1, src; len(rest) > 0; n++ {
		l, after, _ := bytes.Cut(rest, []byte{'\n'})
		rest = after
		bad := func(why string) error { return &VerifyError{Line: n, Reason: "not gofmt's layout: " + why} }
		if len(l) == 0 {
			if blank || len(rest) == 0 {
				return bad("extra blank line")
			}
			blank = true
			continue
		}
		blank = false
		if c := l[len(l)-1]; c == ' ' || c == '\t' || c == '\r' {
			return bad("trailing white space")
		}
		tabs := 0
		for tabs < len(l) && l[tabs] == '\t' {
			tabs++
		}
		code := l[tabs:]
		if code[0] == ' ' {
			return bad("indented with spaces")
		}
		want := depth
		if c := code[0]; c == ')' || c == '}' || c == ']' {
			want--
		}
		if tabs != want {
			return bad(fmt.Sprintf("indented %d, want %d", tabs, want))
		}
		if bytes.HasPrefix(code, []byte("//")) {
			continue
		}
		start := 0
		if inConst && string(code) == ")" {
			if gap != 1 {
				return bad("const block not aligned")
			}
			inConst = false
		} else if inConst {
			// A spec: its name, then spaces up to the block's type column.
			name := bytes.IndexByte(code, ' ')
			if name <= 0 {
				return bad("const spec without a type")
			}
			start = name
			for start < len(code) && code[start] == ' ' {
				start++
			}
			if col != 0 && start != col {
				return bad("const block not aligned")
			}
			col, gap = start, min(gap, start-name)
		}
		spaces := 0
		for i := start; i < len(code); i++ {
			c := code[i]
			if c == ' ' {
				if spaces++; spaces > 1 {
					return bad("two spaces between tokens")
				}
				continue
			}
			spaces = 0
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			case '"', '\'', '`':
				j := i + 1
				for j < len(code) && code[j] != c {
					if code[j] == '\\' && c != '`' {
						j++
					}
					j++
				}
				if j >= len(code) {
					return bad("literal runs past its line")
				}
				i = j
			case '/':
				if i+1 < len(code) && code[i+1] == '/' {
					return bad("comment after code")
				}
			}
		}
		if depth < 0 {
			return bad("unbalanced brackets")
		}
		if string(code) == "const (" {
			inConst, col, gap = true, 0, 1<<30
		}
	}
	return nil
}
