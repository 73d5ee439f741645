// Package unixconn reads and writes a connected Unix socket without the
// wake-ups the runtime's poller adds for room to write.
package unixconn

import (
	"io"
	"time"
)

// Stream is a socket's reading and writing side, as Take returns it. A
// net.Conn is one.
type Stream interface {
	io.ReadWriteCloser
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}
