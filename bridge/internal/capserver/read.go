package capserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/framewrite"
)

// MaxHello bounds the first frame of a connection. A hello is a version
// and a token (about 60 bytes); a peer that has not yet shown a token may
// not make capbridge hold more than this for it.
const MaxHello = 4 << 10

// readAhead is a connection's read buffer while it holds bytes. Frames up
// to about this size (a call with a 16 KiB text and its envelope, with
// room to spare) arrive whole in one read and are taken from it without
// touching the budget.
//
// A connection holds one only while bytes it read wait to be consumed:
// between frames it goes back to a pool, and a connection waiting for
// its peer's next frame takes one only once bytes have arrived (see
// idleRead). So an idle connection costs no read buffer, and the buffers
// in use at once are bounded by the connections in the middle of a frame
// (at most max_connections, each for at most the frame timeout).
const readAhead = 32 << 10

var aheadPool = sync.Pool{New: func() any { return new([readAhead]byte) }}

// growStep is the least a partial frame's buffer grows by. It grows by at
// most what it already holds beyond that, so the buffer follows the bytes
// that arrived, not the length the peer announced: a peer that announces
// 16 MiB and sends 10 bytes is charged about growStep.
const growStep = 16 << 10

// Budget bounds the bytes that the connections sharing it hold for
// partial frames: frames whose bytes did not all arrive in one read, and
// for which the reader must wait. A frame that arrives whole is never
// charged; a partial one is charged its buffer's capacity, growth by
// growth, before the buffer grows (so at most twice the bytes that
// arrived, plus growStep), and uncharged when it completes or fails. When a charge would pass the limit the largest partial frame is
// refused (frame_too_large) and its charge returned at once; if that is
// another connection's, its blocked read is woken to fail, so the budget
// holds without waiting for anyone.
//
// Concurrency: safe for use by any number of connections.
type Budget struct {
	limit int64

	mu   sync.Mutex
	used int64
	held map[*frameReader]struct{} // readers with a charge

	refused atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int) *Budget {
	return &Budget{limit: int64(limit), held: map[*frameReader]struct{}{}}
}

// Used is how many bytes partial frames are charged now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Refused counts the frames refused for the budget since it was made.
func (b *Budget) Refused() int64 { return b.refused.Load() }

// charge adds delta bytes to fr's charge, refusing the largest partial
// frame (fr's, counting delta, or another's) while the total would pass
// the limit. It reports false when fr's frame is refused.
func (b *Budget) charge(fr *frameReader, delta int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if fr.evicted {
		return false
	}
	for b.used+delta > b.limit {
		var victim *frameReader
		for o := range b.held {
			if o != fr && (victim == nil || o.charged > victim.charged) {
				victim = o
			}
		}
		if victim == nil || fr.charged+delta >= victim.charged {
			b.evict(fr)
			return false
		}
		b.evict(victim)
		// Wake its read so it fails now; under mu, so the wake-up cannot
		// land after the reader has finished that frame and moved on.
		_ = victim.conn.SetReadDeadline(time.Unix(1, 0))
	}
	b.used += delta
	fr.charged += delta
	b.held[fr] = struct{}{}
	return true
}

// evict refuses fr's partial frame and returns its charge. mu is held.
func (b *Budget) evict(fr *frameReader) {
	b.used -= fr.charged
	fr.charged = 0
	fr.evicted = true
	delete(b.held, fr)
	b.refused.Add(1)
}

// isEvicted reports whether fr's partial frame was refused.
func (b *Budget) isEvicted(fr *frameReader) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fr.evicted
}

// settle returns fr's charge once its frame is done, reporting false if
// the frame was refused meanwhile.
func (b *Budget) settle(fr *frameReader) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if fr.evicted {
		return false
	}
	b.used -= fr.charged
	fr.charged = 0
	delete(b.held, fr)
	return true
}

