//go:build !purego

package jsonlex

// plainBlocks returns the offset of the first byte of b that is a quote,
// a backslash, a C0 control or not ASCII, looking only at b's whole
// 16-byte blocks: len(b)&^15 when none of them holds one. It uses SSE2,
// which every amd64 processor has, so it needs no feature check.
//
//go:noescape
func plainBlocks(b []byte) int
