package codemode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/mcpserver"
	"github.com/capbridge/capbridge/internal/testkit/need"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// lockedBuffer is an audit sink the bridge writes while the test reads.
type lockedBuffer struct{ syncbuf.Buffer }

// lines are the audit lines whose event is ev, decoded.
func (l *lockedBuffer) lines(ev string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == ev {
			out = append(out, m)
		}
	}
	return out
}

// eventually waits for cond, polling; the limit is a backstop for a
// broken run, never the expected path.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(bridgetest.Backstop)
	defer limit.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-limit.C:
			t.Fatalf("after %v: still waiting for %s", bridgetest.Backstop, what)
		}
	}
}

// Cancelling a run's context (what notifications/cancelled does) kills its
// jail: the program blocked in a call and the daemon it left in a session
// of its own are gone from the host's process table when Run returns, the
// grant is revoked, and the run's audit line says it was cancelled.
func TestRunCancelled(t *testing.T) {
	defer leakcheck.Check(t)()
	var audit lockedBuffer
	r, srv := newRunner(t, nil, bridgetest.WithOptions(func(o *bridge.Options) { o.Audit = zerolog.New(&audit) }))
	defer srv.Close()
	if !slices.Contains(r.Languages(), Python) {
		need.Missing(t, "python3", "the README names Python >= 3.10", errors.New("the runner offers no Python"))
	}
	marker := fmt.Sprintf("%d.%d", 100000+os.Getpid()%100000, time.Now().UnixNano()%1e6)
	code := `import os, t
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sleep", ["sleep", "` + marker + `"])
await t.hang()
`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(ctx, Request{Language: Python, Code: code, Timeout: 5 * time.Minute})
		done <- ran{res, err}
	}()
	cc := srv.Control()
	var pids []int
	eventually(t, "the program's call in flight at the server and its daemon running", func() bool {
		st, err := cc.Status(ctx)
		select {
		case g := <-done:
			t.Fatalf("ended early: %+v %v", g.res, g.err)
		default:
		}
		if err != nil || len(st.Servers) != 1 || st.Servers[0].Inflight != 1 || st.Grants != 1 {
			return false
		}
		pids = leakcheck.Named(marker)
		return len(pids) == 1
	})
	cancel()
	var got ran
	select {
	case got = <-done:
	case <-time.After(bridgetest.Backstop):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	// Its one call may still be retiring at the bridge when the grant is
	// revoked, and revoke counts retired calls: 0 or 1.
	if got.res.Ended != "cancelled" || got.res.Calls > 1 {
		t.Errorf("result %+v, want ended cancelled, at most 1 call", got.res)
	}
	// No waiting: the jail's init has been reaped, and the kernel empties
	// a PID namespace before its init's exit is reported.
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the run's daemon (pid %d) survived the cancellation: kill(pid, 0) = %v", pid, err)
		}
	}
	if left := leakcheck.Named(marker); len(left) != 0 {
		t.Errorf("processes of the run left: %v", left)
	}
	st, err := cc.Status(context.Background())
	// The bridge's own server is the one descendant this process keeps.
	for _, kid := range leakcheck.Children() {
		if !strings.HasPrefix(kid, fmt.Sprintf("pid %d ", st.Servers[0].PID)) {
			t.Errorf("a process of the run alive after it: %s", kid)
		}
	}
	if err != nil || st.Grants != 0 {
		t.Errorf("status after the run: %d grants (%v), want 0: the run's grant revoked", st.Grants, err)
	}
	runs := audit.lines("run")
	if len(runs) != 1 || runs[0]["run"] != got.res.Run || runs[0]["ended"] != "cancelled" || runs[0]["calls"] != float64(got.res.Calls) {
		t.Errorf("run audit lines %v, want one for %s, ended cancelled, %d calls", runs, got.res.Run, got.res.Calls)
	}
}

// A run's returned value reaches the host only as JSON in UTF-8: a
// program that writes other bytes to its result channel has its value
// left out, and the reply is UTF-8. json.Valid let "\xff" through, raw,
// into the reply's structured content.
func TestRunReplyIsUTF8WhateverTheResultChannelHolds(t *testing.T) {
	defer leakcheck.Check(t)()
	r, srv := newRunner(t, nil)
	defer srv.Close()
	if !slices.Contains(r.Languages(), Python) {
		need.Missing(t, "python3", "the README names Python >= 3.10", errors.New("the runner offers no Python"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a backstop
	defer cancel()
	tools, err := r.Tools(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &mcpserver.Server{Name: "capbridge", Version: "t", Tools: tools}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, inR, outW); outW.Close() }()
	code, _ := json.Marshal("import os\nos.write(4, b'\"\\xff\"')\nos._exit(0)\n")
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run","arguments":{"language":"python","code":`+string(code)+`}}}`+"\n")
	line, err := bufio.NewReaderSize(outR, 1<<20).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	<-served
	if !utf8.Valid(line) || !strings.Contains(string(line), "was not valid JSON (UTF-8)") {
		t.Fatalf("the reply: %q", line)
	}
}
