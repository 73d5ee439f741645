package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/capbridge/capbridge/bridge/internal/quota"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/loopback"
	"github.com/capbridge/capbridge/internal/netlimit"
	"github.com/capbridge/capbridge/internal/truncate"
)

// The bridge's metrics are kept with github.com/VictoriaMetrics/metrics
// rather than github.com/prometheus/client_golang. Both were measured on
// what a call costs them (one counter increment and one histogram
// observation through handles resolved in advance, as this file uses
// them; bench/metricslib, both in one run on a shared 2-CPU machine):
// VictoriaMetrics took 45% less serially (93 against 170 ns) and 60% less
// on both cores (86 against 216 ns), where client_golang's histogram
// contends on its hot and cold counts; neither allocates. Looking series
// up by label values on each call costs 600-1000 ns with either (and 2
// allocations with VictoriaMetrics), which is why no call here looks
// anything up by name.
// VictoriaMetrics also brings two small modules where client_golang brings
// protobuf, procfs and the Prometheus data model, and its gauges are
// callbacks, so what status already counts (calls in flight and queued,
// server states, open connections, live grants) is read when scraped and
// costs the call path nothing.

// Series bounds. The tool label names only tools in a server's listing,
// and at most maxToolSeries calls_total series carry one; a call whose
// tool is not listed, or that comes once the budget is spent, is counted
// in its server's series with an empty tool label. Every other label
// comes from the configuration or a closed set, so the number of series
// is bounded by the config whatever callers and servers send.
const (
	maxToolSeries = 4096
	maxLabelValue = 128 // bytes of a tool name kept in its label
)

// callBuckets are the upper bounds, in seconds, of the call-latency
// histogram: from a fast local tool (sub-millisecond) to max_call_timeout's
// default of ten minutes.
var callBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Outcomes of a call, the outcome label of capbridge_calls_total: a result,
// a result with isError, or the denial's code.
const (
	outcomeResult = iota
	outcomeIsError
	outcomeOther // a denial code outside denialCodes (a newer capwire's)
	firstDenialOutcome
)

// denialCodes are capwire's denial codes (docs/capwire.md §5), in the
// order of their outcome indexes from firstDenialOutcome.
var denialCodes = [...]string{
	capwire.CodeBadRequest, capwire.CodeUnknownCapability, capwire.CodeNotGranted,
	capwire.CodeUnknownTool, capwire.CodeBadArguments, capwire.CodeServerUnavailable,
	capwire.CodeTimeout, capwire.CodeCancelled, capwire.CodeServerError,
	capwire.CodeResultMalformed, capwire.CodeResultTooLarge, capwire.CodeOverloaded,
	capwire.CodeRevoked, capwire.CodeShuttingDown, capwire.CodeQuotaExceeded,
}

const numOutcomes = firstDenialOutcome + len(denialCodes)

var outcomeNames = append([]string{"result", "is_error", "other"}, denialCodes[:]...)

// grantEnds are the reasons of capbridge_grants_ended_total, the causes a
// grant's context ends with; "other" is any cause but these.
var grantEnds = [...]struct {
	reason string
	cause  error
}{{"revoked", ErrRevoked}, {"expired", ErrGrantExpired}, {"shutdown", errShuttingDown}, {"other", nil}}

var outcomeIndex = func() map[string]int {
	m := make(map[string]int, len(denialCodes))
	for i, c := range denialCodes {
		m[c] = firstDenialOutcome + i
	}
	return m
}()

