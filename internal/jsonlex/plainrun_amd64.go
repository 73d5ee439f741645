//go:build !purego

package jsonlex

// stopBlocks returns the offset of the first byte of b that is a quote,
// a backslash or a C0 control, or, when high is 0x8080808080808080, not
// ASCII (high 0 lets those pass), looking only at b's whole 16-byte
// blocks: len(b)&^15 when none of them holds one. It uses SSE2, which
// every amd64 processor has, so it needs no feature check.
//
//go:noescape
func stopBlocks(b []byte, high uint64) int