// frameReader reads length-prefixed frames (docs/capwire.md §2) from one
// connection, charging partial frames to a Budget as their bytes arrive
// and bounding how long a frame that has started may take to finish.
//
// Concurrency: one goroutine reads at a time. charged and evicted are
// guarded by the budget's mutex (the budget refuses frames of other
// readers).
type frameReader struct {
	conn net.Conn // deadlines are set on it
	// rd reads conn: with raw non-blocking reads under the poller where
	// the connection allows (framewrite.RawReader), saving the runtime's
	// per-read bookkeeping on the hot path.
	rd io.Reader
	// rc is conn's descriptor where it has one: a read with nothing
	// buffered waits on it holding no buffer (idleRead).
	rc syscall.RawConn
	// idleFn is idleRead as a func value, made once: a method value
	// handed to rc.Read would be allocated on every wait.
	idleFn  func(fd uintptr) bool
	budget  *Budget // nil: partial frames are bounded only by the frame limit
	timeout time.Duration

	ahead *[readAhead]byte // from aheadPool while bytes are buffered; else nil
	buf   []byte           // ahead's bytes, or nil
	r, w  int              // buf[r:w] is read and not yet consumed
	errno syscall.Errno    // idleRead's failure

	// base is the read deadline outside a frame (the hello's, or none);
	// armed says a frame's own deadline is in force instead.
	base  time.Time
	armed bool

	charged int64
	evicted bool
}

func newFrameReader(conn net.Conn, budget *Budget, timeout time.Duration) *frameReader {
	fr := &frameReader{conn: conn, rd: framewrite.RawReader(conn), rc: framewrite.Pollable(conn), budget: budget, timeout: timeout}
	fr.idleFn = fr.idleRead
	return fr
}

// take gives fr a read-ahead buffer, empty.
func (fr *frameReader) take() {
	fr.ahead = aheadPool.Get().(*[readAhead]byte)
	fr.buf, fr.r, fr.w = fr.ahead[:], 0, 0
}

// release returns fr's read-ahead buffer, which holds nothing unconsumed,
// to the pool.
func (fr *frameReader) release() {
	if fr.ahead != nil {
		aheadPool.Put(fr.ahead)
		fr.ahead, fr.buf, fr.r, fr.w = nil, nil, 0, 0
	}
}

// setBase sets the read deadline outside frames; zero means none.
func (fr *frameReader) setBase(t time.Time) error {
	fr.base = t
	return fr.conn.SetReadDeadline(t)
}

// arm puts the frame deadline in force: the frame has started and must
// end within timeout (or by base, if sooner).
func (fr *frameReader) arm() error {
	if fr.armed {
		return nil
	}
	fr.armed = true
	d := time.Now().Add(fr.timeout)
	if !fr.base.IsZero() && fr.base.Before(d) {
		d = fr.base
	}
	return fr.conn.SetReadDeadline(d)
}

// disarm restores the deadline between frames.
func (fr *frameReader) disarm() error {
	if !fr.armed {
		return nil
	}
	fr.armed = false
	return fr.conn.SetReadDeadline(fr.base)
}

// readFrame reads one frame of at most limit bytes and appends its
// payload to dst. At a clean end of stream between frames it returns
// io.EOF. Framing faults are fatal *capwire.WireErrors: bad_frame for a
// zero length, a stream that ends inside a frame or a frame that does not
// finish within the frame timeout; frame_too_large for a length above
// limit or a partial frame the budget refused. Other read errors are
// returned wrapped. On error the returned slice must be dropped.
func (fr *frameReader) readFrame(dst []byte, limit int) ([]byte, error) {
	for fr.w-fr.r < 4 {
		if fr.w > fr.r {
			if err := fr.arm(); err != nil {
				return dst, err
			}
		}
		if err := fr.fill(); err != nil {
			started := fr.w > fr.r
			if err == io.EOF && !started {
				return dst, io.EOF
			}
			return dst, fr.failed(err, "a length prefix", -1)
		}
	}
	n := int64(binary.BigEndian.Uint32(fr.buf[fr.r:]))
	fr.r += 4
	switch {
	case n == 0:
		return dst, &capwire.WireError{Code: capwire.CodeBadFrame, Fatal: true, Offset: -1, Msg: "zero-length frame"}
	case n > int64(limit):
		return dst, &capwire.WireError{Code: capwire.CodeFrameTooLarge, Fatal: true, Offset: -1,
			Msg: "frame of " + strconv.FormatInt(n, 10) + " bytes exceeds the limit of " + strconv.Itoa(limit)}
	}
	if int64(fr.w-fr.r) >= n {
		// The whole frame is here: no wait, no charge.
		dst = append(dst, fr.buf[fr.r:fr.r+int(n)]...)
		fr.r += int(n)
		return dst, fr.disarm()
	}
	return fr.readPartial(dst, int(n))
}

