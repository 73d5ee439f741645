package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/bridge"
	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/testkit/fakeclock"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// While servers boot, doctor says every progressEvery which are still
// starting, how far each got and its last stderr line, and stops saying it
// of a server once it is ready or has failed, and of all once the boot
// ends. The bubble's clock makes the five seconds take none.
func TestDoctorBootProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := &bootEvents{byServer: map[string]*serverEvents{}}
		log := func(fields map[string]any) {
			b, err := json.Marshal(fields)
			if err != nil {
				t.Fatal(err)
			}
			events.Write(b)
		}
		var out syncbuf.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			events.watch(ctx, &out, []string{"memory", "fetch", "quick"}, start)
		}()
		log(map[string]any{"server": "memory", "message": evStarted, "pid": 4242})
		log(map[string]any{"server": "memory", "message": evStderr, "stderr": "npm warn exec The following package was not found and will be installed: @modelcontextprotocol/server-memory@2025.8.4"})
		log(map[string]any{"server": "quick", "message": evReady, "tools": 3})

		fakeclock.Advance(progressEvery - time.Millisecond)
		if got := out.String(); got != "" {
			t.Fatalf("progress before %s: %q", progressEvery, got)
		}
		fakeclock.Advance(time.Millisecond)
		want := `capbridge doctor: memory still starting after 5s: started (pid 4242), waiting for its answer to initialize; its last stderr line: "npm warn exec The following package was not found and will be installed: @modelcontextprotocol/server-memory@2025.8.4"` + "\n" +
			"capbridge doctor: fetch still starting after 5s: starting\n"
		if got := out.String(); got != want {
			t.Fatalf("after 5 s:\n%s\nwant\n%s", got, want)
		}

		// memory initializes and fetch fails: only memory is still
		// starting five seconds later.
		log(map[string]any{"server": "memory", "message": evInitialized})
		log(map[string]any{"server": "fetch", "message": evFailed})
		fakeclock.Advance(progressEvery)
		want += `capbridge doctor: memory still starting after 10s: initialized, listing its tools; its last stderr line: "npm warn exec The following package was not found and will be installed: @modelcontextprotocol/server-memory@2025.8.4"` + "\n"
		if got := out.String(); got != want {
			t.Fatalf("after 10 s:\n%s\nwant\n%s", got, want)
		}

		// A long stderr line is clipped; a ready server is not named.
		log(map[string]any{"server": "memory", "message": evStderr, "stderr": strings.Repeat("x", 10*maxProgressStderr)})
		fakeclock.Advance(progressEvery)
		last := out.String()[len(want):]
		if len(last) > 200+maxProgressStderr || !strings.Contains(last, "x…\"") {
			t.Errorf("a long stderr line is quoted as %q", last)
		}
		log(map[string]any{"server": "memory", "message": evReady})
		before := out.String()
		fakeclock.Advance(3 * progressEvery)
		if got := out.String(); got != before {
			t.Errorf("progress after every server's boot ended: %q", got[len(before):])
		}
		cancel()
		<-done
	})
}

// doctor writes progress through the config's secret redaction: a
// server's stderr line that prints a resolved secret is quoted without
// it.
func TestDoctorBootProgressRedacts(t *testing.T) {
	const secret = "tok-7f3a9c1e55b2"
	cfg := &config.Config{Servers: []config.Server{{Name: "memory", Secrets: map[string]string{"env API_TOKEN": secret}}}}
	synctest.Test(t, func(t *testing.T) {
		events := &bootEvents{byServer: map[string]*serverEvents{}}
		b, _ := json.Marshal(map[string]any{"server": "memory", "message": evStderr, "stderr": "connecting with API_TOKEN=" + secret})
		events.Write(b)
		var out syncbuf.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			events.watch(ctx, bridge.NewSecretWriter(&out, cfg), []string{"memory"}, time.Now())
		}()
		fakeclock.Advance(progressEvery)
		cancel()
		<-done
		if got := out.String(); strings.Contains(got, secret) || !strings.Contains(got, "connecting with API_TOKEN=") {
			t.Errorf("progress line %q: want the stderr line without the secret", got)
		}
	})
}
