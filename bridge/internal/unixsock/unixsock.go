// Package unixsock creates the Unix sockets capbridge listens on, with
// their final mode and group before anyone can connect, on a path whose
// every directory only we (or root) could change; it never steals a live
// socket, clears a stale one, removes its own on close, and reads the
// kernel's record of who connected.
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means a live process answers on a socket path we were asked
// to serve: another capbridge, most likely. We never steal it.
var ErrInUse = errors.New("unixsock: socket path is in use by a live process")

// Listen creates a Unix socket at path with exactly mode (and group
// gid, unless gid < 0) before anyone can connect to it.
//
// The socket is bound under a temporary name in the same directory,
// given its mode and group, and only then renamed into place, so there is
// no moment at which it exists at path with the umask's permissions. An
// existing file at path is removed only if it is a socket nobody answers
// on (a stale one from a crashed run); a live socket is ErrInUse and
// any other kind of file is refused. The parent directory is created if
// missing, 0700, or searchable by the group or by others (0710, 0711) when
// mode lets them connect: a socket is reached through its directory, and
// search alone lists nothing and changes nothing. An existing directory of
// ours that mode's users could not search gets that search bit, and only
// that (a harness that jails programs under another uid and sets
// call_socket_mode "0666" with allowed_uids needs nothing more). The probe-then-replace has a window in which a second
// capbridge starting at the same instant could race us; a single owner
// per path is the operator's contract.
//
// The returned listener removes path when closed.
func Listen(path string, mode os.FileMode, gid int) (*Listener, error) {
	if err := CheckPathLen(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	search := SearchBits(mode)
	if err := os.MkdirAll(dir, 0o700|search); err != nil {
		return nil, fmt.Errorf("unixsock: creating socket directory: %w", err)
	}
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&search != search {
		if err := os.Chmod(dir, fi.Mode().Perm()|search); err != nil {
			return nil, fmt.Errorf("unixsock: letting the socket's users search %s: %w", dir, err)
		}
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	_ = os.Remove(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("unixsock: listening on %s: %w", path, err)
	}
	// We remove the file ourselves: after the rename, the name the
	// listener would unlink is not the one the socket has.
	l.SetUnlinkOnClose(false)
	fail := func(err error) (*Listener, error) {
		l.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(fmt.Errorf("unixsock: setting socket mode: %w", err))
	}
	if gid >= 0 {
		if err := os.Lchown(tmp, -1, gid); err != nil {
			return fail(fmt.Errorf("unixsock: setting socket group: %w", err))
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("unixsock: moving socket into place: %w", err))
	}
	return &Listener{UnixListener: l, path: path}, nil
}

// SearchBits are the search (execute) bits a socket's directory needs so
// that whoever mode lets connect can reach the socket: group search when
// the group may write it, others' when others may.
func SearchBits(mode os.FileMode) os.FileMode {
	var bits os.FileMode
	if mode&0o020 != 0 {
		bits |= 0o010
	}
	if mode&0o002 != 0 {
		bits |= 0o001
	}
	return bits
}

// CheckPathLen refuses a path too long for a Unix socket address.
func CheckPathLen(path string) error {
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		return fmt.Errorf("unixsock: socket path %q is longer than the %d bytes a Unix socket address holds", path, len(unix.RawSockaddrUnix{}.Path)-1)
	}
	return nil
}

// CheckDir refuses a socket directory that anyone but us (or root,
// whom we trust anyway) could replace. Whoever can write to the socket's
// directory can move our socket aside and put a listener of their own in
// its place, and then read every grant request and every jailed
// program's token; whoever can write to any directory above it can move
// the whole directory aside and create their own. The default path,
// /tmp/capbridge-$UID, is predictable, so another user could also create
// it first.
//
// So the socket directory must be a real directory (not a symlink), ours
// or root's, writable by nobody else; and every directory above it, on
// the path as given and on the path its symlinks resolve to, must be ours
// or root's and writable by nobody else, unless it is sticky. A sticky
// directory (/tmp) lets others create entries but not rename or remove
// ours, and the entry below it on our path is itself held to these rules,
// so it cannot be swapped either. A symlink on the path must be ours or
// root's: its owner could point it elsewhere.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("unixsock: socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("unixsock: socket directory %s is not a directory (%s)", dir, fi.Mode().Type())
	}
	uid, err := ownerOf(dir, fi)
	if err != nil {
		return err
	}
	switch {
	case !trustedOwner(uid):
		return fmt.Errorf("unixsock: socket directory %s belongs to uid %d, not to us (uid %d); another user could replace the sockets: remove it or choose another path", dir, uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("unixsock: socket directory %s has mode %04o: others could replace the sockets; chmod go-w %s", dir, fi.Mode().Perm(), dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("unixsock: socket directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("unixsock: socket directory %s: %w", dir, err)
	}
	seen := map[string]bool{}
	for _, path := range []string{abs, real} {
		for p := filepath.Dir(path); !seen[p]; p = filepath.Dir(p) {
			seen[p] = true
			if err := checkAncestor(dir, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAncestor checks one directory (or symlink) above the socket
// directory dir, as CheckDir describes.
func checkAncestor(dir, p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("unixsock: socket directory %s: checking %s: %w", dir, p, err)
	}
	uid, err := ownerOf(p, fi)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	switch {
	case !trustedOwner(uid):
		return fmt.Errorf("unixsock: socket directory %s is under %s, which belongs to uid %d: that user could move the socket directory aside and put their own in its place; choose a socket path whose every directory belongs to root or to uid %d", dir, p, uid, os.Geteuid())
	case mode.Type() == fs.ModeSymlink:
		return nil // its target is checked on the resolved path
	case !mode.IsDir():
		return fmt.Errorf("unixsock: socket directory %s: %s is not a directory (%s)", dir, p, mode.Type())
	case mode.Perm()&0o022 != 0 && mode&fs.ModeSticky == 0:
		return fmt.Errorf("unixsock: socket directory %s is under %s (mode %04o), which others may write to: they could move the socket directory aside and put their own in its place; chmod go-w %s (or chmod +t, as /tmp is), or choose another path", dir, p, mode.Perm(), p)
	}
	return nil
}

// ownerOf returns the owner of the file at p that fi describes.
func ownerOf(p string, fi fs.FileInfo) (uint32, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("unixsock: %s: cannot read its owner", p)
	}
	return st.Uid, nil
}

// trustedOwner reports whether a file owned by uid may stand on the
// path to our sockets: ours, or root's.
func trustedOwner(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// clearStale removes a socket file at path that nobody answers on.
func clearStale(path string) error {
	stale, err := Stale(path)
	if err != nil || !stale {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unixsock: removing stale socket: %w", err)
	}
	return nil
}

// Stale reports whether path holds a socket nobody answers on. It
// is false, with no error, when nothing is there; an error when a live
// process answers (ErrInUse), when something other than a socket
// is there, or when it cannot tell.
func Stale(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("unixsock: checking socket path: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return false, fmt.Errorf("unixsock: %s exists and is not a socket (%s); refusing to replace it", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false, fmt.Errorf("%w: %s", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		// Anything else (a timeout: someone is there but slow; EACCES:
		// someone else's socket) is not evidence that it is stale.
		return false, fmt.Errorf("unixsock: %s: cannot tell whether the socket is stale: %w", path, err)
	}
	// ENOENT: it went away between Lstat and the dial; nothing to remove.
	return !errors.Is(err, fs.ErrNotExist), nil
}

// Listener is a Unix socket listener that removes its socket file on
// Close.
type Listener struct {
	*net.UnixListener
	path string
}

// Close stops listening and removes the socket file, unless something
// else has since been put at its path.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	// Once we have closed, nobody answers at path and clearStale removes
	// the file; if an operator has since put a live socket (or anything
	// else) there, it is left alone.
	_ = clearStale(l.path)
	return err
}

// ErrUnreachable means a uid the operator allowed cannot reach the socket:
// a directory on its path does not let it search, or the socket's mode
// does not let it write (connect).
var ErrUnreachable = errors.New("unixsock: an allowed user cannot reach the socket")

// Reachable reports whether uid could connect to a socket Listen makes at
// path with mode and group gid (-1: ours): every existing directory on
// the path must let uid search it (a missing one Listen creates with
// SearchBits(mode)), and mode must let uid write. Root passes everything.
func Reachable(path string, mode os.FileMode, gid int, uid uint32) error {
	if uid == 0 {
		return nil
	}
	groups := map[uint32]bool{}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, g := range ids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					groups[uint32(n)] = true
				}
			}
		}
	}
	// may reports whether uid holds the permission bit perm (4, 2 or 1)
	// on a file with this owner, group and mode.
	may := func(owner, group uint32, m os.FileMode, perm os.FileMode) bool {
		switch {
		case owner == uid:
			return m&(perm<<6) != 0
		case groups[group]:
			return m&(perm<<3) != 0
		}
		return m&perm != 0
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if ok && !may(st.Uid, st.Gid, fi.Mode().Perm(), 1) {
				return fmt.Errorf("%w: uid %d may not search %s (mode %04o, owner %d); chmod o+x %s, or choose a socket path it can reach",
					ErrUnreachable, uid, d, fi.Mode().Perm(), st.Uid, d)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		} else if SearchBits(mode)&0o001 == 0 && !groups[uint32(sockGroup(gid))] {
			return fmt.Errorf("%w: uid %d could not search %s, which would be created 0700; let it connect through call_socket_mode", ErrUnreachable, uid, d)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if !may(uint32(os.Geteuid()), uint32(sockGroup(gid)), mode, 2) {
		return fmt.Errorf("%w: call_socket_mode %04o does not let uid %d connect; use \"0666\" with allowed_uids, or \"0660\" with a call_socket_group it is in", ErrUnreachable, mode, uid)
	}
	return nil
}

func sockGroup(gid int) int {
	if gid < 0 {
		return os.Getegid()
	}
	return gid
}
