package interchange

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/pointer"
)

// objectJSON writes an object with the given keys (and a small value for
// each) and returns it with the byte offset of every key's quote.
func objectJSON(keys []string, value func(i int) string) (string, []int) {
	var b strings.Builder
	offs := make([]int, len(keys))
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		offs[i] = b.Len()
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		b.WriteString(value(i))
	}
	b.WriteByte('}')
	return b.String(), offs
}

// firstDuplicate is the naive reference: the first key equal to an
// earlier one, or -1.
func firstDuplicate(keys []string) int {
	seen := map[string]bool{}
	for i, k := range keys {
		if seen[k] {
			return i
		}
		seen[k] = true
	}
	return -1
}

// TestDuplicateKeys compares duplicate detection, on both sides of the
// switch from linear search to the hash table, with a map-based
// reference, in both directions.
func TestDuplicateKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	sizes := []int{1, 2, smallObject - 1, smallObject, smallObject + 1, smallObject + 2, 40, 300, 3000}
	for _, n := range sizes {
		for trial := range 12 {
			keys := make([]string, n)
			for i := range keys {
				// A small alphabet makes accidental duplicates likely for
				// big objects; some trials force one at a chosen place.
				keys[i] = fmt.Sprintf("k%d", rng.IntN(4*n))
				if trial%3 == 0 {
					keys[i] = fmt.Sprintf("key-%d", i)
				}
			}
			if trial%3 == 0 && n > 1 {
				keys[n-1-rng.IntN(n/2+1)] = keys[rng.IntN(n/2)]
			}
			doc, offs := objectJSON(keys, func(i int) string { return strconv.Itoa(i) })
			want := firstDuplicate(keys)
			checkDuplicate(t, doc, keys, offs, want)
		}
	}
}

func checkDuplicate(t *testing.T, doc string, keys []string, offs []int, want int) {
	t.Helper()
	mp, err := ToMsgPack([]byte(doc))
	if want < 0 {
		if err != nil {
			t.Fatalf("%d distinct keys refused: %v", len(keys), err)
		}
		if _, err := ToJSON(mp); err != nil {
			t.Fatalf("%d distinct keys refused from MessagePack: %v", len(keys), err)
		}
		return
	}
	f := checkFault(t, err, []byte(doc))
	wantPath := "/" + pointer.Token(keys[want])
	if f.Kind != FaultDuplicateKey || f.Path != wantPath || f.Offset != offs[want] {
		t.Fatalf("%d keys: %s %q @%d, want duplicate_key %q @%d", len(keys), f.Kind, f.Path, f.Offset, wantPath, offs[want])
	}
	// The same object as MessagePack, built by hand so the duplicate
	// survives: a map32 of str8 keys and fixint values.
	var in []byte
	in = append(in, 0xdf, byte(len(keys)>>24), byte(len(keys)>>16), byte(len(keys)>>8), byte(len(keys)))
	wantOff := 0
	for i, k := range keys {
		if i == want {
			wantOff = len(in)
		}
		in = append(in, 0xd9, byte(len(k)))
		in = append(in, k...)
		in = append(in, 0x01)
	}
	_, err = ToJSON(in)
	f = checkFault(t, err, in)
	if f.Kind != FaultDuplicateKey || f.Path != wantPath || f.Offset != wantOff {
		t.Fatalf("msgpack, %d keys: %s %q @%d, want duplicate_key %q @%d", len(keys), f.Kind, f.Path, f.Offset, wantPath, wantOff)
	}
}

// TestDuplicateKeysNested covers the hash table's reuse: open big objects
// inside big objects, siblings with the same keys (stale entries must not
// count), and enough keys overall to force the table to be rebuilt.
func TestDuplicateKeysNested(t *testing.T) {
	keys := func(n int, prefix string) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = prefix + strconv.Itoa(i)
		}
		return ks
	}
	inner, _ := objectJSON(keys(40, "k"), func(int) string { return "1" })
	// 200 siblings of 40 keys each, all with the same names, inside a big
	// object whose keys are the same names too.
	outerKeys := keys(200, "k")
	doc, _ := objectJSON(outerKeys, func(int) string { return inner })
	if _, err := ToMsgPack([]byte(doc)); err != nil {
		t.Fatalf("distinct keys per object refused: %v", err)
	}
	mp, _ := ToMsgPack([]byte(doc))
	if _, err := ToJSON(mp); err != nil {
		t.Fatalf("distinct keys per object refused from MessagePack: %v", err)
	}
	// A duplicate in the outer object after many inner objects closed.
	outerKeys[150] = "k3"
	doc, offs := objectJSON(outerKeys, func(int) string { return inner })
	_, err := ToMsgPack([]byte(doc))
	f := checkFault(t, err, []byte(doc))
	if f.Kind != FaultDuplicateKey || f.Path != "/k3" || f.Offset != offs[150] {
		t.Fatalf("outer duplicate: %s %q @%d, want /k3 @%d", f.Kind, f.Path, f.Offset, offs[150])
	}
	// A duplicate in the last inner object.
	bad, _ := objectJSON(append(keys(39, "k"), "k20"), func(int) string { return "1" })
	doc, _ = objectJSON(keys(200, "k"), func(i int) string {
		if i == 199 {
			return bad
		}
		return inner
	})
	_, err = ToMsgPack([]byte(doc))
	if f := checkFault(t, err, []byte(doc)); f.Kind != FaultDuplicateKey || f.Path != "/k199/k20" {
		t.Fatalf("inner duplicate: %s %q", f.Kind, f.Path)
	}
}
