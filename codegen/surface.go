package codegen

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"weak"

	"github.com/capbridge/capbridge/internal/truncate"
)

// Description lengths, in runes, on the rungs of the ladder.
const (
	surfaceLongDesc   = 72 // a tool, full rung
	surfaceShortDesc  = 50 // a tool, short rung and index
	surfaceFieldLong  = 45 // a field, full rung
	surfaceFieldShort = 30 // a field, short rung
	surfaceNoteLong   = 32 // a default, range or pattern's value, full rung
	maxEnumShown      = 32 // enum constants listed on a surface
)

// detail is how much of a tool's declarations a rendering shows.
type detail uint8

const (
	detailDescribe detail = iota // everything, descriptions at the source's caps
	detailFull                   // descriptions, defaults and ranges
	detailShort                  // short descriptions
	detailSigs                   // declarations only
)

// toolDoc is one tool as the surface's index, Describe and Search name
// it. What renders its declarations is apart (declSet): it holds the
// plans, which a big listing does not keep.
type toolDoc struct {
	name  string // the function's identifier
	wire  string // the tool's wire name
	index string // the index line
	sig   string // the one-line call signature
}

// declSet renders each tool's declarations at a detail, in listing
// order. Its functions read the emitter's memos, so they are called only
// while Generate runs or under mu; and they hold the listing's plans and
// their binding, several times the listing's size.
type declSet struct {
	mu    sync.Mutex
	decls []func(detail) string
}

// surfaceHead is a server's first line on the surface, for a rung and an
// index page: lead and the module's name, the server's name where the
// module's does not spell it, and how many tools it has.
func surfaceHead(lead, module, server string, tools int) func(SurfaceLevel, int, int) string {
	return func(level SurfaceLevel, page, pages int) string {
		s := lead + " " + module
		if module != server {
			s += ": MCP server " + strconv.QuoteToASCII(server)
		}
		if tools == 1 {
			s += ", 1 tool"
		} else {
			s += ", " + strconv.Itoa(tools) + " tools"
		}
		switch level {
		case SurfaceSignatures:
			s += "; declarations only"
		case SurfaceIndex:
			s += "; index page " + strconv.Itoa(page) + " of " + strconv.Itoa(pages)
		}
		return s + "\n"
	}
}

// renderSurface renders the surface on the richest rung that fits budget
// bytes: full, short descriptions, declarations only, then the index of
// names, split into pages if one page cannot hold it. It never refuses:
// what a rung leaves out, Describe serves. head is the server's first
// line for a rung and page; the preamble all servers share is not part
// of it.
func renderSurface(head func(SurfaceLevel, int, int) string, docs []toolDoc, decls []func(detail) string, budget int) (string, SurfaceLevel, []string) {
	for level := SurfaceFull; level <= SurfaceSignatures; level++ {
		var b strings.Builder
		b.WriteString(head(level, 1, 1))
		for _, decl := range decls {
			if b.Len() > budget {
				break // this rung is too big already: render no more of it
			}
			b.WriteString(decl(detailFull + detail(level)))
		}
		if b.Len() <= budget {
			return b.String(), level, nil
		}
	}
	var pages []string
	var lines []string
	size := 0
	headLen := len(head(SurfaceIndex, 99999, 99999))
	for _, d := range docs {
		if len(lines) > 0 && headLen+size+len(d.index)+1 > budget {
			pages = append(pages, strings.Join(lines, ""))
			lines, size = nil, 0
		}
		lines = append(lines, d.index+"\n")
		size += len(d.index) + 1
	}
	pages = append(pages, strings.Join(lines, ""))
	for i := range pages {
		pages[i] = head(SurfaceIndex, i+1, len(pages)) + pages[i]
	}
	return pages[0], SurfaceIndex, pages
}