// metrics is one bridge's series. Its hooks are called once per event
// at the points the bridge already passes: a call retired (auditCall), a
// denial replied, a connection tracked or refused, a grant issued (its
// end is seen through its context), a server booted. Each is a few
// atomic operations; series are created ahead, at New and at each boot,
// except a call outcome's, created on its first use under mu.
//
// A nil *metrics records nothing: the bridge's benchmark measures the
// call path with and without it.
//
// Concurrency: every hook may be called from any goroutine. denials are
// fixed at New; servers grows (under mu, copied on write) as reloads add
// servers, and a name keeps its series for the bridge's life, across
// restarts and replacements; a server's tool table is replaced whole at
// each boot and read through an atomic pointer.
type metrics struct {
	b   *Bridge
	set *vm.Set

	servers atomic.Pointer[map[string]*serverSeries]
	denials []*vm.Counter // by outcome index; result and is_error unused

	accepted     [2]*vm.Counter // by socket: call, control
	grantsIssued *vm.Counter
	grantsEnded  [len(grantEnds)]*vm.Counter
	bytesIn      *vm.Counter
	bytesOut     *vm.Counter
	// auditLostBy counts audit lines lost, by auditLostReasons.
	auditLostBy [len(auditLostReasons)]*vm.Counter
	// quotaBy counts calls refused by a quota, by its kind.
	quotaBy map[quota.Kind]*vm.Counter

	mu         sync.Mutex
	toolSeries int // calls_total series with a tool label, at most maxToolSeries
}

// serverSeries is one configured server's series.
type serverSeries struct {
	m       *metrics
	name    string // the label value, escaped
	latency *vm.PrometheusHistogram
	bootsBy [2]*vm.Counter // ready, failed
	boots   atomic.Int64
	restart *vm.Counter
	bootDur *vm.Gauge

	tools    atomic.Pointer[map[string]*toolSeries] // the listing's tools; nil before the first ready boot
	untooled *toolSeries                            // tool label ""
}

// toolSeries is the calls_total counters of one tool of one server, by
// outcome index, each created on first use.
type toolSeries struct {
	label    string // the tool label's value, escaped; "" for untooled
	outcomes [numOutcomes]atomic.Pointer[vm.Counter]
}

var socketNames = [2]string{"call", "control"}

func socketIndex(control bool) int {
	if control {
		return 1
	}
	return 0
}

// newMetrics creates b's series and gives each server its own. It is
// called by New once the servers exist.
func newMetrics(b *Bridge) *metrics {
	// Histograms are parsed as histograms only under their # TYPE line,
	// which VictoriaMetrics writes when this (process-wide) switch is on.
	vm.ExposeMetadata(true)
	set := vm.NewSet()
	m := &metrics{
		b: b, set: set,
		denials:      make([]*vm.Counter, len(outcomeNames)),
		grantsIssued: set.NewCounter("capbridge_grants_issued_total"),
		bytesIn:      set.NewCounter(`capbridge_call_socket_bytes_total{direction="in"}`),
		bytesOut:     set.NewCounter(`capbridge_call_socket_bytes_total{direction="out"}`),
	}
	for i, e := range grantEnds {
		m.grantsEnded[i] = set.NewCounter(`capbridge_grants_ended_total{reason="` + e.reason + `"}`)
	}
	for i := outcomeOther; i < len(outcomeNames); i++ {
		m.denials[i] = set.NewCounter(`capbridge_denials_total{code="` + outcomeNames[i] + `"}`)
	}
	for i, s := range socketNames {
		m.accepted[i] = set.NewCounter(`capbridge_connections_accepted_total{socket="` + s + `"}`)
		set.NewGauge(`capbridge_connections_open{socket="`+s+`"}`, func() float64 { return float64(b.openConns(i == 1)) })
	}
	set.NewGauge(`capbridge_connections_open{socket="metrics"}`, func() float64 { return float64(b.metricsOpen.Load()) })
	set.NewGauge("capbridge_grants_live", func() float64 { return float64(b.grants.live()) })
	for i, r := range auditLostReasons {
		m.auditLostBy[i] = set.NewCounter(`capbridge_audit_lines_lost_total{reason="` + r + `"}`)
	}
	m.quotaBy = make(map[quota.Kind]*vm.Counter, len(quota.Kinds))
	for _, k := range quota.Kinds {
		m.quotaBy[k] = set.NewCounter(`capbridge_quota_exceeded_total{quota="` + string(k) + `"}`)
	}
	set.NewGauge("capbridge_audit_writable", func() float64 {
		if b.auditOut != nil && b.auditOut.Broken() {
			return 0
		}
		return 1
	})
	m.servers.Store(&map[string]*serverSeries{})
	for _, s := range b.serverList() {
		s.metrics = m.seriesFor(s.name(), s.cfg().Remote != nil)
	}
	// Go runtime and process series (goroutines, memory, descriptors,
	// CPU): read when scraped.
	set.RegisterMetricsWriter(vm.WriteProcessMetrics)
	return m
}

