// Package quota implements a grant's quotas: calls per second (a token
// bucket with a burst), and totals of calls, argument bytes, result bytes
// and call time, each for the whole grant, for one server or for one tool.
//
// It is pure: every method takes the time it happens at, so the bucket is
// tested with an injected clock, and nothing here starts a timer.
package quota

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names one quota of a scope: the kind part of a denial's quota
// ("github:rate").
type Kind string

// The quotas a scope may have.
const (
	Rate     Kind = "rate"      // calls per second, with a burst
	Calls    Kind = "calls"     // calls in all
	BytesIn  Kind = "bytes_in"  // the calls' arguments, JSON bytes, in all
	BytesOut Kind = "bytes_out" // their results' bytes, in all
	Time     Kind = "time"      // the calls' time in capbridge, in all
)

// Kinds lists every kind, in the order they are checked and reported.
var Kinds = []Kind{Rate, Calls, BytesIn, BytesOut, Time}

// Limits are one scope's quotas; a zero field is no quota of that kind.
type Limits struct {
	Rate     float64 // calls per second, the bucket's refill rate
	Burst    int     // the bucket's size; 0 with a Rate means ceil(Rate), at least 1
	Calls    int64
	BytesIn  int64
	BytesOut int64
	Time     time.Duration
}

// IsZero reports whether l sets no quota.
func (l Limits) IsZero() bool { return l == Limits{} }

// Over returns l with each quota o sets in place of l's: a harness's
// grant request over the operator's defaults, quota by quota.
func (l Limits) Over(o Limits) Limits {
	if o.Rate != 0 {
		l.Rate, l.Burst = o.Rate, o.Burst
	} else if o.Burst != 0 {
		l.Burst = o.Burst
	}
	if o.Calls != 0 {
		l.Calls = o.Calls
	}
	if o.BytesIn != 0 {
		l.BytesIn = o.BytesIn
	}
	if o.BytesOut != 0 {
		l.BytesOut = o.BytesOut
	}
	if o.Time != 0 {
		l.Time = o.Time
	}
	return l
}

// Check says what is wrong with l, or "": a rate must be from MinRate
// to MaxRate, a burst needs a rate, nothing is negative.
func (l Limits) Check() string {
	switch {
	case l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return "rate must be a positive number of calls per second"
	case l.Rate > 0 && l.Rate < MinRate:
		return fmt.Sprintf("rate %g is less than %s calls per second (a call every %s); for a few calls in all, set calls", l.Rate, strconv.FormatFloat(MinRate, 'f', -1, 64), time.Duration(1/MinRate)*time.Second)
	case l.Rate > MaxRate:
		return fmt.Sprintf("rate %g is more than %d calls per second", l.Rate, MaxRate)
	case l.Burst < 0 || l.Burst > MaxBurst:
		return fmt.Sprintf("burst must be from 1 to %d", MaxBurst)
	case l.Burst > 0 && l.Rate == 0:
		return "burst needs a rate"
	case l.Calls < 0 || l.BytesIn < 0 || l.BytesOut < 0 || l.Time < 0:
		return "a total must not be negative"
	}
	return ""
}

// Bounds of a rate, so a typo cannot make a bucket that overflows. The
// least rate is about a call a day: slower than that a grant is better
// bounded by a total of calls, and below about 1e-10 the time between
// calls is no longer a time.Duration. It is the round decimal just under
// 1/86400, so that "one a day" passes however it is rounded.
const (
	MinRate  = 0.00001
	MaxRate  = 1_000_000
	MaxBurst = 1_000_000
)

// BucketSize is the rate bucket's size: Burst, or by default the rate
// rounded up, at least 1; and at most the calls the rate earns in the
// longest time.Duration (about 292 years), since the bucket keeps its
// fill as a time ahead of now. Only a burst of more than 92,233 at a
// rate under a call every 2.5 hours reaches that bound.
func (l Limits) BucketSize() float64 {
	size := max(1, math.Ceil(l.Rate))
	if l.Burst > 0 {
		size = float64(l.Burst)
	}
	if l.Rate > 0 {
		size = min(size, float64(math.MaxInt64/interval(l.Rate)))
	}
	return size
}

// interval is the time between a rate's calls, 1/rate, in whole
// nanoseconds from 1 to the longest time.Duration: a rate too small for
// that (Check refuses it) gets the longest, not a conversion that wraps
// negative and so allows every call.
func interval(rate float64) time.Duration {
	iv := float64(time.Second) / rate
	if !(iv < math.MaxInt64) { // 2^63 as a float64; also NaN
		return math.MaxInt64
	}
	return max(1, time.Duration(iv))
}

