package codegen

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// retainListings are the listings the retained and re-planned paths are
// compared on: the goldens' and a large one.
func retainListings(t *testing.T) map[string][]Tool {
	t.Helper()
	out := map[string][]Tool{"large": largeListing()}
	paths, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		tools, err := readListing(t, p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = tools
	}
	return out
}

// TestDescribeReplanned: a façade that did not keep its plans describes
// every tool, alone or together, byte for byte as one that kept them, in
// every language, from many goroutines at once.
func TestDescribeReplanned(t *testing.T) {
	for name, tools := range retainListings(t) {
		for _, lang := range []Lang{Go, TypeScript, Python} {
			kept, err := generate(name, tools, Options{Lang: lang, SurfaceOnly: true}, math.MaxInt)
			if err != nil {
				t.Fatal(err)
			}
			lean, err := generate(name, tools, Options{Lang: lang, SurfaceOnly: true}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if kept.decls == nil || lean.decls != nil {
				t.Fatalf("%s/%s: retention not as asked", name, lang)
			}
			if lean.Surface != kept.Surface || strings.Join(lean.Pages, "") != strings.Join(kept.Pages, "") {
				t.Errorf("%s/%s: the surface depends on keeping the plans", name, lang)
			}
			want, err := kept.Describe()
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan string, 4*len(tools)+4)
			for range 4 {
				wg.Go(func() {
					if got, err := lean.Describe(); err != nil || got != want {
						errs <- fmt.Sprintf("Describe() differs: %v", err)
					}
				})
			}
			for i, d := range kept.docs {
				if i%7 != 0 {
					continue
				}
				wg.Go(func() {
					a, _ := kept.Describe(d.wire, d.name)
					b, err := lean.Describe(d.wire, d.name)
					if err != nil || a != b {
						errs <- fmt.Sprintf("Describe(%s) differs: %v", d.wire, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("%s/%s: %s", name, lang, e)
			}
			if _, err := lean.Describe("no such tool"); err == nil {
				t.Errorf("%s/%s: describing a tool the façade lacks", name, lang)
			}
		}
	}
}

// TestRetainBytes: Generate keeps the plans of a listing up to
// retainBytes and not of a bigger one.
func TestRetainBytes(t *testing.T) {
	small := largeListing()
	if g, err := Generate("small", small, Options{SurfaceOnly: true}); err != nil || g.decls == nil {
		t.Fatalf("a listing of %d bytes: plans kept %v, %v", listingBytes(small), g != nil && g.decls != nil, err)
	}
	big := bigListing(t, 1000)
	if listingBytes(big) <= retainBytes {
		t.Fatalf("the big listing is %d bytes, not over %d", listingBytes(big), retainBytes)
	}
	if g, err := Generate("big", big, Options{SurfaceOnly: true}); err != nil || g.decls != nil {
		t.Fatalf("a listing of %d bytes: plans kept %v, %v", listingBytes(big), g != nil && g.decls != nil, err)
	}
}

// searchByWords is Search over every tool's words and weights as
// separate lists, the form the compact index replaced.
func searchByWords(g *Generated, query string, limit int) []Match {
	var out []Match
	for i, d := range g.docs {
		score := 0
		for _, t := range searchWords(query) {
			best := 0
			for _, p := range g.search.posts[g.search.start[i]:g.search.start[i+1]] {
				w, weight := g.search.words[p>>postWeightBits], int(p&(1<<postWeightBits-1))
				if strings.Contains(w, t) && weight > best {
					best = weight
					if w == t {
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

// TestSearchIndex: each tool's entry in the compact index is its name's
// words at weight 4, its title's at 3, its description's at 2, its
// arguments' at 1, in that order; and Search ranks as a scan of those
// words does.
func TestSearchIndex(t *testing.T) {
	queries := []string{"list directory", "read file", "browser action 7", "a e i o u", "entities", "zzzz", "get", "Issue", "x"}
	for name, tools := range retainListings(t) {
		g, err := Generate(name, tools, Options{SurfaceOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, tool := range tools {
			var want []string
			for _, part := range []struct {
				text string
				w    int
			}{{tool.Name, 4}, {tool.Title, 3}, {cleanText(tool.Description, maxToolDesc), 2}} {
				for _, word := range searchWords(part.text) {
					want = append(want, fmt.Sprintf("%s/%d", word, part.w))
				}
			}
			var got []string
			for _, p := range g.search.posts[g.search.start[i]:g.search.start[i+1]] {
				got = append(got, fmt.Sprintf("%s/%d", g.search.words[p>>postWeightBits], p&(1<<postWeightBits-1)))
			}
			if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
				t.Fatalf("%s: tool %s indexed as %v, want it to start %v", name, tool.Name, got, want)
			}
			for _, rest := range got[len(want):] {
				if !strings.HasSuffix(rest, "/1") {
					t.Fatalf("%s: tool %s: argument word %s", name, tool.Name, rest)
				}
			}
		}
		for _, q := range queries {
			for _, limit := range []int{-1, 3} {
				if a, b := g.Search(q, limit), searchByWords(g, q, limit); fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("%s: Search(%q, %d) = %v, a scan of the words gives %v", name, q, limit, a, b)
				}
			}
		}
	}
}

// wordsByRunes is how search words were split before splitWords: runes
// gathered, then strings.ToLower of them.
func wordsByRunes(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && prevLower {
				flush()
			}
			cur = append(cur, r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		default:
			flush()
			prevLower = false
		}
		if len(words) > 512 {
			break
		}
	}
	flush()
	return words
}

// TestSearchBuilderWords: queries and the index split and lower-case
// text into the words gathering runes and lower-casing them gives, the
// cap on words included.
func TestSearchBuilderWords(t *testing.T) {
	for _, text := range []string{
		"", "getUserByID", "HTTPServer2Go", "snake_case-and kebab", "İstanbul ΣΊΣΥΦΟΣ Straße ǅemal ΑΣ", "a\xffb\u200bc",
		strings.Repeat("word ", 600), strings.Repeat("aB", 700), "x1Y2z3", strings.Repeat("Ǆ", 3),
	} {
		want := wordsByRunes(text)
		if got := searchWords(text); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%.40q: searchWords %d words %.80q, want %d %.80q", text, len(got), got, len(want), want)
		}
		b := newSearchBuilder(1)
		b.words(text, 2)
		var got []string
		for _, p := range b.ix.posts {
			got = append(got, b.ix.words[p>>postWeightBits])
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%.40q: indexed %d words %.80q, want %d %.80q", text, len(got), got, len(want), want)
		}
	}
}
