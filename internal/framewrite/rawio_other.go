//go:build !linux

package framewrite

import (
	"io"
	"net"
	"syscall"
)

// Pollable returns nil: the raw path is Linux's (see rawio_linux.go).
func Pollable(any) syscall.RawConn { return nil }

// RawReader returns r: the raw path is Linux's (see rawio_linux.go).
func RawReader(r io.Reader) io.Reader { return r }

// RawWriter returns w: the raw path is Linux's (see rawio_linux.go).
func RawWriter(w io.Writer) io.Writer { return w }

func newVecWriter(net.Conn) vecWriter { return nil }
