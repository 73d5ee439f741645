// Package redact replaces secrets in what a server says, before
// capbridge repeats it to a caller: the values the server was given (its
// env and the variables it inherited), and whatever has the shape of a
// credential (bearer tokens, API keys of the common services, AWS access
// key ids, URL userinfo, private keys, "password=…").
package redact

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/capbridge/capbridge/internal/truncate"
)

// What a caller may learn of a failing server's stderr, when its
// stderr_to_caller is set: the last MaxTail bytes, after every value of
// its env at least minRedacted bytes long is replaced by
// "[redacted:NAME]". Shorter values are left alone: replacing "1" or
// "yes" everywhere would garble the text and hide nothing worth hiding.
const (
	MaxTail     = 2 << 10
	minRedacted = 4
)

// Redactor replaces the values of a server's environment, and
// credential shapes, in text the server produced. It is built once per
// server and safe for concurrent use.
type Redactor struct {
	whole *strings.Replacer // nil when there is nothing to redact
	// secrets are the values redacted, longest first, for the edges of a
	// tail (see tail).
	secrets []secret
}

// shapeRoom is how far past a cut Cut looks for the rest of a
// credential shape that starts before it.
const shapeRoom = 4 << 10

type secret struct{ name, value string }

// New returns a Redactor of the values in env, named by their keys: the
// variables the server runs with, given and inherited alike.
func New(env map[string]string) *Redactor {
	r := &Redactor{}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if v := env[name]; len(v) >= minRedacted {
			r.secrets = append(r.secrets, secret{name, v})
			for _, l := range lines(v) {
				r.secrets = append(r.secrets, secret{name, l})
			}
		}
	}
	if len(r.secrets) == 0 {
		return r
	}
	// Longest first: the Replacer tries its pairs in order at each
	// position, so a value that contains another is replaced whole.
	slices.SortStableFunc(r.secrets, func(a, b secret) int { return cmp.Compare(len(b.value), len(a.value)) })
	pairs := make([]string, 0, 2*len(r.secrets))
	for _, s := range r.secrets {
		pairs = append(pairs, s.value, s.marker())
	}
	r.whole = strings.NewReplacer(pairs...)
	return r
}

func (s secret) marker() string { return "[redacted:" + s.name + "]" }

// Text returns s with every whole occurrence of a secret, and every
// credential shape, replaced. It is for text the bridge composed around
// what the server sent (a reason, an error message), where a secret can
// only appear whole.
func (r *Redactor) Text(s string) string {
	if r.whole != nil {
		s = r.whole.Replace(s)
	}
	return redactShapes(s)
}

// Cut returns s redacted as Text redacts it, cut to at most n bytes
// (truncate.Ellipsis). The cut comes after the redaction, so it can
// split a marker but never leave a secret's start behind it. Only what
// a secret or shape starting within the first n bytes can reach is
// redacted, so a message of megabytes costs what a short one does.
func (r *Redactor) Cut(s string, n int) string {
	longest := 0
	if len(r.secrets) > 0 {
		longest = len(r.secrets[0].value)
	}
	if lim := n + longest + shapeRoom; len(s) > lim {
		s = s[:lim]
	}
	return truncate.Ellipsis(r.Text(s), n)
}

// Tail renders a stderr tail for a caller: valid UTF-8, secrets and
// credential shapes replaced, then cut to its last MaxTail bytes. A tail
// is the end of a ring that may start in the middle of a secret, and a
// server that died mid-write may leave one cut off at its end, so a
// secret's suffix at the start and its prefix at the end, at least
// minRedacted bytes of either, are replaced too; a tail longer than
// MaxTail loses its first line, which a shape may have lost the start
// of, and a shape's prefix at the very end is redacted with whatever
// follows it. The cut comes after the redaction, so it can split a
// marker but never expose part of a secret.
func (r *Redactor) Tail(b []byte) string {
	if len(b) > MaxTail {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	s := strings.TrimSpace(truncate.Tail(b, -1))
	if r.whole != nil {
		s = r.edges(r.whole.Replace(s))
	}
	s = cutShape.ReplaceAllLiteralString(redactShapes(s), "[redacted:cut]")
	if len(s) > MaxTail {
		const mark = "…"
		s = mark + truncate.Suffix(s, MaxTail-len(mark))
	}
	return s
}

// Ring returns the text of a ring buffer, which may start after a
// secret's first bytes and end before its last, with every secret
// replaced, its cut edges included (as Tail does), and nothing else:
// credential shapes are left, as in the operator's own views (Values).
func (r *Redactor) Ring(s string) string {
	if r.whole == nil {
		return s
	}
	return r.edges(r.whole.Replace(s))
}

// CutEnd returns s, a text cut short after its secrets were replaced,
// with a secret's start (at least minRedacted bytes of it) that ends it
// replaced too: the cut may have left one.
func (r *Redactor) CutEnd(s string) string {
	for _, sec := range r.secrets {
		if k := overlap(s, sec.value); k > 0 {
			return s[:len(s)-k] + sec.marker()
		}
	}
	return s
}

// edges replaces a secret's suffix that starts s and a secret's prefix
// that ends it, each the longest of any secret.
func (r *Redactor) edges(s string) string {
	for _, sec := range r.secrets {
		if k := overlap(sec.value, s); k > 0 {
			s = sec.marker() + s[k:]
			break
		}
	}
	return r.CutEnd(s)
}

// overlap returns the largest k ≥ minRedacted such that a's last k bytes
// are b's first k, or 0. (Full containment was replaced already.)
func overlap(a, b string) int {
	if len(a) < minRedacted || len(b) < minRedacted {
		return 0
	}
	// Every candidate starts where b's first minRedacted bytes occur in
	// a; the first such place that runs to a's end is the longest.
	head := b[:minRedacted]
	for i := 0; i+minRedacted <= len(a); {
		j := strings.Index(a[i:], head)
		if j < 0 {
			return 0
		}
		i += j
		if k := len(a) - i; k <= len(b) && a[i:] == b[:k] {
			return k
		}
		i++
	}
	return 0
}
