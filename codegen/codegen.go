// Package codegen implements the generator that turns an MCP server's
// tools/list into typed façade source and the compact surface a model reads.
//
// A listing is untrusted input that becomes source code, so the package is
// built to keep server text inert: schemas are planned by a total function
// (schema.go) that never drops a required parameter; names are mangled by a
// context-free rule with a SHA-256 suffix (name.go); prose is stripped of
// control and bidi codepoints, capped and wrapped by the generator alone
// (sanitize.go); wire names reach the source only as fully escaped string
// literals; and the emitted file is parsed and checked before it is handed
// out (verify.go). Planning, naming and sanitising are language neutral;
// golang.go is the first emitter.
//
// The package is pure: it returns source text and never compiles, spawns or
// writes files. Generate is safe for concurrent use. The format of the output
// is documented in docs/codegen.md.
package codegen

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Limits (issue 6 and DESIGN.md, "Everything is bounded").
const (
	// MaxTools is the most tools one server may list.
	MaxTools = 256
	// MaxListingBytes caps the saved listing ParseListing reads; it is the
	// line cap of the MCP stdio client, so one listing costs at most what one
	// message may.
	MaxListingBytes = 16 << 20
	// DefaultSurfaceBudget is the surface size, in bytes, used when
	// Options.SurfaceBudget is zero.
	DefaultSurfaceBudget = 64 << 10
	// maxServerName caps the operator's name for a server.
	maxServerName = 128
)

// Errors callers branch on. Every error Generate returns matches one.
var (
	// ErrBadListing: the listing or a tool in it is malformed (*ListingError).
	ErrBadListing = errors.New("codegen: bad listing")
	// ErrBadServerName: the server name is empty, too long, not UTF-8 or
	// holds control or format characters.
	ErrBadServerName = errors.New("codegen: bad server name")
	// ErrTooManyTools: the server lists more than MaxTools tools.
	ErrTooManyTools = errors.New("codegen: too many tools")
	// ErrNameCollision: two tools map to one identifier (*CollisionError).
	ErrNameCollision = errors.New("codegen: name collision")
	// ErrSurfaceTooLarge: even the surface's index form is over budget.
	ErrSurfaceTooLarge = errors.New("codegen: surface too large")
	// ErrVerification: the emitted source failed verification
	// (*VerifyError). This is the generator's own failure, never the
	// server's: its sanitising did not hold, and the source is withheld.
	ErrVerification = errors.New("codegen: generated source failed verification")
	// ErrUnsupportedLang: Options.Lang names no emitter.
	ErrUnsupportedLang = errors.New("codegen: unsupported language")
)

// CollisionError names two tools whose identifiers coincide after
// mangling: identical wire names, or a 32-bit digest near-miss. The server
// is refused rather than repaired, since either repair would guess.
type CollisionError struct {
	Ident string // the shared identifier
	A, B  string // the two wire names, in listing order
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("codegen: tools %q and %q both map to identifier %s", clip(e.A, 80), clip(e.B, 80), e.Ident)
}

// Is makes every CollisionError match ErrNameCollision.
func (e *CollisionError) Is(target error) bool { return target == ErrNameCollision }

// Lang selects an emitter.
type Lang string

// Go is the Go emitter, the only one so far.
const Go Lang = "go"

// Options tune Generate. The zero value is ready to use.
type Options struct {
	Lang          Lang // "" means Go
	SurfaceBudget int  // bytes; 0 means DefaultSurfaceBudget
}

// SurfaceLevel is the rung of the degradation ladder a surface landed on.
type SurfaceLevel uint8

// The ladder, from richest to leanest (issue 6, "Limits").
const (
	// SurfaceFull: every signature with its options and a description of
	// up to surfaceLongDesc runes.
	SurfaceFull SurfaceLevel = iota
	// SurfaceShort: descriptions cut to surfaceShortDesc runes.
	SurfaceShort
	// SurfaceIndex: names and signatures only; the model asks for a
	// function's Details by name.
	SurfaceIndex
)

func (l SurfaceLevel) String() string {
	switch l {
	case SurfaceFull:
		return "full"
	case SurfaceShort:
		return "short"
	case SurfaceIndex:
		return "index"
	}
	return fmt.Sprintf("SurfaceLevel(%d)", uint8(l))
}

// Generated is the façade of one server. It is deterministic: the same
// server name, listing and options give byte-identical fields.
type Generated struct {
	// ModuleName is the package name of the façade, derived from the server
	// name by the naming rule (docs/codegen.md).
	ModuleName string
	// Source is the verified source file.
	Source []byte
	// Surface is the text a model reads: a header line for the server and
	// one line per function.
	Surface string
	// Level is the rung of the ladder Surface is on.
	Level SurfaceLevel
	// Details holds, by function name, the full detail of each function:
	// its signature, description and parameter notes. It is the per-tool
	// lookup an index surface points to.
	Details map[string]string
	// ListingSHA256 is the hex SHA-256 of the canonical listing (see
	// listingDigest); the source's header carries it too.
	ListingSHA256 string
}

// toolPlan is the language-neutral reading of one tool that emitters work
// from.
type toolPlan struct {
	tool *Tool
	plan plan
}

// Generate plans, names, emits and verifies the façade of one server.
// server is the operator's name for it: it is sent verbatim in every call
// and names the package. It fails with an error matching one of the Err
// variables; it never panics, whatever tools holds.
func Generate(server string, tools []Tool, opts Options) (*Generated, error) {
	if opts.Lang != "" && opts.Lang != Go {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedLang, clip(string(opts.Lang), 40))
	}
	if err := checkServerName(server); err != nil {
		return nil, err
	}
	if len(tools) > MaxTools {
		return nil, fmt.Errorf("%w: %d tools, the limit is %d", ErrTooManyTools, len(tools), MaxTools)
	}
	plans := make([]toolPlan, len(tools))
	for i := range tools {
		if tools[i].Name == "" {
			return nil, &ListingError{i, "empty tool name"}
		}
		plans[i] = toolPlan{tool: &tools[i], plan: planSchema(tools[i].InputSchema)}
	}
	budget := opts.SurfaceBudget
	if budget <= 0 {
		budget = DefaultSurfaceBudget
	}
	digest := listingDigest(tools)
	out, err := emitGo(server, digest, plans)
	if err != nil {
		return nil, err
	}
	surface, level, err := renderSurface(out.header, out.entries, budget)
	if err != nil {
		return nil, err
	}
	details := make(map[string]string, len(out.entries))
	for _, e := range out.entries {
		details[e.name] = e.detail
	}
	return &Generated{
		ModuleName:    out.pkg,
		Source:        out.source,
		Surface:       surface,
		Level:         level,
		Details:       details,
		ListingSHA256: digest,
	}, nil
}

func checkServerName(s string) error {
	if s == "" || len(s) > maxServerName || !utf8.ValidString(s) {
		return fmt.Errorf("%w: want 1 to %d bytes of UTF-8", ErrBadServerName, maxServerName)
	}
	for _, r := range s {
		if isHidden(r) {
			return fmt.Errorf("%w: %q holds a control or format character", ErrBadServerName, s)
		}
	}
	return nil
}
