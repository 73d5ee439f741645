package bridge

import "golang.org/x/sys/unix"

// ioctlFIONREAD asks how many bytes wait to be read on a socket; Linux
// calls it SIOCINQ (socket(7)).
const ioctlFIONREAD = unix.SIOCINQ