// referenced lists the declared types the arguments and output of tool
// plan tp use, directly or through other types, in first-use order: what a
// tool's description spells out beside it. Every language's surface asks
// the Go binding, whose canonical types its own type names follow.
func (f *goFile) referenced(tp *toolPlan) []*typeDef {
	var out []*typeDef
	seen := map[*typeDef]bool{}
	var walk func(t typ)
	walk = func(t typ) {
		for t.kind == kList || t.kind == kMap {
			t = *t.elem
		}
		if t.kind != kNamed {
			return
		}
		d := f.canon(t.def)
		if seen[d] || len(seen) > maxDefs*4 {
			return
		}
		seen[d] = true
		out = append(out, d)
		for _, fl := range d.fields {
			walk(fl.typ)
		}
		for _, v := range d.variants {
			walk(v.typ)
		}
	}
	if tp.args != nil {
		walk(typ{kind: kNamed, def: tp.args})
	}
	if tp.output != nil {
		walk(*tp.output)
	}
	return out
}

// textOutputs are the output types the surfaces' rungs leave out (a
// description keeps them), by the tool that declares them: records of one
// required string property, which type nothing a program needs beyond the
// result's text ("text result" says so). A type another tool's
// declarations also use is kept.
func (f *goFile) textOutputs() map[string]*typeDef {
	out := map[string]*typeDef{}
	elided := map[*typeDef]bool{}
	for _, fn := range f.funcs {
		o := fn.tp.output
		if o == nil || o.kind != kNamed || o.nullable || o.def.kind != dRecord || len(o.def.fields) != 1 {
			continue
		}
		if fl := o.def.fields[0]; fl.typ.kind != kString || fl.typ.nullable || !fl.required {
			continue
		}
		out[fn.tp.tool.Name] = f.canon(o.def)
		elided[f.canon(o.def)] = true
	}
	for _, fn := range f.funcs {
		for _, d := range f.referenced(fn.tp) {
			if elided[d] && out[fn.tp.tool.Name] != d {
				for k, v := range out {
					if v == d {
						delete(out, k)
					}
				}
			}
		}
	}
	return out
}

// toolLabels are the labels a surface puts before a tool's description:
// task (on every rung: it changes how long a call takes), destructive and
// deprecated (rung lv), and "text result" when its output type was left
// out.
func toolLabels(t *Tool, lv detail, textOut bool) []string {
	var parts []string
	if t.Task {
		parts = append(parts, "task")
	}
	if lv <= detailFull && t.Hints.Destructive != nil && *t.Hints.Destructive {
		parts = append(parts, "destructive")
	}
	if lv <= detailShort && deprecated(t) {
		parts = append(parts, "deprecated")
	}
	if textOut {
		parts = append(parts, "text result")
	}
	return parts
}

// elided is the output type fn's declaration at detail lv leaves out
// (nil: none; a description gives the tool whole) and the bytes that
// saves, beyond the "text result" label, rendered by render.
func (f *fFile) elided(fn *fFunc, lv detail, render func(*strings.Builder, *typeDef, detail)) (*typeDef, int) {
	d := f.textOut[fn.tp.tool.Name]
	if d == nil || lv == detailDescribe {
		return nil, 0
	}
	var skipped strings.Builder
	render(&skipped, d, lv)
	return d, max(0, skipped.Len()-len("text result, "))
}

// proseCaps are a tool description's caps in runes, by detail.
var proseCaps = [...]int{detailDescribe: maxToolDesc, detailFull: surfaceLongDesc, detailShort: surfaceShortDesc}

// foreignDocs renders every tool for a TypeScript or Python surface,
// Describe and Search with the language's renderers: decl writes a tool's
// declarations at a detail, index its index line, sig its one-line call.
// It indexes each tool's words in ix unless ix is nil.
func (f *fFile) foreignDocs(decl func(*strings.Builder, *fFunc, detail), index func(*fFunc) string, sig func(*fFunc) string, ix *searchBuilder) ([]toolDoc, []func(detail) string) {
	f.textOut = f.g.textOutputs()
	out := make([]toolDoc, 0, len(f.funcs))
	decls := make([]func(detail) string, 0, len(f.funcs))
	for _, fn := range f.funcs {
		out = append(out, toolDoc{name: fn.name, wire: fn.tp.tool.Name, index: index(fn), sig: sig(fn)})
		decls = append(decls, func(lv detail) string {
			var b strings.Builder
			decl(&b, fn, lv)
			return b.String()
		})
		ix.add(fn.tp.tool, argsOf(fn))
	}
	return out, decls
}

