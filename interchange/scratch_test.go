package interchange

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// TestScratchGenerationWrap: when the generation counter wraps, entries
// written under the old generation 1 must not look occupied, or a full
// table would make probing spin forever.
func TestScratchGenerationWrap(t *testing.T) {
	s := &scratch{tab: make([]slot, 4*smallObject), gen: math.MaxUint32}
	for i := range s.tab {
		s.tab[i] = slot{gen: 1, idx: i}
	}
	s.bumpGen()
	if s.gen != 1 {
		t.Fatalf("generation after wrap = %d, want 1", s.gen)
	}
	var buf []byte
	for i := range 3 * smallObject {
		k := []byte("key" + strconv.Itoa(i))
		off := len(buf)
		buf = append(buf, k...)
		if s.addKey(buf, 0, off, len(k)) {
			t.Fatalf("key %d reported as a duplicate", i)
		}
	}
	off := len(buf)
	buf = append(buf, "key7"...)
	if !s.addKey(buf, 0, off, 4) {
		t.Fatal("repeated key7 not reported")
	}
}

// TestConcurrentConversions shares the scratch pool between goroutines;
// run with -race it checks that no scratch is used by two conversions.
func TestConcurrentConversions(t *testing.T) {
	defer leakcheck.Check(t)()
	var docs [][]byte
	for g := range 4 {
		var b bytes.Buffer
		b.WriteString("[")
		for o := range 20 {
			if o > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('{')
			for k := range 40 {
				if k > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `"g%dk%d":%d`, g, k, o)
			}
			b.WriteByte('}')
		}
		b.WriteString("]")
		docs = append(docs, b.Bytes())
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(docs))
	for _, doc := range docs {
		wg.Go(func() {
			var mbuf, jbuf []byte
			for range 50 {
				mp, err := AppendMsgPack(mbuf[:0], doc)
				if err != nil {
					errs <- err
					return
				}
				js, err := AppendJSON(jbuf[:0], mp)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(js, doc) {
					errs <- fmt.Errorf("round trip changed %.30s…", doc)
					return
				}
				mbuf, jbuf = mp, js
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
