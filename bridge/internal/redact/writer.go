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
	type pair struct{ value, marker string }
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
	return strings.NewReplacer(flat...)
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
	r atomic.Pointer[strings.Replacer]
}

// NewWriter returns a Writer to w that replaces secrets.
func NewWriter(w io.Writer, secrets map[string]string) *Writer {
	rw := &Writer{w: w}
	rw.Set(secrets)
	return rw
}

// Set makes secrets the values replaced from now on.
func (w *Writer) Set(secrets map[string]string) { w.r.Store(Values(secrets)) }

// Write writes p with the secrets replaced, reporting all of p written
// when the redacted text was.
func (w *Writer) Write(p []byte) (int, error) {
	r := w.r.Load()
	if r == nil {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, r.Replace(string(p))); err != nil {
		return 0, err
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
