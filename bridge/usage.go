package bridge

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/quota"
)

// What the live grants have done is shown one grant at a time by status
// and by the metrics: at most control.MaxGrantUsage grants, those with
// the most calls, so that neither grows with the number of grants (up to
// 65 536) however many a harness keeps.

// busiest returns at most control.MaxGrantUsage live grants, most calls
// first (ties by id, so the order is stable), and how many were left out.
func (b *Bridge) busiest() ([]*Grant, int) {
	gs := b.grants.snapshot()
	// Each grant's count is read once: calls go on while the grants are
	// sorted, and a count read anew at each comparison could contradict
	// an earlier one, which leaves a sort's order undefined.
	type ranked struct {
		g     *Grant
		calls int64
	}
	rs := make([]ranked, len(gs))
	for i, g := range gs {
		rs[i] = ranked{g, g.usage.calls.Load()}
	}
	slices.SortFunc(rs, func(x, y ranked) int {
		return cmp.Or(cmp.Compare(y.calls, x.calls), strings.Compare(x.g.ID, y.g.ID))
	})
	omitted := max(0, len(rs)-control.MaxGrantUsage)
	rs = rs[:len(rs)-omitted]
	for i, r := range rs {
		gs[i] = r.g
	}
	return gs[:len(rs)], omitted
}

// grantUsage is status's account of the busiest live grants at now.
func (b *Bridge) grantUsage(now time.Time) ([]control.GrantUsage, int) {
	gs, omitted := b.busiest()
	out := make([]control.GrantUsage, 0, len(gs))
	for _, g := range gs {
		u := g.Usage()
		gu := control.GrantUsage{Grant: g.ID, ExpiresMS: g.Expires.UnixMilli(), Calls: u.Calls, Denied: u.Denied,
			ArgBytes: u.ArgBytes, ResultBytes: u.ResultBytes, TookMS: u.Took.Milliseconds()}
		if g.run != nil {
			gu.Run = g.run.ID
		}
		for _, q := range g.Quotas(now) {
			gu.Quotas = append(gu.Quotas, control.QuotaUsage{
				Scope: q.Scope, Rate: q.Limits.Rate, Burst: bucketSize(q.Limits), Calls: uint64(q.Limits.Calls),
				BytesIn: uint64(q.Limits.BytesIn), BytesOut: uint64(q.Limits.BytesOut), TimeMS: uint64(q.Limits.Time.Milliseconds()),
				UsedCalls: q.Calls, UsedBytesIn: q.BytesIn, UsedBytesOut: q.BytesOut, UsedTimeMS: q.Took.Milliseconds(), Tokens: q.Tokens,
			})
		}
		out = append(out, gu)
	}
	return out, omitted
}

// requestQuotas converts a grant request's quotas, by scope; a scope
// given twice is refused.
func requestQuotas(qs []control.Quota) (map[quota.Scope]quota.Limits, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	out := make(map[quota.Scope]quota.Limits, len(qs))
	for _, q := range qs {
		if _, dup := out[q.Scope]; dup {
			return nil, fmt.Errorf("quota scope %q is given twice", q.Scope)
		}
		if q.Calls > math.MaxInt64 || q.BytesIn > math.MaxInt64 || q.BytesOut > math.MaxInt64 || q.TimeMS > uint64(MaxGrantTTL/time.Millisecond) {
			return nil, fmt.Errorf("quota scope %q: a total is out of range (time_ms at most %d)", q.Scope, MaxGrantTTL/time.Millisecond)
		}
		out[q.Scope] = quota.Limits{Rate: q.Rate, Burst: int(q.Burst), Calls: int64(q.Calls), BytesIn: int64(q.BytesIn),
			BytesOut: int64(q.BytesOut), Time: time.Duration(q.TimeMS) * time.Millisecond}
	}
	return out, nil
}

// grantFamilies are the per-grant series the metrics write at scrape
// time, for the busiest live grants.
var grantFamilies = []struct {
	name, typ string
	value     func(Usage) float64
}{
	{"capbridge_grant_calls_total", "counter", func(u Usage) float64 { return float64(u.Calls) }},
	{"capbridge_grant_denied_total", "counter", func(u Usage) float64 { return float64(u.Denied) }},
	{"capbridge_grant_arg_bytes_total", "counter", func(u Usage) float64 { return float64(u.ArgBytes) }},
	{"capbridge_grant_result_bytes_total", "counter", func(u Usage) float64 { return float64(u.ResultBytes) }},
	{"capbridge_grant_call_seconds_total", "counter", func(u Usage) float64 { return u.Took.Seconds() }},
}

// writeGrantSeries writes the per-grant series of the busiest live
// grants: their usage, and for each quota the share of it used.
func (b *Bridge) writeGrantSeries(w io.Writer) {
	gs, omitted := b.busiest()
	now := b.grants.now()
	usage := make([]Usage, len(gs))
	for i, g := range gs {
		usage[i] = g.Usage()
	}
	for _, f := range grantFamilies {
		if len(gs) == 0 {
			break
		}
		fmt.Fprintf(w, "# HELP %s\n# TYPE %s %s\n", f.name, f.name, f.typ)
		for i, g := range gs {
			fmt.Fprintf(w, "%s{grant=%q} %g\n", f.name, g.ID, f.value(usage[i]))
		}
	}
	header := false
	for _, g := range gs {
		for _, q := range g.Quotas(now) {
			for _, k := range quota.Kinds {
				ratio, ok := usedRatio(q, k)
				if !ok {
					continue
				}
				if !header {
					fmt.Fprintf(w, "# HELP capbridge_grant_quota_used_ratio\n# TYPE capbridge_grant_quota_used_ratio gauge\n")
					header = true
				}
				name := string(k)
				if q.Scope != "" {
					name = q.Scope + ":" + name
				}
				fmt.Fprintf(w, "capbridge_grant_quota_used_ratio{grant=%q,quota=\"%s\"} %g\n", g.ID, labelValue(name), ratio)
			}
		}
	}
	fmt.Fprintf(w, "# HELP capbridge_grant_series_omitted\n# TYPE capbridge_grant_series_omitted gauge\ncapbridge_grant_series_omitted %d\n", omitted)
}

// bucketSize is the rate bucket's size status shows: the default's when
// the grant left it to the default; 0 when there is no rate.
func bucketSize(l quota.Limits) uint32 {
	if l.Rate <= 0 {
		return 0
	}
	return uint32(l.BucketSize())
}

// usedRatio is the share of quota k of q that is used (for a rate, of
// the bucket), and whether q has that quota.
func usedRatio(q quota.Usage, k quota.Kind) (float64, bool) {
	l := q.Limits
	switch {
	case k == quota.Rate && l.Rate > 0:
		return min(1, max(0, 1-q.Tokens/l.BucketSize())), true
	case k == quota.Calls && l.Calls > 0:
		return float64(q.Calls) / float64(l.Calls), true
	case k == quota.BytesIn && l.BytesIn > 0:
		return float64(q.BytesIn) / float64(l.BytesIn), true
	case k == quota.BytesOut && l.BytesOut > 0:
		return float64(q.BytesOut) / float64(l.BytesOut), true
	case k == quota.Time && l.Time > 0:
		return float64(q.Took) / float64(l.Time), true
	}
	return 0, false
}
