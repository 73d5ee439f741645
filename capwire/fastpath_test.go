package capwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// inStacks reports whether some goroutine's stack holds every one of
// frames, and holds them only while blocked in a select if parked is set.
func inStacks(parked bool, frames ...string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if parked && !strings.Contains(g, "[select") {
			continue
		}
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			return true
		}
	}
	return false
}

// leading reports whether a caller of Call holds the client's reading
// side (rather than the idle reader, or nobody).
func leading() bool {
	return inStacks(false, "readside.(*Side).lead(", "capwire.(*Client).Call(")
}

// waitLeader waits until some call holds the client's reading side.
func waitLeader(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !leading() {
		if time.Now().After(deadline) {
			t.Fatal("no call ever took the reading side")
		}
		runtime.Gosched()
	}
}

// waitFollower waits until a caller is parked as a follower: blocked in
// Await's select rather than reading.
func waitFollower(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !inStacks(true, "readside.(*Side).Await(", "capwire.(*Client).Call(") {
		if time.Now().After(deadline) {
			t.Fatal("no caller ever waited as a follower")
		}
		runtime.Gosched()
	}
}

// The leader's ctx ending must hand the reading side to the follower,
// whose reply then reaches it; capbridge gets the leader's cancel.
func TestLeaderCancelFollowerStillServed(t *testing.T) {
	defer leakcheck.Check(t)()
	calls := make(chan *CallMsg, 2)
	cancels := make(chan uint64, 1)
	answer := make(chan uint64)
	p := startPeer(t, func(s *scriptConn) {
		// A frame of a type from a newer capbridge: ignored by the
		// client, but it makes an idle reader let go.
		writeFrame(t, s.conn, m("t", "progress", "id", 0))
		go func() {
			for id := range answer {
				s.Send(context.Background(), &ResultMsg{ID: id, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: fmt.Sprint(id)}}}})
			}
		}()
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			switch msg := msg.(type) {
			case *CallMsg:
				calls <- msg
			case *CancelMsg:
				cancels <- msg.ID
			}
		}
	})
	defer p.stop()
	defer close(answer)
	c, err := Dial(testCtx(t), p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctxA, cancelA := context.WithCancel(testCtx(t))
	defer cancelA()
	errA := make(chan error, 1)
	go func() { _, err := c.Call(ctxA, "fs", "a", nil); errA <- err }()
	if got := <-calls; got.Op != "a" {
		t.Fatalf("first call %q", got.Op)
	}
	waitLeader(t)

	type out struct {
		res *Result
		err error
	}
	outB := make(chan out, 1)
	go func() { r, err := c.Call(testCtx(t), "fs", "b", nil); outB <- out{r, err} }()
	b := <-calls
	waitFollower(t)
	// One call follows and one leads: the first still, since nothing
	// made it let go.
	if !leading() {
		t.Fatal("the second call took the reading side from the first")
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("leader's error = %v", err)
	}
	if id := <-cancels; id != 1 {
		t.Errorf("cancel for %d, want 1", id)
	}
	answer <- b.ID
	o := <-outB
	if o.err != nil || o.res.Text() != fmt.Sprint(b.ID) {
		t.Fatalf("follower got %v, %v", o.res, o.err)
	}
}

