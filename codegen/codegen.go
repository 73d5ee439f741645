// Package codegen implements the generator that turns an MCP server's
// tools/list into typed façade source and the compact surface a model reads.
//
// A listing is untrusted input that becomes source code, so the package is
// built to keep server text inert: schemas are planned into a
// language-neutral type plan by a total, bounded function (plan.go) that
// never drops a required property; names are mangled by a rule that keeps
// them typeable and adds a SHA-256 suffix only on loss or collision
// (name.go); prose is stripped of
// control and bidi codepoints, capped and wrapped by the generator alone
// (sanitize.go); wire names reach the source only as fully escaped string
// literals; and the emitted file is parsed and checked before it is handed
// out (verify.go, verify_foreign.go). Planning, naming, sanitising and the
// surface ladder are language neutral (surface.go); each language adds an
// emitter (emit_go.go, emit_ts.go and emit_py.go, the last two sharing
// emit_foreign.go) and its surface (surface_go.go, surface_ts.go,
// surface_py.go).
//
// The package is pure: it returns source text and never compiles, spawns or
// writes files. Generate is safe for concurrent use. The format of the output
// is documented in docs/codegen.md.
package codegen

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"weak"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/truncate"
)

// Limits.
const (
	// MaxTools bounds the work of one Generate call: the most tools one
	// server may list (bound.MaxTools), which is also what the bridge's
	// MCP client reads, so Generate never refuses a listing the bridge
	// admitted.
	MaxTools = bound.MaxTools
	// MaxListingBytes caps the saved listing ParseListing reads: room for
	// MaxTools tools of 4 KiB each, several times the size of the tools of
	// real servers, so any listing the bridge serves can be saved and read
	// back.
	MaxListingBytes = MaxTools * 4 << 10
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
	// ErrTooManyTools: more tools than one Generate call plans.
	ErrTooManyTools = errors.New("codegen: too many tools")
	// ErrNameCollision: two names map to one identifier even with their
	// digest suffixes (*CollisionError).
	ErrNameCollision = errors.New("codegen: name collision")
	// ErrVerification: the emitted source failed verification
	// (*VerifyError). This is the generator's own failure, never the
	// server's: its sanitising did not hold, and the source is withheld.
	ErrVerification = errors.New("codegen: generated source failed verification")
	// ErrUnsupportedLang: Options.Lang names no emitter.
	ErrUnsupportedLang = errors.New("codegen: unsupported language")
	// ErrNoSuchTool: Describe was asked for a tool the façade lacks.
	ErrNoSuchTool = errors.New("codegen: no such tool")
)

// CollisionError names two names whose identifiers coincide even after
// the digest suffix: identical wire names, or a 32-bit digest near-miss.
// The server is refused rather than repaired, since either repair would
// guess.
type CollisionError struct {
	Ident string // the shared identifier
	A, B  string // the two names, in listing order
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("codegen: %q and %q both map to identifier %s", truncate.Ellipsis(e.A, 80), truncate.Ellipsis(e.B, 80), e.Ident)
}

// Is makes every CollisionError match ErrNameCollision.
func (e *CollisionError) Is(target error) bool { return target == ErrNameCollision }

// Lang selects an emitter.
type Lang string

// The emitters.
const (
	Go         Lang = "go"     // one Go file per server (emit_go.go)
	TypeScript Lang = "ts"     // one ES module per server (emit_ts.go)
	Python     Lang = "python" // one module per server (emit_py.go)
)

// checkLang resolves "" to Go and refuses a language without an emitter.
func checkLang(l Lang) (Lang, error) {
	switch l {
	case "":
		return Go, nil
	case Go, TypeScript, Python:
		return l, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnsupportedLang, truncate.Ellipsis(string(l), 40))
}

// Options tune Generate. The zero value is ready to use.
type Options struct {
	Lang          Lang // Go, TypeScript or Python; "" means Go
	SurfaceBudget int  // bytes; 0 means DefaultSurfaceBudget
	// SurfaceOnly names, plans and renders the surface, Describe and
	// Search, and fails as a full generation would for the listing and
	// its names, but writes no source: Source, JS and DTS are nil, and
	// In(Lang) writes them, once, when they are wanted. Writing and
	// verifying the source is most of a big listing's cost (seconds for
	// 10 000 tools), which a bridge need not pay before it serves calls.
	SurfaceOnly bool
}

// SurfaceLevel is the rung of the degradation ladder a surface landed on.
type SurfaceLevel uint8

