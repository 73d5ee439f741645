package bridge

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// Preflight finds what Listen would find, and changes nothing: a missing
// directory is still missing after it, a stale socket still there.
func TestPreflight(t *testing.T) {
	defer leakcheck.Check(t)()
	root, err := os.MkdirTemp("", "cbp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	mkdir := func(name string, mode os.FileMode) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	ok := mkdir("ok", 0o700)
	open := mkdir("open", 0o777)

	live, err := net.Listen("unix", filepath.Join(ok, "live.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(ok, "stale.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if err := os.WriteFile(filepath.Join(ok, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path      string
		createDir bool
		stale     bool
		err       string // "" for none
	}{
		{filepath.Join(ok, "fresh.sock"), false, false, ""},
		{filepath.Join(root, "missing", "deeper", "c.sock"), true, false, ""},
		{filepath.Join(ok, "stale.sock"), false, true, ""},
		{filepath.Join(ok, "live.sock"), false, false, "in use by a live process"},
		{filepath.Join(ok, "file"), false, false, "is not a socket"},
		{filepath.Join(open, "c.sock"), false, false, "chmod go-w"},
		{filepath.Join(ok, "file", "c.sock"), false, false, "is not a directory"},
		{filepath.Join(ok, "file", "sub", "c.sock"), false, false, "not a directory"},
		{"/" + strings.Repeat("x", 120) + "/c.sock", false, false, "longer than"},
	} {
		cfg := config.Defaults()
		cfg.Bridge.CallSocket, cfg.Bridge.ControlSocket = tc.path, filepath.Join(ok, "control.sock")
		got := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()}).Preflight()
		if len(got) != 2 || got[0].Key != "call_socket" || got[1].Key != "control_socket" || got[1].Err != nil {
			t.Fatalf("%s: Preflight = %+v", tc.path, got)
		}
		c := got[0]
		if c.Path != tc.path || c.CreateDir != tc.createDir || c.Stale != tc.stale ||
			(tc.err == "") != (c.Err == nil) || (c.Err != nil && !strings.Contains(c.Err.Error(), tc.err)) {
			t.Errorf("%s: %+v; want createDir %v, stale %v, error with %q", tc.path, c, tc.createDir, tc.stale, tc.err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Preflight created a directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ok, "stale.sock")); err != nil {
		t.Errorf("Preflight removed the stale socket: %v", err)
	}

	cfg := config.Defaults()
	cfg.Bridge.CallSocket, cfg.Bridge.ControlSocket = filepath.Join(ok, "c.sock"), filepath.Join(ok, "control.sock")
	cfg.Bridge.CallSocketGroup = "no-such-group-capbridge"
	if got := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()}).Preflight(); got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "call_socket_group") {
		t.Errorf("an unknown call_socket_group: %+v", got[0])
	}
}
