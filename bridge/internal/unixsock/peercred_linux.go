package unixsock

import "golang.org/x/sys/unix"

// peerCred reads SO_PEERCRED: the pid, uid and gid of the peer when it
// connected (socket(7)).
func peerCred(fd int) (PeerCred, error) {
	c, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return PeerCred{}, err
	}
	return PeerCred{PID: c.Pid, UID: c.Uid, GID: c.Gid}, nil
}
