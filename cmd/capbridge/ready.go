package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// notify sends state (such as "READY=1") to the service manager's
// notification socket, as sd_notify(3) does, when notifySocket (the
// NOTIFY_SOCKET variable) is set. A name starting with '@' is in the
// abstract namespace. An empty notifySocket is not an error: most
// launchers are not systemd.
func notify(notifySocket, state string) error {
	if notifySocket == "" {
		return nil
	}
	name := notifySocket
	if name[0] == '@' {
		name = "\x00" + name[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	defer c.Close()
	// A datagram write either goes whole or fails; the deadline only
	// guards against a receiver whose queue is full.
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	return nil
}

// replaceUserFile replaces a file the user keeps (a host's config, their
// capbridge.toml) as writeFileAtomic does, but through a symbolic link
// when path is one (a dotfiles manager's), rather than over the link, and
// never with a mode wider than the file it replaces. Not for a file in a
// directory others can write: following a link planted there is what
// writeFileAtomic's rename over it avoids.
func replaceUserFile(path string, data []byte, mode os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("%s is a symbolic link that leads to no file (%v): give the file itself", path, err)
		}
		path = target
	}
	if fi, err := os.Stat(path); err == nil {
		mode &= fi.Mode().Perm()
	}
	return writeFileAtomic(path, data, mode)
}

// writeFileAtomic writes data to path so that a reader sees either no
// file or the whole of it: a temporary file in the same directory,
// synced, then renamed over path.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
