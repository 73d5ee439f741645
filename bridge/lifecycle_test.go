package bridge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// bareBridge is a bridge with no servers and no sockets: enough for the
// shutdown sequence's own logic, on synctest's clock.
func bareBridge() *Bridge {
	return New(Options{Config: config.Defaults(), Log: zerolog.Nop(), Audit: zerolog.Nop()})
}

// Shutdown gives the calls in flight exactly the grace period: not
// returning a moment before it ends while a call runs, and returning as
// soon as it does.
func TestShutdownWaitsOutGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 10 * time.Second
		b := bareBridge()
		if !b.flight.Admit() {
			t.Fatal("a call was refused before the shutdown")
		}
		done := make(chan error, 1)
		go func() { done <- b.Shutdown(grace) }()
		time.Sleep(grace - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned (%v) before the grace period ended, with a call in flight", err)
		default:
		}
		if b.flight.Admit() {
			t.Fatal("a call was admitted during the grace period")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Shutdown still waits after the grace period")
		}
		if cause := context.Cause(b.ctx); !errors.Is(cause, errShuttingDown) {
			t.Errorf("the bridge's context ended with %v, want errShuttingDown", cause)
		}
		b.flight.Retire()
	})
}

// The last call to retire ends the grace period at once: Shutdown waits
// on the signal, not on its timer.
func TestShutdownEndsWithLastCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := bareBridge()
		for range 3 {
			if !b.flight.Admit() {
				t.Fatal("a call was refused before the shutdown")
			}
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- b.Shutdown(time.Hour) }()
		synctest.Wait()
		for i := range 3 {
			select {
			case <-done:
				t.Fatalf("Shutdown returned with %d calls in flight", 3-i)
			default:
			}
			b.flight.Retire()
			synctest.Wait()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Shutdown still waits after the last call retired")
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("Shutdown took %v of the clock, want none: it waited for its timer", took)
		}
	})
}

// Listen then Shutdown, with no Serve between them (serve does this when
// it is interrupted after opening the sockets), returns at once, removes
// the sockets, and a Serve that comes late returns at once too.
func TestShutdownWithoutServe(t *testing.T) {
	defer leakcheck.Check(t)()
	dir, err := os.MkdirTemp("", "cb")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := config.Defaults()
	cfg.Bridge.CallSocket = filepath.Join(dir, "call.sock")
	cfg.Bridge.ControlSocket = filepath.Join(dir, "control.sock")
	b := New(Options{Config: cfg, Log: zerolog.Nop(), Audit: zerolog.Nop()})
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	returns := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(backstop):
			t.Fatalf("%s did not return", what)
		}
	}
	returns("Shutdown without Serve", func() {
		if err := b.Shutdown(time.Hour); err != nil {
			t.Error(err)
		}
	})
	for _, p := range []string{cfg.Bridge.CallSocket, cfg.Bridge.ControlSocket} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Shutdown: %v, want it removed", p, err)
		}
	}
	returns("Serve after Shutdown", b.Serve)
}

// A call that arrives once the shutdown has begun is refused
// shutting_down, whichever socket it came from, and never counted.
func TestCallAfterDrainIsRefused(t *testing.T) {
	b := bareBridge()
	b.flight.Drain()
	o := b.call(b.ctx, callRequest{server: "t", tool: "echo"})
	if o.denial == nil || o.denial.Code != capwire.CodeShuttingDown {
		t.Fatalf("outcome %+v, want shutting_down", o)
	}
	if b.flight.InFlight() != 0 {
		t.Errorf("%d calls counted after a refusal, want 0", b.flight.InFlight())
	}
}
