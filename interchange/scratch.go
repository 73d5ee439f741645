package interchange

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"sync"
)

// smallObject is the member count up to which duplicate keys are found by
// comparing against every earlier key of the object. Most tool arguments
// and results are objects this small, where a linear scan of a few short
// keys beats hashing; bigger objects switch to the hash table.
const smallObject = 16

// span locates one object key: buf[off : off+n] in the buffer the
// conversion compares keys in (the MessagePack input, or the output for
// JSON input, where keys are compared after their escapes are decoded).
// head holds the key's first (up to) eight bytes, so most comparisons of
// short keys, the common case, never reach bytes.Equal.
type span struct {
	off, n int
	head   uint64
}

func keyHead(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.LittleEndian.Uint64(k)
	}
	var h uint64
	for i, b := range k {
		h |= uint64(b) << (8 * i)
	}
	return h
}

// same reports whether sp is the key k whose head is h.
func (sp span) same(buf, k []byte, h uint64) bool {
	return sp.n == len(k) && sp.head == h && (len(k) <= 8 || bytes.Equal(buf[sp.off+8:sp.off+sp.n], k[8:]))
}

type slot struct {
	gen uint32 // the slot is occupied only if gen equals scratch.gen
	idx int    // index into scratch.keys
}

// fixup records a JSON array or object with more than 15 members, whose
// MessagePack header is longer than the one-byte placeholder written when
// it opened (see (*jsConv).expand).
type fixup struct {
	pos   int
	n     int
	isMap bool
}

// scratch is the reusable working memory of one conversion. It is taken
// from a pool only when the document has an object (or, from JSON, a big
// container), so scalar and array-only documents never touch the pool.
// A scratch is owned by one conversion at a time.
type scratch struct {
	// keys is a stack holding the keys of every open object, innermost
	// object last; an object's keys start at the index it noted on entry.
	keys []span
	// tab is an open-addressing set of indexes into keys, used for objects
	// with more than smallObject members. Entries are never deleted: an
	// entry counts for an object only if its index is inside that object's
	// part of keys and the key bytes match, so a stale entry can only ever
	// confirm a true duplicate. Bumping gen empties the table in O(1).
	tab  []slot
	tabN int
	gen  uint32
	fix  []fixup
}

var hashSeed = maphash.MakeSeed()

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledKeys bounds the memory a pooled scratch keeps between
// conversions, so one huge document does not pin its working set forever.
const maxPooledKeys = 1 << 16

func getScratch() *scratch {
	s := scratchPool.Get().(*scratch)
	s.keys = s.keys[:0]
	s.fix = s.fix[:0]
	s.tabN = 0
	s.bumpGen()
	return s
}

func putScratch(s *scratch) {
	if s == nil || cap(s.keys) > maxPooledKeys || len(s.tab) > 4*maxPooledKeys || cap(s.fix) > maxPooledKeys {
		return
	}
	scratchPool.Put(s)
}

func (s *scratch) bumpGen() {
	s.gen++
	if s.gen == 0 {
		clear(s.tab)
		s.gen = 1
	}
}

// addKey records the key buf[off:off+n] for the innermost open object,
// whose keys start at keys[base], and reports whether that object already
// had an equal key (in which case nothing is recorded).
func (s *scratch) addKey(buf []byte, base, off, n int) (dup bool) {
	k := buf[off : off+n]
	h := keyHead(k)
	cnt := len(s.keys) - base
	if cnt < smallObject {
		for _, sp := range s.keys[base:] {
			if sp.same(buf, k, h) {
				return true
			}
		}
		s.keys = append(s.keys, span{off, n, h})
		return false
	}
	if cnt == smallObject {
		// The object just outgrew linear search: index its keys so far.
		// (If reserve rebuilds the table meanwhile, some are placed twice;
		// a repeated entry only costs a comparison.)
		for i := base; i < len(s.keys); i++ {
			s.reserve(buf)
			s.place(buf, i)
		}
	}
	s.reserve(buf)
	mask := len(s.tab) - 1
	for i := int(maphash.Bytes(hashSeed, k)) & mask; ; i = (i + 1) & mask {
		sl := &s.tab[i]
		if sl.gen != s.gen {
			*sl = slot{s.gen, len(s.keys)}
			s.tabN++
			s.keys = append(s.keys, span{off, n, h})
			return false
		}
		if j := sl.idx; j >= base && j < len(s.keys) && s.keys[j].same(buf, k, h) {
			return true
		}
	}
}

// place enters keys[i] in the table without looking for duplicates.
func (s *scratch) place(buf []byte, i int) {
	sp := s.keys[i]
	mask := len(s.tab) - 1
	for j := int(maphash.Bytes(hashSeed, buf[sp.off:sp.off+sp.n])) & mask; ; j = (j + 1) & mask {
		if s.tab[j].gen != s.gen {
			s.tab[j] = slot{s.gen, i}
			s.tabN++
			return
		}
	}
}

// reserve makes room for one more entry at a load of at most 1/2. When
// the table is full it starts a new generation holding only the keys of
// objects still open, so its size follows the most keys open at once, not
// the number of keys in the whole document.
func (s *scratch) reserve(buf []byte) {
	if 2*(s.tabN+1) <= len(s.tab) {
		return
	}
	size := max(len(s.tab), 4*smallObject)
	for 4*(len(s.keys)+1) > size {
		size *= 2
	}
	if size != len(s.tab) {
		s.tab = make([]slot, size)
		s.gen = 1
	} else {
		s.bumpGen()
	}
	s.tabN = 0
	for i := range s.keys {
		s.place(buf, i)
	}
}
