package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/capbridge/capbridge/bridge/internal/quota"
)

// Quotas are the operator's defaults for every grant: a harness's grant
// request sets its own over them, quota by quota (docs/control.md,
// "grant").
//
//	[quota]                                         # each grant, all its calls
//	rate      = 50                                  # calls per second (a token bucket)
//	burst     = 100                                 # the bucket's size; default ceil(rate)
//	calls     = 100000                              # calls in all
//	bytes_in  = "256MiB"                            # the calls' arguments (JSON bytes) in all
//	bytes_out = "1GiB"                              # their results' bytes in all
//	time      = "1h"                                # the calls' time in capbridge in all
//
//	[mcp.github.quota]                              # each grant, its calls to this server
//	rate = 5
//	[mcp.github.quota.tools.create_issue]           # each grant, its calls to this tool
//	calls = 10

var quotaSpec = []keySpec{
	{name: "rate", kind: kindRate, doc: "calls per second, from 0.00001 (a call every 27h46m40s) to 1000000; a token bucket that starts full; default none"},
	{name: "burst", kind: kindCount, doc: "the bucket's size: calls allowed at once; default the rate rounded up, at least 1"},
	{name: "calls", kind: kindTotal, doc: "calls in all, for the grant's life; default none"},
	{name: "bytes_in", kind: kindSize, lo: 1, hi: maxQuotaBytes, doc: `the calls' arguments in all, as JSON bytes; a call that would pass it is refused; default none`},
	{name: "bytes_out", kind: kindSize, lo: 1, hi: maxQuotaBytes, doc: `the calls' results in all, in bytes; once spent, calls are refused; default none`},
	{name: "time", kind: kindDuration, doc: `the calls' time in capbridge in all; once spent, calls are refused; default none`},
}

var quotaKeys = specNames(quotaSpec)

// Bounds of a quota's totals, so a typo cannot wrap a counter.
const (
	maxQuotaBytes = 1 << 50
	maxQuotaCalls = 1 << 50
)

// quota reads one quota table into dst; withTools also reads its
// "tools" subtable (a server's) into tools.
func (r *reader) quota(key string, v any, dst *quota.Limits, tools *map[string]quota.Limits) {
	t, ok := r.table(key, v)
	if !ok {
		return
	}
	known := quotaKeys
	if tools != nil {
		known = append(slices.Clip(known), "tools")
	}
	var l quota.Limits
	for _, k := range slices.Sorted(maps.Keys(t)) {
		k2 := key + "." + k
		switch k {
		case "rate":
			r.rate(k2, t[k], &l.Rate)
		case "burst":
			r.count(k2, t[k], &l.Burst)
		case "calls":
			r.total(k2, t[k], &l.Calls)
		case "bytes_in", "bytes_out":
			var n int
			r.size(k2, t[k], 1, maxQuotaBytes, &n)
			if k == "bytes_in" {
				l.BytesIn = int64(n)
			} else {
				l.BytesOut = int64(n)
			}
		case "time":
			r.duration(k2, t[k], &l.Time)
		case "tools":
			if tools == nil {
				r.unknown(k2, k, known)
				continue
			}
			r.toolQuotas(k2, t[k], tools)
		default:
			r.unknown(k2, k, known)
		}
	}
	if l.Burst > 0 && l.Rate == 0 {
		r.fail(key+".burst", "add rate = N (calls per second), or remove burst", "burst needs a rate")
	}
	*dst = l
}

func (r *reader) toolQuotas(key string, v any, dst *map[string]quota.Limits) {
	t, ok := r.table(key, v)
	if !ok {
		return
	}
	out := make(map[string]quota.Limits, len(t))
	for _, tool := range slices.Sorted(maps.Keys(t)) {
		var l quota.Limits
		r.quota(key+"."+tool, t[tool], &l, nil)
		out[tool] = l
	}
	*dst = out
}

// rate reads calls per second: a number, whole or not, from
// quota.MinRate to quota.MaxRate.
func (r *reader) rate(key string, v any, dst *float64) {
	f := number(v)
	switch {
	case !(f > 0) || math.IsInf(f, 0) || f > quota.MaxRate:
		r.fail(key, fmt.Sprintf("write calls per second as a number from %s to %d, such as 10 or 0.5", minRate, quota.MaxRate), "bad rate %s", describe(v))
	case f < quota.MinRate:
		// A positive rate this small is a slip of a decimal place, or a
		// total meant as a rate.
		r.fail(key, fmt.Sprintf("write at least %s (a call every %s); for a few calls in all, set calls = N", minRate, time.Duration(1/quota.MinRate)*time.Second),
			"rate %s is less than the least, %s calls per second", strconv.FormatFloat(f, 'g', -1, 64), minRate)
	default:
		*dst = f
	}
}

// minRate is quota.MinRate as it is written in capbridge.toml.
var minRate = strconv.FormatFloat(quota.MinRate, 'f', -1, 64)

// number is a TOML number, whole or not, as a float64; -1 for anything
// else.
func number(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return -1
}

// total reads a count of calls that may be far larger than a bound's.
func (r *reader) total(key string, v any, dst *int64) {
	n, ok := v.(int64)
	if !ok || n < 1 || n > maxQuotaCalls {
		r.fail(key, fmt.Sprintf("write a whole number from 1 to %d", int64(maxQuotaCalls)), "bad count %s", describe(v))
		return
	}
	*dst = n
}

// GrantQuotas returns the limits by scope a grant reaching servers gets
// from the operator's defaults, with the request's own (by scope: ""
// the grant, "server", "server/tool") set over them, quota by quota.
func (c *Config) GrantQuotas(servers []string, request map[quota.Scope]quota.Limits) map[quota.Scope]quota.Limits {
	out := map[quota.Scope]quota.Limits{}
	if !c.Quota.IsZero() {
		out[""] = c.Quota
	}
	for _, s := range c.Servers {
		if !slices.Contains(servers, s.Name) {
			continue
		}
		if !s.Quota.IsZero() {
			out[s.Name] = s.Quota
		}
		for tool, l := range s.ToolQuotas {
			if !l.IsZero() {
				out[quota.ToolScope(s.Name, tool)] = l
			}
		}
	}
	for scope, l := range request {
		out[scope] = out[scope].Over(l)
	}
	return out
}
