package interchange

import (
	"math"

	"github.com/capbridge/capbridge/internal/bound"
)

// MaxDepth is the deepest nesting of arrays and objects (maps) either
// direction accepts: a value may sit inside MaxDepth containers, and the
// container that would be number MaxDepth+1 is refused with FaultDepth.
// One bound serves both directions, and the mapping preserves nesting,
// so a value that converts one way never fails the other way on depth.
// It is bound.MaxDepth, the bound capwire and mcpwire enforce too.
const MaxDepth = bound.MaxDepth

// Limits bounds a conversion beyond MaxDepth. The zero Limits imposes no
// bound on the output other than the linear one in the package doc.
// A Limits value may be used by any number of goroutines at once.
type Limits struct {
	// MaxOutput is the most bytes one conversion may append to dst;
	// past it the conversion stops with FaultTooLarge. Zero means no
	// bound. The check runs before each value, so the output may pass
	// the bound by at most one string's worth before it stops.
	MaxOutput int
}

func (l Limits) limit(start int) int {
	if l.MaxOutput <= 0 || l.MaxOutput > math.MaxInt-start {
		return math.MaxInt
	}
	return start + l.MaxOutput
}

// AppendJSON converts one MessagePack value, the whole of src, to JSON
// appended to dst, and returns the extended buffer. On failure it returns
// a *Fault and dst's original length (with whatever capacity the attempt
// grew, so a pooled buffer stays useful); the bytes past that length are
// unspecified. src is only read, and is not retained; it must not share
// memory with dst's spare capacity.
func (l Limits) AppendJSON(dst, src []byte) ([]byte, error) {
	start := len(dst)
	c := mpConv{src: src, out: dst, limit: l.limit(start)}
	p, f := c.value(0, 0)
	if f == nil && p != len(src) {
		f = newFault(FaultTrailing, p)
	}
	if f == nil && len(c.out) > c.limit {
		f = newFault(FaultTooLarge, len(src))
	}
	putScratch(c.st)
	if f != nil {
		return c.out[:start], f.finish(false)
	}
	return c.out, nil
}

// AppendMsgPack converts one JSON text, the whole of src (surrounding
// white space allowed), to MessagePack appended to dst, and returns the
// extended buffer. Failure is reported as for AppendJSON.
func (l Limits) AppendMsgPack(dst, src []byte) ([]byte, error) {
	start := len(dst)
	c := jsConv{src: src, out: dst, limit: l.limit(start)}
	p, f := c.value(c.skipSpace(0), 0)
	if f == nil {
		if p = c.skipSpace(p); p != len(src) {
			f = newFault(FaultTrailing, p)
		}
	}
	if f == nil && c.st != nil && len(c.st.fix) > 0 {
		c.expand()
	}
	if f == nil && len(c.out) > c.limit {
		f = newFault(FaultTooLarge, len(src))
	}
	putScratch(c.st)
	if f != nil {
		return c.out[:start], f.finish(true)
	}
	return c.out, nil
}

// AppendJSON is Limits{}.AppendJSON: MessagePack to JSON with no output
// bound but the linear one.
func AppendJSON(dst, src []byte) ([]byte, error) {
	return Limits{}.AppendJSON(dst, src)
}

// AppendMsgPack is Limits{}.AppendMsgPack: JSON to MessagePack with no
// output bound but the linear one.
func AppendMsgPack(dst, src []byte) ([]byte, error) {
	return Limits{}.AppendMsgPack(dst, src)
}

// ToJSON converts one MessagePack value to a new JSON buffer.
func ToJSON(src []byte) ([]byte, error) {
	// Most documents grow by less than half going to JSON; a good first
	// guess saves the appends a series of regrowths.
	return AppendJSON(make([]byte, 0, len(src)+len(src)/2+16), src)
}

// ToMsgPack converts one JSON text to a new MessagePack buffer.
func ToMsgPack(src []byte) ([]byte, error) {
	return AppendMsgPack(make([]byte, 0, len(src)+16), src)
}
