//go:build !race

package interchange

import "testing"

// This file is left out of race builds: the race detector's sync.Pool
// drops items at random, so allocation counts mean nothing there.
// make test runs it again without -race.

// TestAllocs holds the bound: at most one allocation per
// conversion when the caller supplies the output buffer.
func TestAllocs(t *testing.T) {
	for _, d := range benchDocs() {
		jbuf := make([]byte, 0, 2*len(d.json))
		mbuf := make([]byte, 0, 2*len(d.json))
		if n := testing.AllocsPerRun(5, func() {
			if _, err := AppendJSON(jbuf, d.msgpack); err != nil {
				t.Fatal(err)
			}
		}); n > 1 {
			t.Errorf("%s: AppendJSON makes %v allocations", d.name, n)
		}
		if n := testing.AllocsPerRun(5, func() {
			if _, err := AppendMsgPack(mbuf, d.json); err != nil {
				t.Fatal(err)
			}
		}); n > 1 {
			t.Errorf("%s: AppendMsgPack makes %v allocations", d.name, n)
		}
	}
}