// readPartial reads the rest of a frame of n bytes whose bytes did not
// all arrive: the buffer grows with the bytes, each growth charged first.
func (fr *frameReader) readPartial(dst []byte, n int) ([]byte, error) {
	if err := fr.arm(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, fr.buf[fr.r:fr.w]...)
	fr.release() // the frame's bytes are in dst now
	defer func() {
		// Under the budget's lock, inside settle: another connection's
		// charge may evict this frame, and zero its charge, at any time.
		if fr.budget != nil {
			fr.budget.settle(fr)
		}
	}()
	for got := len(dst) - start; got < n; {
		// Room for the next bytes is charged before it exists: the
		// frame's bytes so far and what this read may bring.
		want := min(n-got, max(growStep, got))
		if !fr.chargeTo(got + want) {
			return dst, fr.refused(n)
		}
		if cap(dst)-len(dst) < want {
			next := make([]byte, len(dst), len(dst)+want)
			copy(next, dst)
			dst = next
		}
		k, err := fr.rd.Read(dst[len(dst) : len(dst)+want])
		dst = dst[:len(dst)+k]
		got += k
		if err != nil && got < n {
			if fr.budget != nil && fr.budget.isEvicted(fr) {
				return dst, fr.refused(n)
			}
			return dst, fr.failed(err, "a frame of "+strconv.Itoa(n)+" bytes", got)
		}
	}
	if fr.budget != nil && !fr.budget.settle(fr) {
		return dst, fr.refused(n)
	}
	return dst, fr.disarm()
}

// chargeTo makes fr's charge at least total bytes.
func (fr *frameReader) chargeTo(total int) bool {
	if fr.budget == nil {
		return true
	}
	fr.budget.mu.Lock()
	delta := int64(total) - fr.charged
	fr.budget.mu.Unlock()
	return delta <= 0 || fr.budget.charge(fr, delta)
}

func (fr *frameReader) refused(n int) error {
	return &capwire.WireError{Code: capwire.CodeFrameTooLarge, Fatal: true, Offset: -1,
		Msg: "capbridge holds as many bytes of partial frames as it allows, and this frame of " + strconv.Itoa(n) + " bytes is the largest"}
}

// failed turns a read error inside a frame into the fault it is.
func (fr *frameReader) failed(err error, inside string, got int) error {
	switch {
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return &capwire.WireError{Code: capwire.CodeBadFrame, Fatal: true, Offset: -1, Msg: "stream ended inside " + inside, Err: io.ErrUnexpectedEOF}
	case errors.Is(err, os.ErrDeadlineExceeded) && fr.armed && (fr.base.IsZero() || time.Now().Before(fr.base)):
		msg := "a frame did not finish within " + fr.timeout.String()
		if got >= 0 {
			msg += " (" + strconv.Itoa(got) + " bytes of " + inside + " arrived)"
		}
		return &capwire.WireError{Code: capwire.CodeBadFrame, Fatal: true, Offset: -1, Msg: msg, Err: err}
	}
	return fmt.Errorf("capserver: reading frame: %w", err)
}

// fill reads more bytes into buf after those not yet consumed. With
// nothing unconsumed it gives the buffer back and waits holding none
// (idleRead).
func (fr *frameReader) fill() error {
	if fr.r == fr.w {
		fr.release()
		if fr.rc != nil {
			return fr.idleFill()
		}
	}
	if fr.buf == nil {
		fr.take()
	}
	if fr.r > 0 {
		fr.w = copy(fr.buf, fr.buf[fr.r:fr.w])
		fr.r = 0
	}
	k, err := fr.rd.Read(fr.buf[fr.w:])
	fr.w += k
	if k > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// idleFill waits for bytes with nothing buffered, holding no buffer: the
// poller calls idleRead when the descriptor may be readable, and it takes
// a buffer only for a read that returns bytes. The errors are those of
// the connection's own Read: net.ErrClosed once closed,
// os.ErrDeadlineExceeded past the read deadline, io.EOF at the end.
func (fr *frameReader) idleFill() error {
	fr.errno = 0
	if err := fr.rc.Read(fr.idleFn); err != nil {
		return err
	}
	switch {
	case fr.errno != 0:
		return os.NewSyscallError("read", fr.errno)
	case fr.buf == nil:
		return io.EOF
	}
	return nil
}

// idleRead is idleFill's RawConn callback: false means wait for
// readiness.
func (fr *frameReader) idleRead(fd uintptr) bool {
	a := aheadPool.Get().(*[readAhead]byte)
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&a[0])), readAhead)
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			aheadPool.Put(a)
			return false
		case e != 0 || n == 0:
			aheadPool.Put(a)
			fr.errno = e
			return true
		}
		fr.ahead, fr.buf, fr.r, fr.w = a, a[:], 0, int(n)
		return true
	}
}
