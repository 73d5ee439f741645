package unixsock

import "golang.org/x/sys/unix"

// peerCred reads LOCAL_PEERCRED (uid and the first group) and
// LOCAL_PEERPID, the BSD counterparts of SO_PEERCRED (unix(4)).
func peerCred(fd int) (PeerCred, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return PeerCred{}, err
	}
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return PeerCred{}, err
	}
	c := PeerCred{PID: int32(pid), UID: x.Uid}
	if x.Ngroups > 0 {
		c.GID = x.Groups[0]
	}
	return c, nil
}
