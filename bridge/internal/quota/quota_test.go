package quota

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// The bucket starts full (burst calls pass at once), refuses the next
// with the wait until its token, and refills at the rate, never past the
// burst: the clock is the test's, so no time passes but what it says.
func TestRateBucket(t *testing.T) {
	s := New(map[Scope]Limits{"": {Rate: 2, Burst: 3}}, t0)
	now := t0
	for i := range 3 {
		if _, e := s.Take("a", "x", 0, now); e != nil {
			t.Fatalf("call %d of the burst refused: %s", i, e.Message())
		}
	}
	_, e := s.Take("a", "x", 0, now)
	if e == nil || e.Kind != Rate || e.Name() != "rate" || e.RefillIn != 500*time.Millisecond {
		t.Fatalf("the call past the burst: %+v, want rate with 500ms to refill", e)
	}
	// 499 ms earn 0.998 of a token: still refused, with 1 ms to go.
	now = now.Add(499 * time.Millisecond)
	if _, e = s.Take("a", "x", 0, now); e == nil || e.RefillIn != time.Millisecond {
		t.Fatalf("at 499ms: %+v, want a refusal 1ms from its token", e)
	}
	now = now.Add(time.Millisecond)
	if _, e = s.Take("a", "x", 0, now); e != nil {
		t.Fatalf("at 500ms the token is there: %s", e.Message())
	}
	// An hour later the bucket holds its burst, not 7200 tokens.
	now = now.Add(time.Hour)
	for i := range 3 {
		if _, e := s.Take("a", "x", 0, now); e != nil {
			t.Fatalf("after an hour, call %d refused", i)
		}
	}
	if _, e := s.Take("a", "x", 0, now); e == nil {
		t.Fatal("the bucket refilled past its burst")
	}
	// A clock that steps back earns nothing and breaks nothing.
	if _, e := s.Take("a", "x", 0, now.Add(-time.Minute)); e == nil {
		t.Fatal("a clock stepping back refilled the bucket")
	}
}

// A rate without a burst holds ceil(rate) tokens, at least one.
func TestDefaultBurst(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int
	}{{0.5, 1}, {1, 1}, {2.5, 3}, {10, 10}} {
		s := New(map[Scope]Limits{"": {Rate: tc.rate}}, t0)
		n := 0
		for ; n < 100; n++ {
			if _, e := s.Take("a", "x", 0, t0); e != nil {
				break
			}
		}
		if n != tc.want {
			t.Errorf("rate %g: %d calls at once, want %d", tc.rate, n, tc.want)
		}
	}
}

// Totals: calls and bytes in are refused before they are spent, bytes
// out and time once they are; none refills.
func TestTotals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lim   Limits
		calls []struct {
			in, out int64
			took    time.Duration
		}
		want Kind // what refuses the call after them
		used int64
	}{
		{"calls", Limits{Calls: 2}, []struct {
			in, out int64
			took    time.Duration
		}{{1, 1, 1}, {1, 1, 1}}, Calls, 2},
		{"bytes in counts the refused call's own", Limits{BytesIn: 100}, []struct {
			in, out int64
			took    time.Duration
		}{{60, 0, 0}}, BytesIn, 60},
		{"bytes out once spent", Limits{BytesOut: 100}, []struct {
			in, out int64
			took    time.Duration
		}{{0, 99, 0}, {0, 1, 0}}, BytesOut, 100},
		{"time once spent", Limits{Time: time.Second}, []struct {
			in, out int64
			took    time.Duration
		}{{0, 0, 600 * time.Millisecond}, {0, 0, 400 * time.Millisecond}}, Time, int64(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(map[Scope]Limits{"": tc.lim}, t0)
			now := t0
			for i, c := range tc.calls {
				ch, e := s.Take("a", "x", c.in, now)
				if e != nil {
					t.Fatalf("call %d refused: %s", i, e.Message())
				}
				s.Settle(ch, c.out, c.took)
				now = now.Add(time.Hour) // totals do not refill
			}
			_, e := s.Take("a", "x", 50, now)
			if e == nil || e.Kind != tc.want || e.Used != tc.used || e.RefillIn != 0 {
				t.Fatalf("refusal %+v, want %s with %d used and no refill", e, tc.want, tc.used)
			}
			if !strings.Contains(e.Message(), "does not refill") {
				t.Errorf("message %q does not say it does not refill", e.Message())
			}
		})
	}
}