// The ladder, from richest to leanest. Whatever a rung leaves out,
// Generated.Describe and Generated.Search serve.
const (
	// SurfaceFull: every declaration, descriptions of up to
	// surfaceLongDesc runes, defaults and ranges.
	SurfaceFull SurfaceLevel = iota
	// SurfaceShort: descriptions cut short, no defaults or ranges.
	SurfaceShort
	// SurfaceSignatures: the declarations without descriptions.
	SurfaceSignatures
	// SurfaceIndex: one line per tool, its name and a short description,
	// in pages of at most the budget (Generated.Pages).
	SurfaceIndex
)

func (l SurfaceLevel) String() string {
	switch l {
	case SurfaceFull:
		return "full"
	case SurfaceShort:
		return "short"
	case SurfaceSignatures:
		return "signatures"
	case SurfaceIndex:
		return "index"
	}
	return fmt.Sprintf("SurfaceLevel(%d)", uint8(l))
}

// Generated is the façade of one server. It is deterministic: the same
// server name, listing and options give byte-identical fields. Its fields
// are immutable and its methods safe for concurrent use.
type Generated struct {
	// ModuleName is the package name of the façade, derived from the server
	// name by the naming rule (docs/codegen.md).
	ModuleName string
	// Source is the verified source file; nil when Options.SurfaceOnly.
	Source []byte
	// Surface is the text a model reads about this server: one head line,
	// then the declarations of every tool at Level's detail (on the index
	// rung, the first page of the index). Preamble(lang) precedes it, once
	// however many servers' surfaces follow.
	Surface string
	// Level is the rung of the ladder Surface is on.
	Level SurfaceLevel
	// Pages holds every page of the index when Level is SurfaceIndex
	// (Pages[0] == Surface), and is nil otherwise.
	Pages []string
	// ListingSHA256 is the hex SHA-256 of the canonical listing (see
	// listingDigest); the source's header carries it too.
	ListingSHA256 string
	// Lang is the language of Source and the surface.
	Lang Lang
	// JS and DTS are, for TypeScript, Source as JavaScript and its
	// declarations (m.js and m.d.ts): a façade that runs as it is on Node,
	// with no compiler, and type-checks a program that imports it. Both
	// are verified as Source is. Nil for other languages.
	JS, DTS []byte

	docs        []toolDoc
	search      searchIndex
	surfaceOnly bool // Source is not written: In(Lang) writes it
	server      string
	tools       []Tool // as given to Generate, which never changes them
	budget      int
	// decls renders the tools' declarations for Describe; nil for a
	// listing of more than retainBytes, whose Describe plans it again
	// (declarations), holding what it planned in recent, weakly.
	decls  *declSet
	replan sync.Mutex // serialises planning again and guards recent
	recent weak.Pointer[declSet]

	mu    sync.Mutex          // guards other and full
	full  *Generated          // WithSource's result, when surfaceOnly
	other map[Lang]*Generated // In's results
}

// retainBytes is the largest listing, in bytes of names, prose and
// schemas, whose plans a façade keeps for Describe. Plans and their
// binding take several times the listing's size (some 80 MB for 10 000
// tools of a kilobyte): a bridge serving such a listing would hold them
// for its life for the rare describe request. A listing up to this size
// keeps them, as every listing did, and describes at once; a bigger one
// is planned again when described, which takes what its planning at boot
// took.
const retainBytes = 1 << 20

// listingBytes is the size retainBytes is compared with.
func listingBytes(tools []Tool) int {
	n := 0
	for i := range tools {
		t := &tools[i]
		n += len(t.Name) + len(t.Title) + len(t.Description) + len(t.InputSchema) + len(t.OutputSchema)
	}
	return n
}

// Generate plans, names, emits and verifies the façade of one server.
// server is the operator's name for it: it is sent verbatim in every call
// and names the package. It fails with an error matching one of the Err
// variables; it never panics, whatever tools holds, and never fails for
// the size of the surface.
func Generate(server string, tools []Tool, opts Options) (*Generated, error) {
	return generate(server, tools, opts, retainBytes)
}

// generate is Generate keeping the plans for Describe when the listing
// is at most retain bytes.
func generate(server string, tools []Tool, opts Options, retain int) (*Generated, error) {
	lang, err := checkLang(opts.Lang)
	if err != nil {
		return nil, err
	}
	if err := checkServerName(server); err != nil {
		return nil, err
	}
	if len(tools) > MaxTools {
		return nil, fmt.Errorf("%w: %d tools, the limit is %d", ErrTooManyTools, len(tools), MaxTools)
	}
	budget := opts.SurfaceBudget
	if budget <= 0 {
		budget = DefaultSurfaceBudget
	}
	ix := newSearchBuilder(len(tools))
	d, err := declare(server, tools, lang, !opts.SurfaceOnly, ix)
	if err != nil {
		return nil, err
	}
	g := &Generated{Lang: lang, ListingSHA256: d.digest, ModuleName: d.module, Source: d.source, JS: d.js, DTS: d.dts,
		docs: packDocs(d.docs), search: ix.index(), server: server, tools: slices.Clone(tools), budget: budget, surfaceOnly: opts.SurfaceOnly}
	head := surfaceHead(d.lead, g.ModuleName, server, len(tools))
	g.Surface, g.Level, g.Pages = renderSurface(head, g.docs, d.decls, budget)
	if listingBytes(tools) <= retain {
		g.decls = &declSet{decls: d.decls}
	}
	return g, nil
}

