package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// The progress lines serve writes on a terminal follow each server's
// boot: starting, then ready with its tools, or failed with the reason.
// A real bridge boots a server that fails (/bin/true exits before the
// handshake) and reports through the hook as serve wires it; then each
// state's line is checked as the hook formats it.
func TestProgressLines(t *testing.T) {
	var out syncbuf.Buffer
	bad := config.NewServer("broken", "/bin/true")
	bad.Restart = config.RestartNever
	srv := bridgetest.NewServer(t, bridgetest.WithServers(bad), bridgetest.AllowFailedBoot(),
		bridgetest.WithOptions(func(o *bridge.Options) { o.Progress = progressLines(&out) }))
	if o := srv.Outcomes; len(o) != 1 || o[0].State != bridge.StateFailed {
		t.Fatalf("outcomes %+v, want broken failed", o)
	}
	srv.Close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || lines[0] != "capbridge: broken: starting" || !strings.HasPrefix(lines[1], "capbridge: broken: failed: ") {
		t.Fatalf("progress lines:\n%s\nwant starting, then failed with the reason", out.String())
	}

	// Each state's line, as the hook formats it.
	var one bytes.Buffer
	hook := progressLines(&one)
	hook(bridge.Progress{Server: "s", State: bridge.StateReady, Tools: 6})
	hook(bridge.Progress{Server: "s", State: bridge.StateBackoff, Reason: "died", Backoff: 2 * time.Second})
	hook(bridge.Progress{Server: "s", State: bridge.StateDead, Reason: "exit status 1"})
	want := "capbridge: s: ready, 6 tools\ncapbridge: s: backoff (died), next attempt in 2s\ncapbridge: s: dead: exit status 1\n"
	if one.String() != want {
		t.Errorf("lines:\n%s\nwant:\n%s", one.String(), want)
	}
}
