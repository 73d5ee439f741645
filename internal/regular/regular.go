// Package regular reads files named in a configuration: regular files
// only, bounded, and never waited on.
package regular

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ReadFile reads the regular file at path, of at most max bytes (Open);
// a file larger than max (a log named by mistake) is refused rather than
// read whole.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("it holds more than %d bytes", max)}
	}
	return b, err
}

// Open opens the regular file at path for reading. It opens without
// waiting, so that a FIFO no one writes or a device named by mistake is
// refused at once instead of holding whatever reads it (a boot, and
// everything waiting for that) for ever.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("not a regular file but %s", kind(fi.Mode()))}
	}
	return f, nil
}

// kind names what a file that is not regular is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}