// String renders the limits as the CLI and the docs write them:
// "rate=10,burst=20,calls=100".
func (l Limits) String() string {
	var parts []string
	if l.Rate != 0 {
		parts = append(parts, "rate="+strconv.FormatFloat(l.Rate, 'g', -1, 64), "burst="+strconv.Itoa(int(l.BucketSize())))
	}
	if l.Calls != 0 {
		parts = append(parts, "calls="+strconv.FormatInt(l.Calls, 10))
	}
	if l.BytesIn != 0 {
		parts = append(parts, "bytes_in="+strconv.FormatInt(l.BytesIn, 10))
	}
	if l.BytesOut != 0 {
		parts = append(parts, "bytes_out="+strconv.FormatInt(l.BytesOut, 10))
	}
	if l.Time != 0 {
		parts = append(parts, "time="+l.Time.String())
	}
	return strings.Join(parts, ",")
}

// Scope names what a meter counts: "" the whole grant, "server" one
// server's calls, "server/tool" one tool's.
type Scope = string

// ToolScope is the scope of one tool of a server.
func ToolScope(server, tool string) Scope { return server + "/" + tool }

// meter is one scope's account: its limits, its bucket and its totals.
//
// The bucket is kept as the generic cell rate algorithm keeps it, in
// whole nanoseconds rather than fractional tokens: tat is when the
// bucket will be full again, each call moves it on by interval, and a
// call is allowed while tat is at most tolerance ((burst-1) intervals)
// ahead of now. The wait a refused call is told is then exact.
type meter struct {
	scope     Scope
	lim       Limits
	interval  time.Duration // 1/rate
	tolerance time.Duration
	tat       time.Time
	// The totals charged so far.
	calls, bytesIn, bytesOut int64
	took                     time.Duration
}

// Set is a grant's meters: one for the grant, one per server and one per
// tool that has quotas. It is safe for concurrent use: one mutex guards
// every meter, held for a few comparisons per call. A grant without
// quotas has no Set (nil), and its calls pay nothing.
type Set struct {
	mu     sync.Mutex
	grant  *meter
	scoped map[Scope]*meter // "server" and "server/tool"
}

// New returns the Set of the limits by scope, or nil when none sets a
// quota. It starts every bucket full at now.
func New(limits map[Scope]Limits, now time.Time) *Set {
	s := &Set{scoped: map[Scope]*meter{}}
	for scope, l := range limits {
		if l.IsZero() {
			continue
		}
		m := &meter{scope: scope, lim: l, tat: now}
		if l.Rate > 0 {
			// tat runs up to tolerance+interval ahead of now, and that must
			// be a time.Duration: were it more, check's Sub would saturate
			// and never pass the tolerance (every call allowed); were the
			// product to wrap, the tolerance would be negative (every call
			// refused). BucketSize keeps it within; k is bounded here as
			// well, since New is also given pairs no Check saw (a
			// request's burst over a configured rate).
			m.interval = interval(l.Rate)
			k := math.MaxInt64/m.interval - 1
			if size := l.BucketSize() - 1; size < float64(k) {
				k = time.Duration(size)
			}
			m.tolerance = k * m.interval
		}
		if scope == "" {
			s.grant = m
		} else {
			s.scoped[scope] = m
		}
	}
	if s.grant == nil && len(s.scoped) == 0 {
		return nil
	}
	return s
}

// Exceeded is a call refused by a quota.
type Exceeded struct {
	Scope Scope
	Kind  Kind
	Limit Limits
	// RefillIn is, for a rate, how long until the next call is allowed;
	// 0 for a total, which does not refill for the grant.
	RefillIn time.Duration
	// Used is what the scope has used of the quota (calls, bytes, or
	// time in nanoseconds; for a rate, 0).
	Used int64
}

// Name is the quota as a denial names it: "[scope:]kind".
func (e *Exceeded) Name() string {
	if e.Scope == "" {
		return string(e.Kind)
	}
	return e.Scope + ":" + string(e.Kind)
}

// Message says which quota, of what, and when it refills, for people.
func (e *Exceeded) Message() string {
	whose := "this grant's quota:"
	switch server, tool, ok := strings.Cut(e.Scope, "/"); {
	case ok:
		whose = fmt.Sprintf("this grant's quota for tool %q of server %q:", tool, server)
	case e.Scope != "":
		whose = fmt.Sprintf("this grant's quota for server %q:", server)
	}
	var what string
	switch e.Kind {
	case Rate:
		what = fmt.Sprintf("at most %s calls a second (burst %d); the next call is allowed in %s", strconv.FormatFloat(e.Limit.Rate, 'g', -1, 64), int(e.Limit.BucketSize()), e.RefillIn.Round(time.Millisecond))
	case Calls:
		what = fmt.Sprintf("at most %d calls, and %d were made; it does not refill: ask for a new grant", e.Limit.Calls, e.Used)
	case BytesIn:
		what = fmt.Sprintf("at most %d bytes of arguments, %d used; this call's would pass it; it does not refill", e.Limit.BytesIn, e.Used)
	case BytesOut:
		what = fmt.Sprintf("at most %d bytes of results, %d used; it does not refill", e.Limit.BytesOut, e.Used)
	case Time:
		what = fmt.Sprintf("at most %s of calls, %s used; it does not refill", e.Limit.Time, time.Duration(e.Used).Round(time.Millisecond))
	}
	return "quota exceeded: " + whose + " " + what
}