// toolNoteF is what a TypeScript or Python surface says of a tool after
// its declaration (the Go surface's is goFile.toolNote): its wire name
// when the function's name does not spell it in style st, destructive,
// and its description.
func toolNoteF(fn *fFunc, st style, lv detail, textOut *typeDef, credit int) string {
	t := fn.tp.tool
	var parts []string
	w, lost := spell(t.Name, st)
	if lost || w != fn.name || lv == detailDescribe {
		parts = append(parts, "tool "+quoted(truncate.Ellipsis(t.Name, maxNameNote), maxNameNote))
	}
	parts = append(parts, toolLabels(t, lv, textOut != nil)...)
	if desc := toolDescription(t); desc != "" && lv != detailSigs {
		parts = append(parts, toolProse(t, lv, proseCaps[lv], credit))
	}
	return strings.Join(parts, ", ")
}

// fieldFacts are a field's notes on a surface rung: its description, then
// facts (what the language's type leaves unsaid), why it is untyped, and on
// the full rung and in descriptions its default, range, sizes, format and
// pattern.
func fieldFacts(fl field, lv detail, facts ...string) []string {
	var parts []string
	if lv != detailSigs && fl.doc != "" && cleanText(fl.doc, 1) != "" {
		parts = append(parts, proseAt(fl.doc, lv, [...]int{detailDescribe: maxFieldDoc, detailFull: surfaceFieldLong, detailShort: surfaceFieldShort}))
	}
	parts = append(parts, facts...)
	if why := untypedReason(fl.typ); why != "" {
		parts = append(parts, "untyped: "+quoted(why, maxParamNote))
	}
	switch lv {
	case detailDescribe:
		parts = append(parts, compactNotes(fl.notes, maxNoteRunes)...)
	case detailFull:
		parts = append(parts, compactNotes(fl.notes, surfaceNoteLong)...)
	}
	return parts
}

// typeDoc is the description of a declared type behind mark, on the full
// rung and in a description; none on a leaner rung.
func typeDoc(d *typeDef, lv detail, mark string) string {
	if lv > detailFull || cleanText(d.doc, 1) == "" {
		return ""
	}
	return mark + proseAt(d.doc, lv, [3]int{detailDescribe: maxFieldDoc, detailFull: surfaceFieldLong})
}

// unionTell is the note after a union's declaration, behind mark: the
// property that tells its variants apart, or that nothing in the value
// does; none where their JSON kinds do.
func unionTell(d *typeDef, mark string) string {
	switch {
	case d.discriminator != "":
		return mark + "by " + quoted(d.discriminator, maxNameNote)
	case !d.decidable:
		return mark + "not decidable from the value"
	}
	return ""
}