// A frame cut off by the connection's end fails every call once, with a
// bad_frame error that wraps ErrClosed.
func TestHangUpInsideFrameFailsEveryCall(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 4
	p := startPeer(t, func(s *scriptConn) {
		for range n {
			if _, err := s.Read(); err != nil {
				return
			}
		}
		s.conn.Write([]byte{0, 0, 0, 9, 0x81})
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errs := make(chan error, n+1)
	for range n {
		go func() { _, err := c.Call(ctx, "fs", "x", nil); errs <- err }()
	}
	for range n {
		if err := <-errs; !errors.Is(err, ErrClosed) || !errors.Is(err, ErrBadFrame) {
			t.Errorf("call got %v", err)
		}
	}
	select {
	case err := <-errs:
		t.Errorf("a call returned twice: %v", err)
	default:
	}
}

// Many callers, some cancelling at random moments, against a peer that
// answers in bursts (several replies per write): every call gets its own
// reply or its cancellation, and nothing is left in flight.
func TestManyCallersWithCancels(t *testing.T) {
	defer leakcheck.Check(t)()
	p := startPeer(t, func(s *scriptConn) {
		var burst []byte
		for {
			msg, err := s.Read()
			if err != nil {
				return
			}
			if call, ok := msg.(*CallMsg); ok {
				burst, _ = AppendFrame(burst, &ResultMsg{ID: call.ID, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: call.Op}}}}, 0)
			}
			if len(burst) > 0 && (s.fr.r.Buffered() == 0 || len(burst) > 4096) {
				if _, err := s.conn.Write(burst); err != nil {
					return
				}
				burst = burst[:0]
			}
		}
	})
	defer p.stop()
	ctx := testCtx(t)
	c, err := Dial(ctx, p.path, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const callers, each = 32, 100
	var served atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for g := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range each {
				op := fmt.Sprintf("op_%d_%d", g, i)
				cctx, cancel := context.WithCancel(ctx)
				if rng.IntN(8) == 0 {
					go cancel()
				}
				res, err := c.Call(cctx, "fs", op, nil)
				cancel()
				switch {
				case errors.Is(err, context.Canceled):
				case err != nil:
					errs <- fmt.Errorf("%s: %w", op, err)
				case res.Text() != op:
					errs <- fmt.Errorf("%s: got %q", op, res.Text())
				default:
					served.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := served.Load(); n < callers*each/2 {
		t.Errorf("only %d of %d calls served", n, callers*each)
	}
	c.mu.Lock()
	left := len(c.calls)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls left in flight", left)
	}
	if res, err := c.Call(ctx, "fs", "last", nil); err != nil || res.Text() != "last" {
		t.Fatalf("a lone call after the storm: %v %v", res, err)
	}
}

// chunkReader hands out its bytes a few at a time, with a deadline error
// between every two reads, as an interrupted leader sees them.
type chunkReader struct {
	b     []byte
	rng   *rand.Rand
	kick  bool
	reads int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	r.reads++
	if r.kick = !r.kick; r.kick {
		return 0, os.ErrDeadlineExceeded
	}
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+r.rng.IntN(7))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// frameIn reassembles frames cut anywhere and interrupted between reads,
// losing and duplicating nothing; a stream that ends inside a frame is a
// bad_frame error, and one that ends between frames is io.EOF.
func TestFrameInSurvivesInterruptedReads(t *testing.T) {
	var stream []byte
	var want []string
	for i := range 50 {
		payload := strings.Repeat(string(rune('a'+i%26)), 1+i*37)
		want = append(want, payload)
		stream = append(stream, frameOf([]byte(payload))...)
	}
	for _, cut := range []int{0, 3} {
		in := newFrameIn(0)
		r := &chunkReader{b: stream[:len(stream)-cut], rng: rand.New(rand.NewPCG(1, uint64(cut)))}
		var got []string
		var end error
		for end == nil {
			for {
				p, _, err := in.next()
				if err != nil {
					t.Fatalf("next: %v", err)
				}
				if p == nil {
					break
				}
				got = append(got, string(p))
			}
			if err := in.fill(r); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				end = err
			}
		}
		if cut == 0 {
			if !errors.Is(end, io.EOF) || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("whole stream: end %v, %d of %d frames intact", end, len(got), len(want))
			}
		} else if !errors.Is(end, ErrBadFrame) || len(got) != len(want)-1 {
			t.Errorf("cut stream: end %v, %d frames", end, len(got))
		}
	}
}

// A frame read whole is handed out in place, one that spans reads in
// memory of its own; a result decoded in place keeps its bytes
// (Structured, Data) once ownBytes has copied them, whatever is read
// into the read-ahead next.
func TestFrameInPlace(t *testing.T) {
	res := m("t", "result", "id", 1, "is_error", false,
		"content", arr(m("type", "other", "kind", "image", "data", []byte{1, 2, 3}), m("type", "text", "text", "t")),
		"structured", m("k", "v"))
	big := bytes.Repeat([]byte{'z'}, readBufSize)
	in := newFrameIn(0)
	r := bytes.NewReader(append(append(frameOf(res), frameOf(res)...), frameOf(big)...))
	if err := in.fill(r); err != nil {
		t.Fatal(err)
	}
	p, inPlace, err := in.next()
	if err != nil || !inPlace || !bytes.Equal(p, res) {
		t.Fatalf("first frame: %x, in place %v, %v; want the result, in place", p, inPlace, err)
	}
	msg, err := Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	got := &msg.(*ResultMsg).Result
	got.ownBytes()
	// Whatever comes next is read over the first frame's bytes.
	for {
		q, inPlace, err := in.next()
		if err != nil {
			t.Fatal(err)
		}
		if q != nil {
			if len(q) == len(big) && inPlace {
				t.Fatal("a frame larger than the read-ahead was handed out in place")
			}
			if len(q) == len(big) {
				break
			}
			continue
		}
		if err := in.fill(r); err != nil {
			t.Fatal(err)
		}
	}
	clear(in.buf)
	var structured map[string]any
	if err := got.Decode(&structured); err != nil || structured["k"] != "v" {
		t.Errorf("structured after the read-ahead was reused: %v, %v", structured, err)
	}
	if d := got.Content[0].Data; !bytes.Equal(d, []byte{1, 2, 3}) || cap(d) != len(d) {
		t.Errorf("data after the read-ahead was reused: %x (cap %d)", d, cap(d))
	}
	if got.Content[1].Text != "t" {
		t.Errorf("text after the read-ahead was reused: %q", got.Content[1].Text)
	}
}
