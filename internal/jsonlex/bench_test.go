package jsonlex

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkScanString measures the validating string scan at the result
// sizes the bridge sees: plain ASCII, with a two-byte character every 64
// bytes, and CJK text (three-byte characters, none of it ASCII).
func BenchmarkScanString(b *testing.B) {
	for _, n := range []int{64, 1 << 10, 16 << 10} {
		for _, kind := range []string{"ascii", "utf8", "cjk"} {
			unit := strings.Repeat("y", 64)
			switch kind {
			case "utf8":
				unit = strings.Repeat("y", 62) + "é"
			case "cjk":
				unit = strings.Repeat("漢", 21) + "y" // 64 bytes
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