// seriesFor returns the series of the server called name, creating them
// for a name the bridge has not served before. Its gauges read the
// server in force under that name, whichever process it is now; a
// removed server's read zero.
func (m *metrics) seriesFor(name string, remote bool) *serverSeries {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.transportSeries(name, remote)
	if ss := (*m.servers.Load())[name]; ss != nil {
		return ss
	}
	b, set := m.b, m.set
	l := `{server="` + labelValue(name) + `"}`
	ss := &serverSeries{
		m: m, name: labelValue(name),
		latency: set.NewPrometheusHistogramExt("capbridge_call_duration_seconds"+l, callBuckets),
		bootsBy: [2]*vm.Counter{
			set.NewCounter(`capbridge_server_boots_total{server="` + labelValue(name) + `",outcome="ready"}`),
			set.NewCounter(`capbridge_server_boots_total{server="` + labelValue(name) + `",outcome="failed"}`),
		},
		restart:  set.NewCounter("capbridge_server_restarts_total" + l),
		bootDur:  set.NewGauge("capbridge_server_boot_seconds"+l, nil),
		untooled: &toolSeries{},
	}
	gauge := func(f func(*server) int64) func() float64 {
		return func() float64 {
			if s := b.srv(name); s != nil {
				return float64(f(s))
			}
			return 0
		}
	}
	set.NewGauge("capbridge_calls_inflight"+l, gauge(func(s *server) int64 { return s.adm.Running() }))
	set.NewGauge("capbridge_calls_abandoned"+l, gauge(func(s *server) int64 { return s.abandoned.Load() }))
	set.NewGauge("capbridge_calls_queued"+l, gauge(func(s *server) int64 { return s.adm.Queued() }))
	for _, st := range []State{StateStarting, StateReady, StateFailed, StateDead, StateBackoff, StateNeedsLogin, StateRetired} {
		set.NewGauge(`capbridge_server_state{server="`+labelValue(name)+`",state="`+string(st)+`"}`, gauge(func(s *server) int64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.state == st {
				return 1
			}
			return 0
		}))
	}
	next := maps.Clone(*m.servers.Load())
	next[name] = ss
	m.servers.Store(&next)
	return ss
}

// transportSeries registers the transport info series of the server
// called name, once each: 1 for the transport in use, 0 for the other a
// remote server may fall back to (an info series to join on; a label on
// every series would only repeat it). A reload that makes a stdio server
// remote under the same name adds the remote ones beside stdio's.
func (m *metrics) transportSeries(name string, remote bool) {
	transports := []string{"stdio"}
	if remote {
		transports = []string{"streamable-http", "sse"}
	}
	for _, tr := range transports {
		m.set.GetOrCreateGauge(`capbridge_server_transport{server="`+labelValue(name)+`",transport="`+tr+`"}`, func() float64 {
			if s := m.b.srv(name); s != nil && s.transportNow() == tr {
				return 1
			}
			return 0
		})
	}
}

// openConns counts the open connections of one socket.
func (b *Bridge) openConns(control bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if control {
		return b.ctlOpen
	}
	return len(b.open) - b.ctlOpen
}

// retired counts a call that named a configured server, with its
// latency, when auditCall records it. A call to a server that is not
// configured is counted only in capbridge_denials_total: its name is the
// caller's and never becomes a label.
func (m *metrics) retired(server, tool string, o outcome, took time.Duration) {
	if m == nil {
		return
	}
	ss := (*m.servers.Load())[server]
	if ss == nil {
		return
	}
	ss.latency.Update(took.Seconds())
	i := outcomeResult
	switch {
	case o.denial != nil:
		i = codeOutcome(o.denial.Code)
	case o.result.IsError:
		i = outcomeIsError
	}
	ts := ss.untooled
	if tools := ss.tools.Load(); tools != nil {
		if t, ok := (*tools)[tool]; ok {
			ts = t
		}
	}
	c := ts.outcomes[i].Load()
	if c == nil {
		c = ss.counter(ts, i)
	}
	c.Inc()
}

