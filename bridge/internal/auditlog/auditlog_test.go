package auditlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
	"github.com/rs/zerolog"
)

// lockedBuffer is a sink safe for concurrent writers.
type lockedBuffer struct{ syncbuf.Buffer }

// A batch is written when its delay has passed since its first line, at
// once when it reaches its size, in order, and in full at Close, after
// which lines go straight through.
func TestLineBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		l := NewBatch(&out, 64, 5*time.Millisecond)
		text := out.String

		l.Write([]byte("a\n"))
		time.Sleep(4 * time.Millisecond)
		l.Write([]byte("b\n"))
		synctest.Wait()
		if got := text(); got != "" {
			t.Fatalf("written before the delay: %q", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := text(); got != "a\nb\n" {
			t.Fatalf("after the delay: %q, want both lines, in order", got)
		}

		big := strings.Repeat("x", 70) + "\n"
		l.Write([]byte("c\n"))
		l.Write([]byte(big))
		if got := text(); got != "a\nb\nc\n"+big {
			t.Fatalf("a full batch was not written at once: %q", got)
		}

		l.Write([]byte("d\n"))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l.Write([]byte("e\n"))
		if got := text(); !strings.HasSuffix(got, big+"d\ne\n") {
			t.Fatalf("Close did not flush, or a later line was held: %q", got)
		}
		time.Sleep(time.Second) // no timer is left to fire
		synctest.Wait()
	})
}

// logLine is the part of a log line the limiter's test reads.
type logLine struct {
	Message    string `json:"message"`
	Of         string `json:"of"`
	Suppressed int64  `json:"suppressed"`
}

func (l *lockedBuffer) lines(t *testing.T) []logLine {
	t.Helper()
	var out []logLine
	for line := range strings.Lines(l.String()) {
		var ll logLine
		if err := json.Unmarshal([]byte(line), &ll); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, ll)
	}
	return out
}

// count returns how many lines of msg were logged, and how many the
// summaries say were suppressed.
func count(lines []logLine, msg string) (logged, suppressed int64) {
	for _, l := range lines {
		switch {
		case l.Message == msg:
			logged++
		case l.Of == msg && l.Suppressed > 0:
			suppressed += l.Suppressed
		}
	}
	return logged, suppressed
}

// The bucket, on an injected clock: burst lines pass, the rest are
// counted; refilled tokens let lines through, each first reporting the
// count held; flush reports the rest; messages do not share buckets.
func TestLogLimiter(t *testing.T) {
	var sink lockedBuffer
	log, lim := Limit(zerolog.New(&sink))
	now := time.Unix(1_000_000, 0)
	lim.now = func() time.Time { return now }
	const stderr = "mcpwire: server stderr"
	stderrRate := RateOf(stderr)

	for range 1000 {
		log.Info().Msg(stderr)
	}
	for range 50 {
		log.Warn().Msg("refused")
	}
	if logged, held := count(sink.lines(t), stderr); logged != int64(stderrRate.Burst) || held != 0 {
		t.Fatalf("after a burst of 1000: %d stderr lines logged, %d reported; want %d and none yet", logged, held, stderrRate.Burst)
	}
	now = now.Add(time.Second) // 10 stderr tokens, 1 "refused" token
	for range 20 {
		log.Info().Msg(stderr)
	}
	log.Warn().Msg("refused")
	log.Warn().Msg("refused")
	lines := sink.lines(t)
	if logged, held := count(lines, stderr); logged != int64(stderrRate.Burst)+10 || held != 1000-int64(stderrRate.Burst) {
		t.Errorf("a second later: %d stderr lines logged, %d reported suppressed; want %d and %d", logged, held, stderrRate.Burst+10, 1000-stderrRate.Burst)
	}
	if logged, held := count(lines, "refused"); logged != int64(DefaultRate.Burst)+1 || held != 50-int64(DefaultRate.Burst) {
		t.Errorf("refused: %d logged, %d reported; want %d and %d", logged, held, DefaultRate.Burst+1, 50-DefaultRate.Burst)
	}
	// The summary comes before the line that carries it through.
	for i, l := range lines {
		if l.Of == "refused" && (i+1 == len(lines) || lines[i+1].Message != "refused") {
			t.Errorf("summary %+v is not followed by its message's line", l)
		}
	}
	lim.Flush()
	lines = sink.lines(t)
	for _, msg := range []string{stderr, "refused"} {
		logged, held := count(lines, msg)
		total := map[string]int64{stderr: 1020, "refused": 52}[msg]
		if logged+held != total {
			t.Errorf("%s after flush: %d logged + %d suppressed, want %d in all", msg, logged, held, total)
		}
	}
	n := len(lines)
	lim.Flush()
	if len(sink.lines(t)) != n {
		t.Error("a second flush reported again")
	}
}

// fillingWriter is a disk that fills: it takes room bytes, then writes
// what fits and fails with ENOSPC, as write(2) does.
type fillingWriter struct {
	b    bytes.Buffer
	room int
}

func (w *fillingWriter) Write(p []byte) (int, error) {
	if len(p) <= w.room {
		w.room -= len(p)
		return w.b.Write(p)
	}
	n := w.room
	w.b.Write(p[:n])
	w.room = 0
	return n, syscall.ENOSPC
}

// A write that fails loses its lines, every one of them counted and
// reported, and the batch is broken until a write succeeds; the line a
// short write cut is ended before the next, so the lines after it are
// whole; Swap moves to a new writer without losing what was buffered.
func TestBatchWriteFailures(t *testing.T) {
	w := &fillingWriter{room: 10}
	l := NewBatch(w, 1<<10, time.Hour)
	var reported int
	var why error
	l.OnLost = func(n int, err error) { reported += n; why = err }
	for _, s := range []string{"line-one\n", "line-two\n", "line-three\n"} {
		l.Write([]byte(s))
	}
	if err := l.Flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush onto a full disk: %v", err)
	}
	// "line-one\n" fit (9 bytes), then "l" of line-two: two lines lost.
	if !l.Broken() || l.Lost() != 2 || reported != 2 || !errors.Is(why, syscall.ENOSPC) {
		t.Fatalf("broken %v, lost %d, reported %d (%v)", l.Broken(), l.Lost(), reported, why)
	}
	w.room = 1 << 10 // room again
	l.Write([]byte("line-four\n"))
	if err := l.Flush(); err != nil || l.Broken() {
		t.Fatalf("after room was made: %v, broken %v", err, l.Broken())
	}
	if got := w.b.String(); got != "line-one\nl\nline-four\n" {
		t.Fatalf("written %q", got)
	}
	var next bytes.Buffer
	l.Write([]byte("line-five\n"))
	old, err := l.Swap(&next)
	if err != nil || old != w || !strings.HasSuffix(w.b.String(), "line-five\n") {
		t.Fatalf("swap: %v, old %v, %q", err, old, w.b.String())
	}
	l.Write([]byte("line-six\n"))
	l.Close()
	if next.String() != "line-six\n" {
		t.Fatalf("after the swap: %q", next.String())
	}

	// A write-through batch (size 0) onto /dev/full loses each line.
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	through := NewBatch(full, 0, 0)
	for range 3 {
		through.Write([]byte("x\n"))
	}
	if !through.Broken() || through.Lost() != 3 {
		t.Fatalf("/dev/full: broken %v, lost %d", through.Broken(), through.Lost())
	}
}
