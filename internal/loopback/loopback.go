// Package loopback decides whether a host names this machine's loopback,
// the one test that every "plain http only to the loopback" and "no token
// needed on the loopback" rule rests on.
package loopback

import (
	"net"
	"net/netip"
	"strings"
)

// Host reports whether host, as url.URL.Hostname and net.SplitHostPort
// give it (no port, no brackets), names the loopback: "localhost" in any
// case, which RFC 6761 reserves for it, or a loopback address, an
// IPv4-mapped one included. Anything else is not, a name that merely
// resolves to a loopback address among them: what it resolves to can
// change, and a rule that trusts the loopback must not move with it.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// HostPort is Host for a Host header's value: host, host:port, [v6] or
// [v6]:port.
func HostPort(hostport string) bool {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return Host(h)
	}
	if h, ok := strings.CutPrefix(hostport, "["); ok {
		if h, ok = strings.CutSuffix(h, "]"); ok {
			return Host(h)
		}
		return false
	}
	return Host(hostport)
}