func codeOutcome(code string) int {
	if i, ok := outcomeIndex[code]; ok {
		return i
	}
	return outcomeOther
}

// counter creates the calls_total counter of ts and outcome i, or, once
// maxToolSeries tool-labelled series exist, returns its server's
// untooled counter for i instead.
func (ss *serverSeries) counter(ts *toolSeries, i int) *vm.Counter {
	m := ss.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := ts.outcomes[i].Load(); c != nil {
		return c
	}
	if ts != ss.untooled {
		if m.toolSeries >= maxToolSeries {
			ts = ss.untooled
			if c := ts.outcomes[i].Load(); c != nil {
				return c
			}
		} else {
			m.toolSeries++
		}
	}
	c := m.set.GetOrCreateCounter(`capbridge_calls_total{server="` + ss.name + `",tool="` + ts.label + `",outcome="` + outcomeNames[i] + `"}`)
	ts.outcomes[i].Store(c)
	return c
}

// auditLostReasons are the reason labels of
// capbridge_audit_lines_lost_total (audit.go).
var auditLostReasons = [...]string{lostWrite, lostBudget, lostRate}

// auditLost counts n audit lines lost for reason.
func (m *metrics) auditLost(reason string, n int) {
	if m == nil {
		return
	}
	for i, r := range auditLostReasons {
		if r == reason {
			m.auditLostBy[i].Add(n)
		}
	}
}

// quotaExceeded counts a call a quota of kind k refused.
func (m *metrics) quotaExceeded(k quota.Kind) {
	if m == nil {
		return
	}
	m.quotaBy[k].Inc()
}

// denied counts a denial sent to a caller, from either socket.
func (m *metrics) denied(code string) {
	if m == nil {
		return
	}
	m.denials[codeOutcome(code)].Inc()
}

// accepted counts a connection admitted on a socket.
func (m *metrics) connAccepted(control bool) {
	if m == nil {
		return
	}
	m.accepted[socketIndex(control)].Inc()
}

// connRefused counts a connection refused on a socket, for a reason from
// a closed set: "limit" (the socket's connection budget), "shutting_down",
// "peer" (a peer check: the control socket's, or allowed_uids at the call
// socket's accept), "evicted" (a stranger dropped to make room for a
// newer one), or a call-socket handshake's
// fatal code, "revoked" or "expired".
func (m *metrics) connRefused(control bool, reason string) {
	if m == nil {
		return
	}
	m.set.GetOrCreateCounter(`capbridge_connections_refused_total{socket="` + socketNames[socketIndex(control)] + `",reason="` + reason + `"}`).Inc()
}

// trackRefused counts a connection track refused: the bridge was closing,
// or the socket's budget was spent.
func (m *metrics) trackRefused(control, closing bool) {
	if closing {
		m.connRefused(control, "shutting_down")
		return
	}
	m.connRefused(control, "limit")
}

// handshakeRefused counts a call-socket connection whose handshake
// failed: err is what the handshake returned, cause why the bridge
// refused the token (nil when the hello itself was at fault).
func (m *metrics) handshakeRefused(cause, err error) {
	var f *capwire.FatalMsg
	switch {
	case errors.Is(cause, ErrRevoked):
		m.connRefused(false, "revoked")
	case errors.Is(cause, ErrGrantExpired):
		m.connRefused(false, "expired")
	case errors.As(err, &f) && capwire.IsFatalCode(f.Code):
		m.connRefused(false, f.Code)
	default:
		m.connRefused(false, "io") // the peer went away or stalled mid-hello
	}
}

// trafficFunc is what capserver tells the size of each frame on the call
// socket, or nil.
func (m *metrics) trafficFunc() func(read, written int) {
	if m == nil {
		return nil
	}
	return func(read, written int) {
		m.bytesIn.Add(read)
		m.bytesOut.Add(written)
	}
}

