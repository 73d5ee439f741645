package auditlog

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Log rate limits. What a server or a peer does can be logged once per
// event: a server's stderr lines, the server→client requests refused,
// its notifications, connections refused at the socket's limit. Without
// a bound, an adversary that controls a server or can connect inflates
// the log at will (a server printing 2 MiB at boot became 2.3 MB of
// log). Each message has a token bucket: burst lines at once, then one
// per every; a line beyond that is dropped and counted, and the count is
// logged ("N lines suppressed") before the next line of that message
// that passes, or when the limiter is flushed. Stderr has room for a
// server's boot banner and a stack trace.
//
// The audit trail's lines that a grant pays for (auditGrantBudget) are
// not behind a limiter; those no grant pays for (a handshake refused for
// a token naming no live grant) are.
var (
	// DefaultRate is the rate of a message that has none of its own.
	DefaultRate = Rate{Burst: 20, Every: time.Second}
	rates       = map[string]Rate{
		"mcpwire: server stderr": {Burst: 200, Every: 100 * time.Millisecond},
	}
)

// maxLogSources bounds the buckets a limiter keeps. Messages are
// constants in the code, so a few dozen exist; any beyond the bound share
// one bucket rather than grow the map.
const maxLogSources = 128

// Rate is one message's bucket: Burst lines at once, then one per Every.
type Rate struct {
	Burst int
	Every time.Duration
}

// RateOf is the rate at which lines of msg pass.
func RateOf(msg string) Rate {
	if r, ok := rates[msg]; ok {
		return r
	}
	return DefaultRate
}

// Limiter is a zerolog.Hook that rate-limits its logger's lines per
// message (see RateOf). It is safe for concurrent use.
type Limiter struct {
	out zerolog.Logger   // where the summaries go: the logger without the hook
	now func() time.Time // injected by tests
	// OnDrop, when set before the first line, is called for each line
	// discarded, for a caller that counts them. It must not block.
	OnDrop func()

	mu      sync.Mutex
	buckets map[string]*logBucket
}

type logBucket struct {
	rate       Rate
	tokens     float64
	last       time.Time
	suppressed int64
}

// Limit returns log behind a new limiter, and the limiter, whose Flush
// reports what it is still holding back.
func Limit(log zerolog.Logger) (zerolog.Logger, *Limiter) {
	l := &Limiter{out: log, now: time.Now, buckets: map[string]*logBucket{}}
	return log.Hook(l), l
}

// Run lets a line through, or discards and counts it.
func (l *Limiter) Run(e *zerolog.Event, _ zerolog.Level, msg string) {
	pass, held := l.take(msg)
	if !pass {
		e.Discard()
		if l.OnDrop != nil {
			l.OnDrop()
		}
		return
	}
	if held > 0 {
		l.summary(msg, held)
	}
}

// take spends a token of msg's bucket, and returns whether the line
// passes and, when it does, how many lines were suppressed before it.
func (l *Limiter) take(msg string) (bool, int64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	key := msg
	if _, ok := l.buckets[key]; !ok && len(l.buckets) >= maxLogSources {
		key = ""
	}
	b := l.buckets[key]
	if b == nil {
		rate := RateOf(key)
		b = &logBucket{rate: rate, tokens: float64(rate.Burst), last: now}
		l.buckets[key] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(b.rate.Burst), b.tokens+float64(d)/float64(b.rate.Every))
		b.last = now
	}
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	held := b.suppressed
	b.suppressed = 0
	return true, held
}

func (l *Limiter) summary(msg string, n int64) {
	l.out.Warn().Str("of", msg).Int64("suppressed", n).Msgf("%d lines suppressed", n)
}

// Flush logs the count of every message's lines suppressed since its
// last line passed.
func (l *Limiter) Flush() {
	l.mu.Lock()
	held := map[string]int64{}
	for msg, b := range l.buckets {
		if b.suppressed > 0 {
			held[msg] = b.suppressed
			b.suppressed = 0
		}
	}
	l.mu.Unlock()
	for msg, n := range held {
		l.summary(msg, n)
	}
}
