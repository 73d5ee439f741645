//go:build !amd64 || purego

package jsonlex

// plainBlocks returns the offset of the first byte of b that is a quote,
// a backslash, a C0 control or not ASCII, looking only at b's whole
// 16-byte blocks: len(b)&^15 when none of them holds one.
func plainBlocks(b []byte) int { return plainWords(b[:len(b)&^15], 0) }
