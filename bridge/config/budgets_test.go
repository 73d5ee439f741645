package config

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/capwire.md §13 states every budget and its default; the defaults
// it states are the code's.
func TestBudgetTable(t *testing.T) {
	data, err := os.ReadFile("../../docs/capwire.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## 13. capbridge's budgets")
	if !ok {
		t.Fatal("docs/capwire.md has no budgets section")
	}
	got := map[string]string{}
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[2]), "`")
		key = strings.TrimPrefix(key, "[mcp.X] ")
		got[key] = strings.TrimSpace(cells[3])
	}
	d, s := Defaults().Bridge, NewServer("x", "x")
	mib := func(n int) string { return strconv.Itoa(n>>20) + " MiB" }
	want := map[string]string{
		"max_unauth_connections": strconv.Itoa(d.MaxUnauthConnections),
		"max_unauth_per_uid":     strconv.Itoa(d.MaxUnauthPerUID),
		"hello_timeout":          dur(d.HelloTimeout),
		"allowed_uids":           "any",
		"max_connections":        strconv.Itoa(d.MaxConnections),
		"max_conns_per_grant":    strconv.Itoa(d.MaxConnsPerGrant),
		"max_conns_per_uid":      strconv.Itoa(d.MaxConnsPerUID),
		"idle_timeout":           dur(d.IdleTimeout),
		"frame_timeout":          dur(d.FrameTimeout),
		"max_frame":              mib(d.MaxFrame),
		"max_partial_bytes":      mib(d.MaxPartialBytes),
		"max_conn_inflight":      strconv.Itoa(d.MaxConnInflight),
		"write_timeout":          dur(d.WriteTimeout),
		"max_inflight":           strconv.Itoa(s.MaxInflight),
		"max_queue":              strconv.Itoa(s.MaxQueue),
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("docs/capwire.md §13 gives %s the default %q; the code's is %q", k, got[k], w)
		}
	}
	if s.MaxInflightPerGrant != s.MaxInflight/2 || !strings.HasPrefix(got["max_inflight_per_grant"], "half of `max_inflight`") {
		t.Errorf("max_inflight_per_grant: code %d of %d, docs %q", s.MaxInflightPerGrant, s.MaxInflight, got["max_inflight_per_grant"])
	}
	if s.MaxQueuePerGrant != s.MaxQueue/2 || !strings.HasPrefix(got["max_queue_per_grant"], "half of `max_queue`") {
		t.Errorf("max_queue_per_grant: code %d of %d, docs %q", s.MaxQueuePerGrant, s.MaxQueue, got["max_queue_per_grant"])
	}
}

// dur writes a duration as the docs do: "5m", not "5m0s".
func dur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}
