package codegen

import (
	"fmt"
	"strings"
)

// Description lengths, in runes, on the first two rungs of the ladder.
const (
	surfaceLongDesc  = 160
	surfaceShortDesc = 60
)

// entry is one function as an emitter presents it to the surface. The
// signature texts are the emitter's; everything else here is language
// neutral.
type entry struct {
	name   string // the function's identifier, the Details key
	full   string // qualified signature with the options spelled out
	index  string // qualified signature with the options named only
	desc   string // cleaned description, at most maxToolDesc runes
	detail string // the full detail, for Generated.Details
}

// renderSurface renders the surface on the richest rung of the ladder that
// fits budget bytes: full descriptions, then short ones, then the index of
// signatures. It refuses only when the index does not fit (issue 6).
// header gives the server's heading line for a rung, without a newline.
func renderSurface(header func(SurfaceLevel) string, entries []entry, budget int) (string, SurfaceLevel, error) {
	var size int
	for _, level := range []SurfaceLevel{SurfaceFull, SurfaceShort, SurfaceIndex} {
		var b strings.Builder
		b.WriteString(header(level))
		b.WriteByte('\n')
		for _, e := range entries {
			switch level {
			case SurfaceFull:
				line(&b, e.full, e.desc, surfaceLongDesc)
			case SurfaceShort:
				line(&b, e.full, e.desc, surfaceShortDesc)
			case SurfaceIndex:
				line(&b, e.index, "", 0)
			}
		}
		if b.Len() <= budget {
			return b.String(), level, nil
		}
		size = b.Len()
	}
	return "", 0, fmt.Errorf("%w: the index of %d functions takes %d bytes, the budget is %d",
		ErrSurfaceTooLarge, len(entries), size, budget)
}

func line(b *strings.Builder, sig, desc string, max int) {
	b.WriteString(sig)
	if desc != "" && max > 0 {
		b.WriteString(" // ")
		b.WriteString(cleanText(desc, max))
	}
	b.WriteByte('\n')
}
