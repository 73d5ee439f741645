package bridge

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/bridge/internal/quota"
)

// Status shows the rate bucket's real size: the one given, or the
// default a grant that gave none gets, never 0 beside a rate.
func TestBucketSize(t *testing.T) {
	for _, tc := range []struct {
		l    quota.Limits
		want uint32
	}{
		{quota.Limits{}, 0},
		{quota.Limits{Calls: 5}, 0},
		{quota.Limits{Rate: 2, Burst: 5}, 5},
		{quota.Limits{Rate: 2.5}, 3},
		{quota.Limits{Rate: 0.2}, 1},
	} {
		if got := bucketSize(tc.l); got != tc.want {
			t.Errorf("bucketSize(%+v) = %d, want %d", tc.l, got, tc.want)
		}
	}
}

// Status and the metrics show the busiest MaxGrantUsage live grants,
// most calls first, ties by id, and count the rest.
func TestBusiest(t *testing.T) {
	cfg := config.Defaults()
	cfg.Servers = []config.Server{config.NewServer("s", "/bin/true")}
	br := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	var all []*Grant
	for i := range control.MaxGrantUsage + 3 {
		g, _, err := br.Grant(GrantSpec{Servers: map[string][]string{"s": nil}})
		if err != nil {
			t.Fatal(err)
		}
		g.usage.calls.Store(int64(i % 7))
		all = append(all, g)
	}
	got, omitted := br.busiest()
	if omitted != 3 || len(got) != control.MaxGrantUsage {
		t.Fatalf("busiest: %d grants, %d omitted; want %d and 3", len(got), omitted, control.MaxGrantUsage)
	}
	slices.SortFunc(all, func(x, y *Grant) int {
		return cmp.Or(cmp.Compare(y.usage.calls.Load(), x.usage.calls.Load()), strings.Compare(x.ID, y.ID))
	})
	for i, g := range got {
		if g != all[i] {
			t.Fatalf("busiest[%d] = %s (%d calls), want %s (%d calls)", i, g.ID, g.usage.calls.Load(), all[i].ID, all[i].usage.calls.Load())
		}
	}
}
