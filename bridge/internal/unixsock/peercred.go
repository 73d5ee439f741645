package unixsock

import (
	"fmt"
	"net"
)

// PeerCred is the identity the kernel recorded for the process at the
// other end of a Unix connection when it connected.
type PeerCred struct {
	PID int32
	UID uint32
	GID uint32
}

// ReadPeerCred reads the peer's credentials from a Unix connection.
func ReadPeerCred(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var cred PeerCred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = peerCred(int(fd)) }); err != nil {
		return PeerCred{}, err
	}
	if credErr != nil {
		return PeerCred{}, fmt.Errorf("unixsock: reading the peer's credentials: %w", credErr)
	}
	return cred, nil
}
