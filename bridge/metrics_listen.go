package bridge

import (
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/internal/unixsock"
)

// The metrics listener's bounds. Loopback TCP checks no uid, so any
// local process can connect: without a cap, two of them holding 10 000
// keep-alive connections each took capbridge to its descriptor limit,
// after which neither the call socket nor the control socket accepted.
// Now at most maxMetricsConns connections are open (the others wait in
// the kernel's backlog, costing capbridge nothing), each must send its
// header within metricsHeaderTimeout, and an idle one is closed after
// metricsIdleTimeout; a scraper reconnects each time, which costs it
// nothing that matters. The port can be kept busy by whoever holds those
// connections, which costs scrapes, never calls.
const (
	maxMetricsConns       = 32
	metricsHeaderTimeout  = 2 * time.Second
	metricsRequestTimeout = 5 * time.Second
	metricsWriteTimeout   = 10 * time.Second
	metricsIdleTimeout    = 5 * time.Second
	metricsMaxHeader      = 8 << 10
)

// ListenMetrics opens metrics_listen: a loopback TCP port, or a Unix
// socket (mode 0600, in a directory that passes the sockets' checks,
// removed when the listener is closed). It returns the listener for
// ServeMetrics and the address to show.
func (b *Bridge) ListenMetrics() (net.Listener, string, error) {
	addr := b.cfg.Bridge.MetricsListen
	if path, ok := strings.CutPrefix(addr, config.MetricsUnixPrefix); ok {
		l, err := unixsock.Listen(path, 0o600, -1)
		if err != nil {
			return nil, "", err
		}
		return l, addr, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	return l, l.Addr().String(), nil
}

// descriptorsNeeded is how many descriptors the bridge's own budgets let
// it hold at once: every connection the call socket, the control socket
// and the metrics listener admit, the listeners, about six per server
// (its pipes, its pidfd, a cgroup's files), and a reserve for the files
// a moment needs (a config, the audit file being reopened, a library's
// own).
func (b *Bridge) descriptorsNeeded() uint64 {
	const perServer, reserve = 6, 64
	c := b.cfg.Bridge
	return uint64(c.MaxConnections+c.MaxUnauthConnections+maxControlConns+maxMetricsConns+perServer*len(b.serverList())) + reserve
}

// ReserveDescriptors makes room for descriptorsNeeded and extra, what
// the caller's own listeners may hold beside the bridge's (capbridge
// mcp's HTTP front): it raises the soft RLIMIT_NOFILE as far as the hard
// limit allows, and says, as an
// error the caller logs, when even that is short: then a flood of
// connections within the budgets could leave the call and control
// sockets unable to accept, and the fix is a higher hard limit (systemd's
// LimitNOFILE) or lower budgets.
func (b *Bridge) ReserveDescriptors(extra int) error {
	need := b.descriptorsNeeded() + uint64(max(extra, 0))
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("bridge: reading RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	lim.Cur = min(need, lim.Max)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("bridge: raising RLIMIT_NOFILE to %d: %w", lim.Cur, err)
	}
	if lim.Cur < need {
		return fmt.Errorf("bridge: the descriptor limit (RLIMIT_NOFILE %d) is below the %d the configured budgets may hold (max_connections, max_unauth_connections, the control and metrics sockets, the servers); raise it (systemd: LimitNOFILE=%d) or lower max_connections", lim.Cur, need, need)
	}
	return nil
}
