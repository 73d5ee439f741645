package codegen

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// What a tool's description must not lose on a lean rung: that the tool
// is deprecated (and what to use instead), and, where no output type says
// it, the shape of what it returns. Both are found by words, because
// servers say them in prose; a sentence that says either is kept whole
// however short the rung, and the rest fills what room is left.

// maxKeptSentence caps each sentence kept whatever the rung.
const maxKeptSentence = 160

// deprecated reports whether a tool's description says it is deprecated.
func deprecated(t *Tool) bool {
	return strings.Contains(strings.ToLower(t.Description), "deprecated")
}

// outputWords mark a sentence that says what a tool returns.
var outputWords = []string{"return", "json", "format", "output", "result", "each entry", "prefix"}

func saysOutput(sentence string) bool {
	l := strings.ToLower(sentence)
	for _, w := range outputWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// sentences splits cleaned prose after '.', '!' or '?' followed by a
// space.
func sentences(s string) []string {
	var out []string
	for {
		i := -1
		for j := 1; j+1 < len(s); j++ {
			if s[j] == ' ' && strings.IndexByte(".!?", s[j-1]) >= 0 {
				i = j
				break
			}
		}
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

// toolProse is a tool's description on a rung whose cap is
// limit runes (plus credit, the bytes the surface saved by leaving its output type
// out). A deprecation leads and is kept whole ("DEPRECATED:" dropped: the
// label says it); with credit, so is the first later sentence that says
// what the tool returns; the first sentence comes next, cut to fit, then
// the others in order while what is left of the cap allows. Whatever is left out
// ends in "…". In a description (lv detailDescribe) the whole text is
// quoted.
func toolProse(t *Tool, lv detail, limit, credit int) string {
	desc := toolDescription(t)
	if lv == detailDescribe {
		return quoted(desc, maxToolDesc)
	}
	dep := deprecated(t)
	if !dep && credit == 0 {
		return quotedCut(desc, limit)
	}
	all := sentences(cleanText(desc, maxToolDesc))
	must := make([]bool, len(all))
	left := limit + credit
	var lead []string
	for i, s := range all {
		if dep && strings.Contains(strings.ToLower(s), "deprecated") {
			s = strings.TrimSpace(strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(s, "DEPRECATED"), "Deprecated"), ":.-"))
			lead = append(lead, cleanText(s, maxKeptSentence))
			left -= utf8.RuneCountInString(lead[len(lead)-1]) + 1
			all[i], must[i] = "", true
		}
	}
	if credit > 0 {
		for i, s := range all {
			if i > 0 && !must[i] && saysOutput(s) {
				all[i], must[i] = cleanText(s, maxKeptSentence), true
				left -= utf8.RuneCountInString(all[i]) + 1
				break
			}
		}
	}
	// Credit pays for what must stay; the rest fills no more than the cap.
	left = min(left, limit)
	kept := lead
	whole := true
	for i, s := range all {
		switch n := utf8.RuneCountInString(s) + 1; {
		case s == "":
		case must[i]:
			kept = append(kept, s)
		case i == 0 && n > left:
			kept = append(kept, cutWords(s, max(left, limit/2)))
			whole = false
		case n <= left && whole:
			kept = append(kept, s)
			left -= n
		default:
			whole = false
		}
	}
	out := strings.Join(kept, " ")
	if !whole && !strings.HasSuffix(out, "…") {
		out += "…"
	}
	return strconv.Quote(out)
}

// cutWords is cleanText(s, n) cut back to a word boundary when it cuts.
func cutWords(s string, n int) string {
	c := cleanText(s, n)
	if body, ok := strings.CutSuffix(c, "…"); ok {
		if i := strings.LastIndexByte(body, ' '); i > 0 {
			return body[:i] + "…"
		}
	}
	return c
}
