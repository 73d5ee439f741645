package codegen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
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
// it parses; gofmt leaves it unchanged; it is package want.pkg; it imports
// only goImports, unrenamed (so no import "C" and no cgo preamble); every
// comment is a line comment beginning "// " (so no //go: or //line
// directive, no //export, no build constraint, no block comment); and its
// top-level declarations are exactly the intended functions, types,
// constants and empty marker methods, with no init, no variable and no
// generic.
func verifyGo(src []byte, want intent) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "facade.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return &VerifyError{Reason: "does not parse: " + truncate.Ellipsis(err.Error(), 200)}
	}
	line := func(p token.Pos) int { return fset.Position(p).Line }
	// Printing the tree just parsed is gofmt of src (format.Source parses
	// with the same mode, then prints with the same configuration), without
	// parsing the file twice.
	var formatted bytes.Buffer
	if err := format.Node(&formatted, fset, f); err != nil {
		return &VerifyError{Reason: "gofmt fails: " + truncate.Ellipsis(err.Error(), 200)}
	}
	if !bytes.Equal(formatted.Bytes(), src) {
		return &VerifyError{Line: firstDiffLine(src, formatted.Bytes()), Reason: "not gofmt-stable"}
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

func firstDiffLine(a, b []byte) int {
	n := 1
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return n
		}
		if a[i] == '\n' {
			n++
		}
	}
	return n
}