// packDocs moves the strings of docs into one allocation, in place, and
// returns docs. They were made one by one among the planning's garbage,
// tens of thousands of them for a big listing, each keeping a page of
// the heap mapped once that garbage is collected; one block keeps them
// together.
func packDocs(docs []toolDoc) []toolDoc {
	n := 0
	for _, d := range docs {
		n += len(d.name) + len(d.index) + len(d.sig)
	}
	var b strings.Builder
	b.Grow(n)
	for _, d := range docs {
		b.WriteString(d.name)
		b.WriteString(d.index)
		b.WriteString(d.sig)
	}
	all, at := b.String(), 0
	cut := func(s string) string {
		at += len(s)
		return all[at-len(s) : at]
	}
	for i := range docs {
		docs[i].name, docs[i].index, docs[i].sig = cut(docs[i].name), cut(docs[i].index), cut(docs[i].sig)
	}
	return docs
}

// declared is a listing planned, named and bound in one language.
type declared struct {
	module, lead, digest string // lead: the surface's head line, up to the module's name
	source, js, dts      []byte // with source only
	docs                 []toolDoc
	decls                []func(detail) string
}

// declare plans tools, binds them to lang's names and, with source,
// writes and verifies the source; it indexes the tools' words in ix
// unless ix is nil. Describe calls it again for a listing whose plans
// were not kept: it is deterministic, so it declares the same.
func declare(server string, tools []Tool, lang Lang, source bool, ix *searchBuilder) (*declared, error) {
	plans := make([]toolPlan, len(tools))
	for i := range tools {
		if tools[i].Name == "" {
			return nil, &ListingError{i, "empty tool name"}
		}
		plans[i] = planTool(&tools[i])
	}
	d := &declared{digest: listingDigest(tools)}
	switch lang {
	case Go:
		out, err := emitGo(server, d.digest, plans, source)
		if err != nil {
			return nil, err
		}
		d.module, d.source, d.lead = out.pkg, out.source, "// package"
		d.docs, d.decls = out.file.docs(ix)
	case TypeScript:
		f, files, err := emitTS(server, d.digest, plans, source)
		if err != nil {
			return nil, err
		}
		d.module, d.source, d.js, d.dts, d.lead = f.module, files.ts, files.js, files.dts, "// module"
		d.docs, d.decls = f.foreignDocs(f.tsSurface, f.tsIndex, f.tsSignature, ix)
	case Python:
		f, src, err := emitPython(server, d.digest, plans, source)
		if err != nil {
			return nil, err
		}
		d.module, d.source, d.lead = f.module, src, "# module"
		d.docs, d.decls = f.foreignDocs(f.pySurface, f.pyIndex, f.pySignature, ix)
	}
	return d, nil
}

// In returns the façade of the same server and listing in lang, with the
// same surface budget, and without its source if g is without: the
// bridge generates Go's surface at boot and other languages when asked.
// A language is generated once per Generated.
func (g *Generated) In(lang Lang) (*Generated, error) {
	lang, err := checkLang(lang)
	if err != nil {
		return nil, err
	}
	if lang == g.Lang {
		return g, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if other, ok := g.other[lang]; ok {
		return other, nil
	}
	other, err := Generate(g.server, g.tools, Options{Lang: lang, SurfaceBudget: g.budget, SurfaceOnly: g.surfaceOnly})
	if err != nil {
		return nil, err
	}
	if g.other == nil {
		g.other = map[Lang]*Generated{}
	}
	g.other[lang] = other
	return other, nil
}

// WithSource returns the façade with its source written: g itself, or,
// when g was generated SurfaceOnly, the same façade in full, written on
// the first call and kept.
func (g *Generated) WithSource() (*Generated, error) {
	if !g.surfaceOnly {
		return g, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full == nil {
		full, err := Generate(g.server, g.tools, Options{Lang: g.Lang, SurfaceBudget: g.budget})
		if err != nil {
			return nil, err
		}
		g.full = full
	}
	return g.full, nil
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