// Charge is what Take charged one call, for Settle or Refund. Its zero
// value charged nothing.
type Charge struct {
	meters   [3]*meter
	n        int
	argBytes int64
}

// Take charges one call of argBytes on server's tool to every meter that
// applies at now, or, charging none, returns the first quota the call
// would exceed: the grant's, then the server's, then the tool's; within a
// scope, the rate, then calls, bytes in, bytes out and time. A rate takes
// a token; calls and bytes in are counted now, since they are known;
// bytes out and time are refused only once spent, since a call's are
// known when it ends (Settle).
func (s *Set) Take(server, tool string, argBytes int64, now time.Time) (Charge, *Exceeded) {
	var c Charge
	c.argBytes = argBytes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grant != nil {
		c.meters[c.n] = s.grant
		c.n++
	}
	if m := s.scoped[server]; m != nil {
		c.meters[c.n] = m
		c.n++
	}
	if len(s.scoped) > 0 {
		if m := s.scoped[ToolScope(server, tool)]; m != nil {
			c.meters[c.n] = m
			c.n++
		}
	}
	for _, m := range c.meters[:c.n] {
		if e := m.check(argBytes, now); e != nil {
			return Charge{}, e
		}
	}
	for _, m := range c.meters[:c.n] {
		if m.lim.Rate > 0 {
			m.tat = m.full(now).Add(m.interval)
		}
		m.calls++
		m.bytesIn += argBytes
	}
	return c, nil
}

// full is when the bucket is full again, not before now: a bucket left
// alone fills to its burst and no further, and a clock that steps back
// earns nothing.
func (m *meter) full(now time.Time) time.Time {
	if m.tat.Before(now) {
		return now
	}
	return m.tat
}

// tokens is the bucket's level at now.
func (m *meter) tokens(now time.Time) float64 {
	if m.lim.Rate == 0 {
		return 0
	}
	return m.lim.BucketSize() - float64(m.full(now).Sub(now))/float64(m.interval)
}

// check is the first quota of m a call of argBytes at now would exceed.
func (m *meter) check(argBytes int64, now time.Time) *Exceeded {
	l := m.lim
	e := &Exceeded{Scope: m.scope, Limit: l}
	ahead := m.full(now).Sub(now)
	switch {
	case l.Rate > 0 && ahead > m.tolerance:
		e.Kind, e.RefillIn = Rate, ahead-m.tolerance
	case l.Calls > 0 && m.calls+1 > l.Calls:
		e.Kind, e.Used = Calls, m.calls
	case l.BytesIn > 0 && m.bytesIn+argBytes > l.BytesIn:
		e.Kind, e.Used = BytesIn, m.bytesIn
	case l.BytesOut > 0 && m.bytesOut >= l.BytesOut:
		e.Kind, e.Used = BytesOut, m.bytesOut
	case l.Time > 0 && m.took >= l.Time:
		e.Kind, e.Used = Time, int64(m.took)
	default:
		return nil
	}
	return e
}

// Settle charges a call Take admitted with what it returned and how long
// it took.
func (s *Set) Settle(c Charge, resultBytes int64, took time.Duration) {
	if c.n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range c.meters[:c.n] {
		m.bytesOut += resultBytes
		m.took += took
	}
}

// Refund takes back the call and argument bytes of a call Take admitted
// that never reached its server (refused by admission); its token, if
// any, stays spent, since the rate bounds attempts.
func (s *Set) Refund(c Charge) {
	if c.n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range c.meters[:c.n] {
		m.calls--
		m.bytesIn -= c.argBytes
	}
}

// Usage is one scope's quotas and what was charged against them.
type Usage struct {
	Scope                    Scope
	Limits                   Limits
	Calls, BytesIn, BytesOut int64
	Took                     time.Duration
	// Tokens is the rate bucket's level at the time Usage was read (0
	// without a rate).
	Tokens float64
}

// Usage reports every scope's account at now, the grant's first, then
// by scope.
func (s *Set) Usage(now time.Time) []Usage {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Usage
	add := func(m *meter) {
		out = append(out, Usage{Scope: m.scope, Limits: m.lim, Calls: m.calls, BytesIn: m.bytesIn, BytesOut: m.bytesOut, Took: m.took, Tokens: m.tokens(now)})
	}
	if s.grant != nil {
		add(s.grant)
	}
	for _, k := range slices.Sorted(maps.Keys(s.scoped)) {
		add(s.scoped[k])
	}
	return out
}
