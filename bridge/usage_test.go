package bridge

import (
	"testing"

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