// granted counts an issued grant, and its end (revoked, expired or shut
// down) when its context ends. It passes issue's results through.
func (m *metrics) granted(g *Grant, token string, err error) (*Grant, string, error) {
	if m == nil || err != nil {
		return g, token, err
	}
	m.grantsIssued.Inc()
	context.AfterFunc(g.Context(), func() {
		cause := context.Cause(g.Context())
		for i, e := range grantEnds {
			if e.cause == nil || errors.Is(cause, e.cause) {
				m.grantsEnded[i].Inc()
				return
			}
		}
	})
	return g, token, err
}

// booted records one boot attempt that began at start and ended with
// t, nil when it failed: its outcome, its duration, and, when it is not
// the server's first, a restart. A ready boot publishes the listing's
// tools as the ones the tool label may name.
func (ss *serverSeries) booted(start time.Time, t *table) {
	if ss == nil {
		return
	}
	ss.bootDur.Set(time.Since(start).Seconds())
	if ss.boots.Add(1) > 1 {
		ss.restart.Inc()
	}
	if t == nil {
		ss.bootsBy[1].Inc()
		return
	}
	ss.bootsBy[0].Inc()
	ss.listed(t)
}

// listed makes t's tools the ones the tool label may name, at a boot and
// at each re-listing; a tool listed before keeps its series.
func (ss *serverSeries) listed(t *table) {
	if ss == nil {
		return
	}
	old := ss.tools.Load()
	tools := make(map[string]*toolSeries, len(t.tools))
	for name := range t.tools {
		if old != nil && (*old)[name] != nil {
			tools[name] = (*old)[name] // a listed tool keeps its series across restarts
			continue
		}
		tools[name] = &toolSeries{label: labelValue(name)}
	}
	ss.tools.Store(&tools)
}

// labelValue escapes s for a label value of the text exposition format
// (backslash, double quote and line feed), after making it valid UTF-8,
// replacing what a terminal would act on (controls, escapes, bidi and
// other format characters) and cutting it to maxLabelValue bytes: a
// tool's name is the server's choice, and an operator reads the metrics
// with curl and capbridge metrics.
func labelValue(s string) string {
	return labelEscaper.Replace(truncate.String(inert.Lines(s), maxLabelValue))
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// WriteMetrics writes every series in the Prometheus text exposition
// format (version 0.0.4), each busy live grant's usage and quotas
// included.
func (b *Bridge) WriteMetrics(w io.Writer) { b.writeMetrics(w, true) }

// writeMetrics writes the series, the per-grant ones when perGrant.
func (b *Bridge) writeMetrics(w io.Writer, perGrant bool) {
	if b.metrics == nil {
		return
	}
	b.metrics.set.WritePrometheus(w)
	if perGrant {
		b.writeGrantSeries(w)
	}
}

// MetricsContentType is the Content-Type of what WriteMetrics writes.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeMetrics serves WriteMetrics over HTTP on l (ListenMetrics's
// listener) at /metrics, to GET and HEAD, until Shutdown, and closes l.
// At most maxMetricsConns connections are open at once, and each is
// bounded in time (metrics_listen.go): whatever the port is sent, the
// call and control sockets keep accepting.
//
// On a TCP port, which every local user can reach, the per-grant series
// are left out: their labels are the live grants' ids, and other users
// are not to learn which grants exist. A Unix socket (mode 0600) and the
// control socket's metrics have them. There a request must also name
// the loopback in its Host: a web page the operator visits could
// otherwise read the metrics through a name it rebinds to 127.0.0.1.
func (b *Bridge) ServeMetrics(l net.Listener) error {
	perGrant := l.Addr().Network() == "unix"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if !perGrant && !loopback.HostPort(r.Host) {
			http.Error(w, "capbridge: the metrics are served to a Host naming the loopback (127.0.0.1, [::1], localhost)", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", MetricsContentType)
		b.writeMetrics(w, perGrant)
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: metricsHeaderTimeout,
		ReadTimeout:       metricsRequestTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    metricsMaxHeader,
		ErrorLog:          log.New(b.log, "metrics listener: ", 0),
	}
	// Scrapes go on while Shutdown drains the calls; b.ctx ends after.
	defer context.AfterFunc(b.ctx, func() { srv.Close() })()
	if err := srv.Serve(netlimit.New(l, maxMetricsConns, &b.metricsOpen)); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bridge: serving metrics: %w", err)
	}
	return nil
}
