package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/bridge/internal/unixsock"
)

// ErrSocketInUse means a live process answers on a socket path we were
// asked to serve: another capbridge, most likely. We never steal it.
var ErrSocketInUse = unixsock.ErrInUse

// ErrSocketUnreachable means a uid in allowed_uids could not connect to
// the call socket (a directory it may not search, a mode it may not
// write).
var ErrSocketUnreachable = unixsock.ErrUnreachable

// PeerCred is the identity the kernel recorded for the process at the
// other end of a Unix connection when it connected.
type PeerCred = unixsock.PeerCred

// SocketCheck is what Preflight found at one socket path.
type SocketCheck struct {
	Key  string // "call_socket" or "control_socket"
	Path string
	// CreateDir: the directory does not exist, and Listen would create
	// it (mode 0700).
	CreateDir bool
	// Stale: a socket nobody answers on is at Path, left by a capbridge
	// that did not stop cleanly; Listen would replace it.
	Stale bool
	// Err says why Listen would fail at this path; nil when it would not.
	Err error
}

// Preflight makes the checks Listen makes before it binds: each path's
// length, its directory's owner and mode (or, when the directory is
// missing, whether it could be created), what is already at the path, and
// call_socket_group. It creates, removes and binds nothing, so it may run
// beside a live capbridge; a socket some process answers on is
// ErrSocketInUse, as Listen would find it.
func (b *Bridge) Preflight() []SocketCheck {
	call := preflightSocket("call_socket", b.cfg.Bridge.CallSocket)
	gid := -1
	if g := b.cfg.Bridge.CallSocketGroup; g != "" && call.Err == nil {
		gid, call.Err = lookupGroup(g)
	}
	// A harness that jails programs under another uid must reach the
	// socket from that uid's point of view, not ours.
	for _, uid := range b.cfg.Bridge.AllowedUIDs {
		if call.Err == nil && int(uid) != os.Geteuid() {
			call.Err = unixsock.Reachable(b.cfg.Bridge.CallSocket, b.cfg.Bridge.CallSocketMode, gid, uid)
		}
	}
	return []SocketCheck{call, preflightSocket("control_socket", b.cfg.Bridge.ControlSocket)}
}

func preflightSocket(key, path string) SocketCheck {
	c := SocketCheck{Key: key, Path: path}
	if c.Err = unixsock.CheckPathLen(path); c.Err != nil {
		return c
	}
	dir := filepath.Dir(path)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		c.CreateDir = true
		c.Err = checkCreatable(dir)
		return c
	}
	if c.Err = unixsock.CheckDir(dir); c.Err != nil {
		return c
	}
	// CheckDir accepts a root-owned directory, which we may not be
	// able to write: then binding would fail.
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		c.Err = fmt.Errorf("bridge: socket directory %s: cannot create a socket in it: %w", dir, err)
		return c
	}
	c.Stale, c.Err = unixsock.Stale(path)
	return c
}

// checkCreatable reports whether os.MkdirAll could create dir: its
// nearest existing ancestor must be a directory we may write to.
func checkCreatable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && d != filepath.Dir(d) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bridge: cannot create socket directory %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("bridge: cannot create socket directory %s: %s is not a directory", dir, d)
		}
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			return fmt.Errorf("bridge: cannot create socket directory %s: %s: %w", dir, d, err)
		}
		return nil
	}
}
