package bridge

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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

// limitListener accepts at most n connections at once: Accept waits
// while n are open, leaving further ones in the kernel's backlog.
type limitListener struct {
	net.Listener
	slots chan struct{}
	open  *atomic.Int64
	done  chan struct{} // closed by Close: a waiting Accept returns
	once  sync.Once
}

func newLimitListener(l net.Listener, n int, open *atomic.Int64) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), open: open, done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Add(1)
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed, once.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
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

// ReserveDescriptors makes room for descriptorsNeeded: it raises the
// soft RLIMIT_NOFILE as far as the hard limit allows, and says, as an
// error the caller logs, when even that is short: then a flood of
// connections within the budgets could leave the call and control
// sockets unable to accept, and the fix is a higher hard limit (systemd's
// LimitNOFILE) or lower budgets.
func (b *Bridge) ReserveDescriptors() error {
	need := b.descriptorsNeeded()
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