// Describe returns the full declarations of the named tools, by function
// name or wire name, in the order first asked, each once (none named:
// every tool, in listing order): what a lean rung of the surface leaves
// out. It is the pure half of the control plane's describe request, so
// its cost is bounded by the listing, not by how often a name repeats.
// For a listing whose plans Generate did not keep (see retainBytes) it
// plans the listing again, as Generate did, so its text is the same
// either way.
func (g *Generated) Describe(names ...string) (string, error) {
	at := make([]int, 0, len(g.docs)) // each tool at most once
	if len(names) == 0 {
		for i := range g.docs {
			at = append(at, i)
		}
	}
	var index map[string]int // by name and wire name, once many are asked
	if len(names) > 8 {
		index = make(map[string]int, 2*len(g.docs))
		// From the last: each string keeps the first tool it names, as
		// the scan below finds.
		for i := len(g.docs) - 1; i >= 0; i-- {
			index[g.docs[i].wire] = i
			index[g.docs[i].name] = i
		}
	}
	seen := make(map[int]bool, min(len(names), len(g.docs)))
	for _, n := range names {
		k, ok := index[n]
		if index == nil {
			k = slices.IndexFunc(g.docs, func(d toolDoc) bool { return d.name == n || d.wire == n })
			ok = k >= 0
		}
		if !ok {
			return "", fmt.Errorf("%w: %s", ErrNoSuchTool, strconv.QuoteToASCII(truncate.Ellipsis(n, 80)))
		}
		if !seen[k] {
			seen[k] = true
			at = append(at, k)
		}
	}
	ds, err := g.declarations()
	if err != nil {
		return "", err
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var b strings.Builder
	for i, k := range at {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(ds.decls[k](detailDescribe))
	}
	return b.String(), nil
}

// declarations returns what renders the tools' declarations: the set
// Generate kept, or one planned again. One planning runs at a time per
// façade, and its result is held weakly, so describing several tools in a
// row plans once, and nothing of it outlives the next collection that
// finds it unused.
func (g *Generated) declarations() (*declSet, error) {
	if g.decls != nil {
		return g.decls, nil
	}
	g.replan.Lock()
	defer g.replan.Unlock()
	if ds := g.recent.Value(); ds != nil {
		return ds, nil
	}
	d, err := declare(g.server, g.tools, g.Lang, false, nil)
	if err != nil {
		return nil, err
	}
	ds := &declSet{decls: d.decls}
	g.recent = weak.Make(ds)
	return ds, nil
}

// WireName returns the wire name of the tool named by its function or
// wire name, and whether there is one.
func (g *Generated) WireName(name string) (string, bool) {
	for _, d := range g.docs {
		if d.name == name || d.wire == name {
			return d.wire, true
		}
	}
	return "", false
}

// ToolNames lists the tools' wire names in listing order.
func (g *Generated) ToolNames() []string {
	out := make([]string, len(g.docs))
	for i, d := range g.docs {
		out[i] = d.wire
	}
	return out
}

// Match is one tool Search found.
type Match struct {
	Func      string // the façade function
	Tool      string // the wire name
	Signature string // "pkg.Func(ctx, pkg.FuncArgs{Field T; …})"
	Score     int    // higher is better
}

// Search ranks the tools by the words of query (case-insensitive; a word
// in the tool's name counts most, then its title and description, then
// its argument names) and returns at most limit matches with a score above
// zero, best first, ties in listing order. It is the pure half of the
// control plane's search request.
func (g *Generated) Search(query string, limit int) []Match {
	terms := searchWords(query)
	ix := &g.search
	// Which words of the index each term is in, and equals, is decided
	// once per distinct word rather than once per tool using it.
	const in, equal = 1, 2
	match := make([][]uint8, len(terms))
	for j, t := range terms {
		match[j] = make([]uint8, len(ix.words))
		for w, word := range ix.words {
			switch {
			case word == t:
				match[j][w] = in | equal
			case strings.Contains(word, t):
				match[j][w] = in
			}
		}
	}
	var out []Match
	for i, d := range g.docs {
		posts := ix.posts[ix.start[i]:ix.start[i+1]]
		score := 0
		for j := range terms {
			best := 0
			for _, p := range posts {
				m, weight := match[j][p>>postWeightBits], int(p&(1<<postWeightBits-1))
				if m&in != 0 && weight > best {
					best = weight
					if m&equal != 0 {
						best++
					}
				}
			}
			score += best
		}
		if score > 0 {
			out = append(out, Match{Func: d.name, Tool: d.wire, Signature: d.sig, Score: score})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// searchIndex is the words every tool is found by, compactly: each
// distinct word once, and per tool, in the order its words occur, one
// uint32 naming a word and its weight. A listing repeats its words from
// tool to tool, so this is a fraction of a list of strings per tool.
type searchIndex struct {
	words []string // distinct lower-case words
	posts []uint32 // word index << postWeightBits | weight
	start []uint32 // tool i's posts are posts[start[i]:start[i+1]]
}

// postWeightBits holds a word's weight, 1 to 4, in a post.
const postWeightBits = 3

// searchBuilder builds a searchIndex, tool by tool in listing order. A
// nil *searchBuilder indexes nothing.
type searchBuilder struct {
	ix      searchIndex
	ids     map[string]uint32
	scratch []byte
}

func newSearchBuilder(tools int) *searchBuilder {
	return &searchBuilder{ix: searchIndex{start: make([]uint32, 1, tools+1)}, ids: map[string]uint32{}}
}

// add indexes tool t: the words of its wire name weigh most, then its
// title, its description, and the wire names of its arguments (args may
// be nil).
func (b *searchBuilder) add(t *Tool, args *typeDef) {
	if b == nil {
		return
	}
	b.words(t.Name, 4)
	b.words(t.Title, 3)
	b.words(cleanText(t.Description, maxToolDesc), 2)
	if args != nil {
		for _, fl := range args.fields {
			b.words(fl.wire, 1)
		}
	}
	b.ix.start = append(b.ix.start, uint32(len(b.ix.posts)))
}

// words indexes the words of text, at weight w: the words searchWords
// gives, lower-cased into a scratch buffer rather than each into a
// string of its own, since most are in the index already.
func (b *searchBuilder) words(text string, w uint32) {
	b.scratch = splitWords(text, b.scratch, func(word []byte) {
		id, ok := b.ids[string(word)]
		if !ok {
			id = uint32(len(b.ix.words))
			s := string(word)
			b.ids[s] = id
			b.ix.words = append(b.ix.words, s)
		}
		b.ix.posts = append(b.ix.posts, id<<postWeightBits|w)
	})
}

// index is the index built, its slices cut to their size and its words
// in one allocation (see packDocs).
func (b *searchBuilder) index() searchIndex {
	var all strings.Builder
	for _, w := range b.ix.words {
		all.WriteString(w)
	}
	words, s := make([]string, len(b.ix.words)), all.String()
	for i, w := range b.ix.words {
		words[i], s = s[:len(w)], s[len(w):]
	}
	return searchIndex{words: words, posts: slices.Clone(b.ix.posts), start: slices.Clip(b.ix.start)}
}

// searchWords splits text into lower-case words of letters and digits,
// also at camelCase boundaries.
func searchWords(s string) []string {
	var words []string
	splitWords(s, nil, func(w []byte) { words = append(words, string(w)) })
	return words
}

// splitWords calls emit with each word of searchWords, lower-cased into
// buf (emit must copy what it keeps), at most 514 of them, and returns
// buf for the next call.
func splitWords(s string, buf []byte, emit func([]byte)) []byte {
	cur, n := buf[:0], 0
	flush := func() {
		if len(cur) > 0 {
			emit(cur)
			cur, n = cur[:0], n+1
		}
	}
	prevLower := false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && prevLower {
				flush()
			}
			cur = utf8.AppendRune(cur, unicode.ToLower(r))
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		default:
			flush()
			prevLower = false
		}
		if n > 512 {
			break
		}
	}
	flush()
	return cur
}

// quoted is server prose as the surface shows it: cleaned, capped and a
// Go string literal, so no description can pass for a declaration.
func quoted(s string, max int) string {
	return strconv.Quote(cleanText(s, max))
}

// quotedCut is quoted for a lean rung: prose longer than max runes is
// cut after its last whole sentence that fits, if that keeps at least
// half of max, else at max; either way it ends in "…". A whole sentence
// says more than one cut mid-word, in fewer bytes.
func quotedCut(s string, max int) string {
	c := cleanText(s, max)
	if !strings.HasSuffix(c, "…") || c == cleanText(s, max+1) {
		return strconv.Quote(c)
	}
	for i := len(c) - 1; i > 0; i-- {
		if c[i] == ' ' && strings.IndexByte(".!?", c[i-1]) >= 0 {
			if utf8.RuneCountInString(c[:i]) >= max/2 {
				return strconv.Quote(c[:i] + "…")
			}
			break
		}
	}
	return strconv.Quote(c)
}

// Preamble is the fixed text that precedes the surfaces of every server
// for lang ("" means Go; each language's is in its surface_*.go): how to
// import and call a façade and what the surface's notation means. It is
// printed once, however many servers follow.
func Preamble(lang Lang) (string, error) {
	lang, err := checkLang(lang)
	if err != nil {
		return "", err
	}
	switch lang {
	case TypeScript:
		return tsPreambleText, nil
	case Python:
		return pyPreambleText, nil
	}
	return goPreambleText, nil
}

// proseAt quotes server prose for detail lv, whose caps are max: whole
// up to the source's cap in a description, cut at a sentence on a rung.
func proseAt(s string, lv detail, max [3]int) string {
	if lv == detailDescribe {
		return quoted(s, max[lv])
	}
	return quotedCut(s, max[lv])
}

// maxOneLine is the most fields a record without comments is written on
// one line with.
const maxOneLine = 4

// oneLine reports fields short enough, and bare enough, for one line.
func oneLine(lines []string) bool {
	if len(lines) > maxOneLine {
		return false
	}
	for _, l := range lines {
		if strings.Contains(l, "//") {
			return false
		}
	}
	return true
}

// noteLabels are the labels describeSchema gives notes, longest first so
// that no label is read as a prefix of another.
var noteLabels = []string{"exclusive minimum", "exclusive maximum", "min length", "max length", "min items", "max items", "minimum", "maximum", "default", "format", "pattern"}

// compactNotes writes a field's notes in the surface's notation: =v for a
// default, lo..hi, >=lo or <=hi (> and < when exclusive) for a range,
// "len" and "items" before the range of a length or an item count, and
// format and pattern as they are. The values are JSON literals, cleaned,
// and cut at max runes.
func compactNotes(notes []string, max int) []string {
	val := map[string]string{}
	for _, n := range notes {
		for _, l := range noteLabels {
			if v, ok := strings.CutPrefix(n, l+" "); ok {
				val[l] = noteValue(v, max)
				break
			}
		}
	}
	var out []string
	if v, ok := val["default"]; ok {
		out = append(out, "="+v)
	}
	span := func(prefix, lo, hi, xlo, xhi string) {
		l, hasL := val[lo]
		h, hasH := val[hi]
		xl, hasXL := val[xlo]
		xh, hasXH := val[xhi]
		switch {
		case hasL && hasH:
			out = append(out, prefix+l+".."+h)
		case hasL:
			out = append(out, prefix+">="+l)
		case hasH:
			out = append(out, prefix+"<="+h)
		}
		if hasXL {
			out = append(out, prefix+">"+xl)
		}
		if hasXH {
			out = append(out, prefix+"<"+xh)
		}
	}
	span("", "minimum", "maximum", "exclusive minimum", "exclusive maximum")
	span("len ", "min length", "max length", "", "")
	span("items ", "min items", "max items", "", "")
	for _, l := range []string{"format", "pattern"} {
		if v, ok := val[l]; ok {
			out = append(out, l+" "+v)
		}
	}
	return out
}

// noteValue is cleanText(v, max) for a note's JSON value, with a string
// the cut left open closed again in the same length: the next note's
// opening quote would otherwise close it, leaving that note's text, the
// server's words, outside any quotes.
func noteValue(v string, max int) string {
	c := cleanText(v, max)
	if !openString(c) {
		return c
	}
	if c = cleanText(v, max-1); openString(c) {
		c += `"`
	}
	return c
}

// openString reports whether v ends inside a JSON string.
func openString(v string) bool {
	open := false
	for i := 0; i < len(v); i++ {
		switch {
		case open && v[i] == '\\':
			i++
		case v[i] == '"':
			open = !open
		}
	}
	return open
}
