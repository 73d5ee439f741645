package redact

import (
	"cmp"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// Values returns a Replacer of each value in secrets (name → value) of at
// least minRedacted bytes, by "[redacted:NAME]", longest first, in its
// raw spelling and its JSON-escaped one (a value with a quote, a
// backslash or a control character appears escaped in a JSON log line);
// nil when there is nothing to replace. Unlike Redactor.Text it leaves
// credential shapes alone: it is for capbridge's own output to the
// operator, whose logs name what they name.
func Values(secrets map[string]string) *strings.Replacer {
	if r := values(secrets); r != nil {
		return r.Replacer
	}
	return nil
}

// replacer is a strings.Replacer with the pairs it was made of, in its
// order, which Writer needs to tell where a short write stopped.
type replacer struct {
	*strings.Replacer
	pairs []pair
}

type pair struct{ value, marker string }

// values is Values with the pairs its Replacer was made of.
func values(secrets map[string]string) *replacer {
	var pairs []pair
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		v := secrets[name]
		if len(v) < minRedacted {
			continue
		}
		m := "[redacted:" + name + "]"
		for _, v := range append([]string{v}, lines(v)...) {
			pairs = append(pairs, pair{v, m})
			if esc := jsonEscaped(v); esc != v {
				pairs = append(pairs, pair{esc, m})
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return cmp.Compare(len(b.value), len(a.value)) })
	flat := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		flat = append(flat, p.value, p.marker)
	}
	return &replacer{strings.NewReplacer(flat...), pairs}
}

// consumed is how many bytes of s the first m bytes of r.Replace(s)
// began to write: the end of the last part of s (a byte left alone, or a
// value replaced) of which at least one output byte is among the m. It
// matches as a strings.Replacer of its pairs does: from the left, at
// each byte the first pair whose value starts there, else the byte
// alone; the pairs are longest first, so the first is the longest.
func (r *replacer) consumed(s string, m int) int {
	out := 0 // the output bytes s[:i] became
	for i := 0; i < len(s); {
		if out >= m {
			return i
		}
		in, o := 1, 1
		for _, pr := range r.pairs {
			if strings.HasPrefix(s[i:], pr.value) {
				in, o = len(pr.value), len(pr.marker)
				break
			}
		}
		i, out = i+in, out+o
	}
	return len(s)
}

// lines are the lines of a value of several (a private key, a
// certificate), each at least minRedacted bytes: a server that prints
// such a value writes it a line at a time, and each line is logged, and
// so redacted, on its own.
func lines(v string) []string {
	if !strings.Contains(v, "\n") {
		return nil
	}
	var out []string
	for l := range strings.Lines(v) {
		if l = strings.TrimRight(l, "\r\n"); len(l) >= minRedacted {
			out = append(out, l)
		}
	}
	return out
}

// jsonEscaped is v as it appears inside a JSON string.
func jsonEscaped(v string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a string always encodes
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

// Writer writes what it is given to its writer with every secret value
// replaced (Values): the operator's logs, audit trail and terminal never
// show a secret capbridge resolved, whatever a server prints. Each Write
// must hold whole values, as a log line does (a value split across two
// writes is not seen). Safe for concurrent use when its writer is; the
// secrets may be replaced at any time (Set).
type Writer struct {
	w io.Writer
	r atomic.Pointer[replacer]
}

// NewWriter returns a Writer to w that replaces secrets.
func NewWriter(w io.Writer, secrets map[string]string) *Writer {
	rw := &Writer{w: w}
	rw.Set(secrets)
	return rw
}

// Set makes secrets the values replaced from now on.
func (w *Writer) Set(secrets map[string]string) { w.r.Store(values(secrets)) }

// Write writes p with the secrets replaced, reporting all of p written
// when the redacted text was.
//
// When only some of it was (a full disk), n counts the bytes of p whose
// redacted form began to be written: a secret counts as written once any
// byte of its marker was. So p[n:] starts between two parts of p, never
// inside a secret, and written again it continues the text without
// repeating any of it or sending any part of a secret. And a caller
// learns the write was cut where it was: n is above 0 when anything was
// written, below len(p) unless all that is missing is the end of the
// marker of a secret that ends p, and, unless a secret itself ends with
// a newline, p[n-1] is a newline just when the last byte written is one
// (a marker holds none). auditlog.Batch needs that to end a cut line
// before the next; counting only what was wholly written would say 0, or
// a line's end, for a line cut inside a marker at its start.
func (w *Writer) Write(p []byte) (int, error) {
	r := w.r.Load()
	if r == nil {
		return w.w.Write(p)
	}
	in := string(p)
	out := r.Replace(in)
	m, err := io.WriteString(w.w, out)
	if err == nil && m < len(out) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return r.consumed(in, max(0, min(m, len(out)))), err
	}
	return len(p), nil
}

// Text returns s with the secrets replaced.
func (w *Writer) Text(s string) string {
	if r := w.r.Load(); r != nil {
		return r.Replace(s)
	}
	return s
}

// Close closes the writer under it, if it is an io.Closer.
func (w *Writer) Close() error {
	if c, ok := w.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
