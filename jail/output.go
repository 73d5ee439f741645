package jail

import (
	"io"
	"sync"
)

func orDefault(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

// outputBudget counts what a program writes on both streams and calls
// over once, when the total passes limit.
type outputBudget struct {
	mu    sync.Mutex
	n     int64
	limit int64
	over  func()
	fired bool
}

func (b *outputBudget) add(n int) {
	b.mu.Lock()
	b.n += int64(n)
	fire := b.n > b.limit && !b.fired
	if fire {
		b.fired = true
	}
	b.mu.Unlock()
	if fire {
		b.over()
	}
}

type sink interface{ keep([]byte) }

// drain reads r to its end, keeping what k wants and counting all of it.
func drain(r io.Reader, k sink, b *outputBudget) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			k.keep(buf[:n])
			b.add(n)
		}
		if err != nil {
			return
		}
	}
}

// headBuffer keeps the first max bytes written and counts the rest.
type headBuffer struct {
	buf []byte
	max int64
	n   int64
}

func (h *headBuffer) keep(p []byte) {
	h.n += int64(len(p))
	if room := h.max - int64(len(h.buf)); room > 0 {
		h.buf = append(h.buf, p[:min(int64(len(p)), room)]...)
	}
}

// tailBuffer keeps the last max bytes written and counts all of them.
type tailBuffer struct {
	buf []byte
	max int64
	n   int64
}

func (t *tailBuffer) keep(p []byte) {
	t.n += int64(len(p))
	t.buf = append(t.buf, p...)
	if over := int64(len(t.buf)) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

func (t *tailBuffer) bytes() []byte { return t.buf }
