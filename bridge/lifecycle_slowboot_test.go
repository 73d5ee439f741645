package bridge

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// A server whose boot blocks does not hold up another server's calls
// when the bridge starts behind open sockets (Start, not Boot): the slow
// one's command is a shell that waits on a FIFO the test controls before
// it execs the mcptest server, so it stays starting exactly until the
// test writes the FIFO. Meanwhile a call to the other server succeeds;
// once released, the slow one becomes ready and answers too.
func TestSlowBootDoesNotDelayOthers(t *testing.T) {
	defer leakcheck.Check(t)()
	dir, err := os.MkdirTemp("", "cb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fifo := filepath.Join(dir, "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	slow := mcptestServer("slow", mcptest.Scenario{})
	slow.Args = append([]string{"-c", `read go < "$0" && exec "$@"`, fifo, slow.Command}, slow.Args...)
	slow.Command = "/bin/sh"
	// Its boot must not time out while the test holds it: only the
	// backstops below bound the wait.
	slow.StartupTimeout = 2 * backstop
	fast := mcptestServer("fast", mcptest.Scenario{})

	cfg := config.Defaults()
	cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
	cfg.Bridge.ShutdownGrace = 2 * time.Second
	cfg.Bridge.WriteTimeout = time.Minute
	cfg.Servers = []config.Server{slow, fast}
	tb := &testBridge{Bridge: New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()}), t: t, dir: dir, served: make(chan struct{})}
	tb.Start()
	if err := tb.Listen(); err != nil {
		_ = tb.Shutdown(0)
		t.Fatal(err)
	}
	go func() { tb.Serve(); close(tb.served) }()
	t.Cleanup(tb.shutdown)

	c := tb.dial(tb.grant(map[string][]string{"slow": nil, "fast": nil}))
	eventually(t, "fast ready", func() bool { return State(tb.srv("fast").status().State) == StateReady })
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	r, err := c.Call(ctx, "fast", "echo", map[string]any{"text": "first"})
	if err != nil || r.Text() != "first" {
		t.Fatalf("fast while slow boots: %+v, %v", r, err)
	}
	// The shell cannot get past its read until the FIFO is written, so
	// slow is still starting here whatever the machine's speed.
	if st := tb.srv("slow").status(); State(st.State) != StateStarting {
		t.Fatalf("slow after fast's call: %+v, want starting", st)
	}

	// Opening for writing blocks until the shell has opened for reading:
	// an event, bounded by the backstop in case the shell never does.
	opened := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("go\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(backstop):
		// Unblock the open so the goroutine ends before leakcheck.
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
		<-opened
		t.Fatalf("the slow server's shell never opened %s", fifo)
	}
	eventually(t, "slow ready after release", func() bool { return State(tb.srv("slow").status().State) == StateReady })
	r, err = c.Call(ctx, "slow", "echo", map[string]any{"text": "late"})
	if err != nil || r.Text() != "late" {
		t.Fatalf("slow after release: %+v, %v", r, err)
	}
	c.Close()
	tb.shutdown()
}