// Scopes: the grant's, the server's and the tool's quotas each apply to
// their calls; a refusal by one charges none, and names its scope.
func TestScopes(t *testing.T) {
	s := New(map[Scope]Limits{
		"":                    {Calls: 10},
		"gh":                  {Calls: 3},
		ToolScope("gh", "rm"): {Calls: 1},
	}, t0)
	take := func(server, tool string) *Exceeded {
		_, e := s.Take(server, tool, 0, t0)
		return e
	}
	if e := take("gh", "rm"); e != nil {
		t.Fatal(e.Message())
	}
	e := take("gh", "rm")
	if e == nil || e.Name() != "gh/rm:calls" {
		t.Fatalf("second rm: %+v, want gh/rm:calls", e)
	}
	if !strings.Contains(e.Message(), `tool "rm" of server "gh"`) {
		t.Errorf("message %q does not name the tool and server", e.Message())
	}
	for range 2 {
		if e := take("gh", "ls"); e != nil {
			t.Fatal(e.Message())
		}
	}
	if e := take("gh", "ls"); e == nil || e.Name() != "gh:calls" {
		t.Fatalf("fourth gh call: %+v, want gh:calls", e)
	}
	for range 7 {
		if e := take("fs", "read"); e != nil {
			t.Fatal(e.Message())
		}
	}
	if e := take("fs", "read"); e == nil || e.Name() != "calls" {
		t.Fatalf("eleventh call: %+v, want the grant's calls", e)
	}
	u := s.Usage(t0)
	if len(u) != 3 || u[0].Scope != "" || u[0].Calls != 10 || u[1].Scope != "gh" || u[1].Calls != 3 || u[2].Calls != 1 {
		t.Fatalf("usage %+v: refused calls were charged, or scopes are missing", u)
	}
}

// A call refused by admission is refunded its call and bytes, not its
// token.
func TestRefund(t *testing.T) {
	s := New(map[Scope]Limits{"": {Calls: 1, BytesIn: 10, Rate: 1}}, t0)
	c, e := s.Take("a", "x", 10, t0)
	if e != nil {
		t.Fatal(e.Message())
	}
	s.Refund(c)
	u := s.Usage(t0)[0]
	if u.Calls != 0 || u.BytesIn != 0 || u.Tokens >= 1 {
		t.Fatalf("after a refund: %+v", u)
	}
	if _, e := s.Take("a", "x", 10, t0.Add(time.Second)); e != nil {
		t.Fatalf("the refunded call's quota is not back: %s", e.Message())
	}
}

// No quota, no Set: a grant without quotas pays nothing.
func TestNoQuotaNoSet(t *testing.T) {
	if s := New(map[Scope]Limits{"": {}, "gh": {}}, t0); s != nil {
		t.Fatal("New made a Set of no quotas")
	}
	var s *Set
	if s.Usage(t0) != nil {
		t.Fatal("a nil Set has usage")
	}
}

