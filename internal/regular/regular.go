// Package regular reads files named in a configuration: regular files
// only, bounded, and never waited on.
package regular

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadFile reads the regular file at path, of at most max bytes. It
// opens without waiting, so that a FIFO no one writes or a device named
// by mistake is refused at once instead of holding whatever reads it (a
// boot, and everything waiting for that) for ever; a file larger than
// max (a log named by mistake) is refused rather than read whole.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s holds more than %d bytes", path, max)
	}
	return b, err
}
