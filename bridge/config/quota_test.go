package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/internal/quota"
)

// Quotas are read from [quota], [mcp.X.quota] and its tools table, and a
// grant's come from them with the request's set over them, quota by
// quota, only for the servers the grant reaches.
func TestQuotas(t *testing.T) {
	cfg, err := Load("q.toml", []byte(`
[quota]
rate = 2.5
burst = 5
calls = 1000
bytes_in = "1MiB"
bytes_out = 4096
time = "1h"

[mcp.gh]
command = "/bin/gh"
quota.calls = 10
quota.tools.create_issue = { calls = 2, rate = 1 }

[mcp.fs]
command = "/bin/fs"
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (quota.Limits{Rate: 2.5, Burst: 5, Calls: 1000, BytesIn: 1 << 20, BytesOut: 4096, Time: time.Hour}); cfg.Quota != want {
		t.Errorf("[quota] = %+v, want %+v", cfg.Quota, want)
	}
	gh := cfg.Servers[1]
	if gh.Quota != (quota.Limits{Calls: 10}) || !reflect.DeepEqual(gh.ToolQuotas, map[string]quota.Limits{"create_issue": {Calls: 2, Rate: 1}}) {
		t.Errorf("[mcp.gh.quota] = %+v, %+v", gh.Quota, gh.ToolQuotas)
	}
	got := cfg.GrantQuotas([]string{"gh"}, map[quota.Scope]quota.Limits{"": {Calls: 50}, "gh/list": {BytesOut: 9}})
	want := map[quota.Scope]quota.Limits{
		"":                {Rate: 2.5, Burst: 5, Calls: 50, BytesIn: 1 << 20, BytesOut: 4096, Time: time.Hour},
		"gh":              {Calls: 10},
		"gh/create_issue": {Calls: 2, Rate: 1},
		"gh/list":         {BytesOut: 9},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GrantQuotas = %+v\nwant %+v", got, want)
	}
	if got := cfg.GrantQuotas([]string{"fs"}, nil); len(got) != 1 {
		t.Errorf("a grant of fs alone gets %+v, want the grant-wide defaults only", got)
	}
}

func TestQuotaMistakes(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[quota]\nrate = 0\n", "q.toml:2: quota.rate: bad rate the number 0"},
		{"[quota]\nrate = \"fast\"\n", "q.toml:2: quota.rate: bad rate"},
		{"[quota]\nrate = 1e-10\n", "q.toml:2: quota.rate: rate 1e-10 is less than the least, 0.00001 calls per second; write at least 0.00001 (a call every 27h46m40s); for a few calls in all, set calls = N"},
		{"[mcp.a]\ncommand = \"/a\"\nquota.tools.x = { rate = 0.000001 }\n", "q.toml:3: mcp.a.quota.tools.x.rate: rate 1e-06 is less than the least"},
		{"[quota]\nrate = 1000001\n", "q.toml:2: quota.rate: bad rate the number 1000001; write calls per second as a number from 0.00001 to 1000000"},
		{"[quota]\nburst = 3\n", "quota.burst: burst needs a rate"},
		{"[quota]\ncalls = -1\n", "q.toml:2: quota.calls: bad count"},
		{"[quota]\nbytes_out = \"lots\"\n", "quota.bytes_out: bad size"},
		{"[quota]\nspeed = 3\n", `quota.speed: unknown key "speed"`},
		{"[quota]\ntools.x = { calls = 1 }\n", `quota.tools: unknown key "tools"`},
		{"[mcp.a]\ncommand = \"/a\"\nquota.tools.x = { callz = 1 }\n", `mcp.a.quota.tools.x.callz: unknown key "callz"; did you mean "calls"?`},
	} {
		_, err := Load("q.toml", []byte(tc.toml))
		var el ErrorList
		if !errors.As(err, &el) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.toml, err, tc.want)
		}
	}
}

// A rate is read from quota.MinRate, about a call a day (however "one a
// day" is rounded, it passes), to quota.MaxRate. Below the least, a
// bucket's time between calls overflowed, and a rate meant as a call a
// century allowed every call.
func TestQuotaRates(t *testing.T) {
	for _, tc := range []struct {
		rate string
		want float64 // 0: refused
	}{
		{"0.00001", quota.MinRate},
		{"0.0000115740740740", 0.0000115740740740}, // 1/86400, rounded down
		{"1.1574074074074073e-05", 1.0 / 86400},
		{"1000000", quota.MaxRate},
		{"0.0000099999", 0},
		{"1e-10", 0},
		{"5e-324", 0},
		{"0", 0},
		{"-1", 0},
		{"inf", 0},
		{"nan", 0},
	} {
		cfg, err := Load("q.toml", []byte("[quota]\nrate = "+tc.rate+"\n"))
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("rate = %s was read as %g", tc.rate, cfg.Quota.Rate)
		case tc.want == 0:
			if !strings.Contains(err.Error(), "q.toml:2: quota.rate: ") || !strings.Contains(err.Error(), "0.00001") {
				t.Errorf("rate = %s: error %q does not name the key and the least rate", tc.rate, err)
			}
		case err != nil:
			t.Errorf("rate = %s: %v", tc.rate, err)
		case cfg.Quota.Rate != tc.want || cfg.Quota.Check() != "":
			t.Errorf("rate = %s read as %g (Check %q), want %g", tc.rate, cfg.Quota.Rate, cfg.Quota.Check(), tc.want)
		}
	}
}