func TestLimitsOverAndCheck(t *testing.T) {
	def := Limits{Rate: 5, Burst: 10, Calls: 100, Time: time.Minute}
	got := def.Over(Limits{Calls: 7, BytesOut: 9})
	if want := (Limits{Rate: 5, Burst: 10, Calls: 7, BytesOut: 9, Time: time.Minute}); got != want {
		t.Fatalf("Over = %+v, want %+v", got, want)
	}
	if got := def.Over(Limits{Rate: 1}); got.Rate != 1 || got.Burst != 0 {
		t.Fatalf("a new rate keeps the old burst: %+v", got)
	}
	for _, bad := range []Limits{{Rate: -1}, {Burst: 3}, {Calls: -1}, {Rate: MaxRate + 1}, {Rate: 1, Burst: MaxBurst + 1}} {
		if bad.Check() == "" {
			t.Errorf("%+v passes Check", bad)
		}
	}
	if msg := def.Check(); msg != "" {
		t.Errorf("%+v: %s", def, msg)
	}
	if s := def.String(); s != "rate=5,burst=10,calls=100,time=1m0s" {
		t.Errorf("String = %q", s)
	}
}

// A rate's bucket holds what it says at both ends of the rates Check
// accepts and with any burst, and a rate below them, which Check refuses,
// still makes a bucket that refuses: the time between calls (1/rate) is
// a whole number of nanoseconds, and neither it nor the bucket's
// tolerance ((burst-1) of them) may overflow. Overflowing, a rate of
// 1e-10 allowed a call every nanosecond, and a rate of 0.0001 with a
// burst of a million refused the first call of a full bucket.
func TestRateExtremes(t *testing.T) {
	const forever = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		name   string
		lim    Limits
		check  bool          // Check accepts it
		atOnce int           // the calls a full bucket allows
		refill time.Duration // then the wait for the next
	}{
		{"the least rate", Limits{Rate: MinRate}, true, 1, 99_999_999_999_999},
		{"the least rate, 292 years of calls", Limits{Rate: MinRate, Burst: 92_233}, true, 92_233, 99_999_999_999_999},
		{"the least rate, the largest burst: cut to 292 years of calls", Limits{Rate: MinRate, Burst: MaxBurst}, true, 92_233, 99_999_999_999_999},
		{"a slow rate, the largest burst", Limits{Rate: 0.0001, Burst: MaxBurst}, true, 922_337, 10_000 * time.Second},
		{"the largest rate", Limits{Rate: MaxRate, Burst: 10}, true, 10, time.Microsecond},
		{"below the least rate", Limits{Rate: MinRate * 0.99}, false, 1, 101_010_101_010_101},
		{"a call every 317 years", Limits{Rate: 1e-10}, false, 1, forever},
		{"a call every 317 years, the largest burst", Limits{Rate: 1e-10, Burst: MaxBurst}, false, 1, forever},
		{"next to nothing", Limits{Rate: 5e-324, Burst: MaxBurst}, false, 1, forever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := tc.lim.Check(); (msg == "") != tc.check {
				t.Errorf("Check = %q, want accepted %v", msg, tc.check)
			}
			s := New(map[Scope]Limits{"": tc.lim}, t0)
			if got := s.Usage(t0)[0].Tokens; got != float64(tc.atOnce) {
				t.Errorf("a full bucket holds %g tokens, want %d", got, tc.atOnce)
			}
			now := t0
			for i := range tc.atOnce {
				if _, e := s.Take("a", "x", 0, now); e != nil {
					t.Fatalf("call %d of a full bucket refused: %s", i, e.Message())
				}
			}
			// No time has passed: the next is refused, until its token.
			_, e := s.Take("a", "x", 0, now)
			if e == nil || e.Kind != Rate || e.RefillIn != tc.refill {
				t.Fatalf("call %d: %+v, want a refusal for %s", tc.atOnce, e, tc.refill)
			}
			if !strings.Contains(e.Message(), fmt.Sprintf("(burst %d)", tc.atOnce)) {
				t.Errorf("message %q does not give the bucket's size, %d", e.Message(), tc.atOnce)
			}
			now = now.Add(tc.refill - 1)
			if _, e := s.Take("a", "x", 0, now); e == nil {
				t.Fatalf("a call 1ns before its token was allowed")
			}
			if tc.refill == forever {
				return
			}
			if _, e := s.Take("a", "x", 0, now.Add(1)); e != nil {
				t.Fatalf("the call when its token is due was refused: %s", e.Message())
			}
		})
	}
}
