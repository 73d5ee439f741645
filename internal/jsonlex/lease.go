package jsonlex

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Leasing: Own into memory that is reused rather than collected.
//
// Why: the bridge owns each tool result only from the moment its line is
// read until its reply frame is written and audited, a few microseconds.
// Owned into fresh memory, a 16 KiB result is 16 KiB of garbage per
// call, nine tenths of everything the call path allocates at that size,
// and the collections it sets off cost the bridge more CPU than the copy
// itself. A leased Value's memory comes from a pool and goes back to it
// when its holder says the value and every string cut from it are dead.
//
// Memory is leased in power-of-two classes from 1 KiB to 64 KiB; smaller
// values are owned as usual (their garbage is cheap), larger ones too
// (they are rare, and a pool would pin their memory).
const (
	minLeaseShift = 10 // 1 KiB
	maxLeaseShift = 16 // 64 KiB
)

// leases holds released memory, zeroed, by class: unsafe.Pointers to
// the first of 1<<(minLeaseShift+class) bytes. A pointer goes into the
// pool's interface without an allocation, where a slice would need one.
var leases [maxLeaseShift - minLeaseShift + 1]sync.Pool

// leaseClass is the class whose memory holds n bytes, or -1 when n is
// owned rather than leased.
func leaseClass(n int) int {
	if n < 1<<minLeaseShift || n > 1<<maxLeaseShift {
		return -1
	}
	// The least power of two at or above n is 1<<bits.Len(n-1).
	return max(bits.Len(uint(n-1))-minLeaseShift, 0)
}

// Lease is Own into memory taken from a pool: a copy that nothing writes
// while it is leased, from which a decoder cuts strings (Str) as from an
// owned Value. Its holder gives the memory back with Release once v and
// every string or byte slice taken from it are dead; a leased Value that
// is never released is collected like any other. A value too small or
// too large to be worth a lease is owned (Own), and its Release does
// nothing.
func (v Value) Lease() Value {
	c := leaseClass(len(v.b))
	if c < 0 {
		return v.Own()
	}
	size := 1 << (minLeaseShift + c)
	p, _ := leases[c].Get().(unsafe.Pointer)
	if p == nil {
		p = unsafe.Pointer(unsafe.SliceData(make([]byte, size)))
	}
	mem := unsafe.Slice((*byte)(p), size)
	n := copy(mem, v.b)
	return Value{b: mem[:n:n], s: unsafe.String(&mem[0], n), class: uint8(c + 1)}
}

// Leased reports whether v's memory is leased (Lease), to be given back
// by Release.
func (v Value) Leased() bool { return v.class != 0 }

// Release gives a leased Value's memory back to the pool, zeroed; for
// any other Value it does nothing. It must be the last use of v, of its
// copies and of everything taken from them, and it must be called at most
// once per lease: the memory's next holder may be anyone. A string wrongly
// kept past it reads zeros until the memory is leased again, and the next
// value's bytes after that: the zeroing makes such a mistake show in
// tests, it does not make it safe.
func (v Value) Release() {
	if v.class == 0 {
		return
	}
	c := int(v.class - 1)
	mem := unsafe.Slice(unsafe.SliceData(v.b), 1<<(minLeaseShift+c))
	clear(mem[:len(v.b)])
	leases[c].Put(unsafe.Pointer(&mem[0]))
}
