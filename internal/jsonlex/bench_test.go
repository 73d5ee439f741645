package jsonlex

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkScanString measures the validating string scan at the result
// sizes the bridge sees, plain ASCII and with a two-byte character every
// 64 bytes.
func BenchmarkScanString(b *testing.B) {
	for _, n := range []int{64, 1 << 10, 16 << 10} {
		for _, kind := range []string{"ascii", "utf8"} {
			unit := strings.Repeat("y", 64)
			if kind == "utf8" {
				unit = strings.Repeat("y", 62) + "é"
			}
			s := []byte(`"` + strings.Repeat(unit, n/64) + `"`)
			b.Run(fmt.Sprintf("%dB/%s", n, kind), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(s)))
				for b.Loop() {
					if end, _, f := ScanString(s, 0, CheckUTF8); f != nil || end != len(s) {
						b.Fatal(f)
					}
				}
			})
		}
	}
}
