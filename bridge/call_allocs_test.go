//go:build !race

package bridge

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// This file is left out of race builds, whose sync.Pool drops items at
// random; make test runs it again without -race.

// maxCallAllocs is what a 64-byte echo call costs in allocations, the
// capwire client's and the bridge's together: every one is on the path
// of every call, so one added shows here before it shows in a profile.
// The bridge's part is 13: the call with its frame (capserver), its
// capability and operation names, the call's context with its cancel
// function, the context's Done channel, the leader's wake-up registered
// on it (two, and the map the context keeps it in, two), the reply line
// kept out of the read buffer, the MCP result, and the reduced result
// with the message it is sent in.
const maxCallAllocs = 18

// TestCallAllocs counts the allocations of a 64-byte echo call through
// the whole service, one call at a time: the client and the bridge run in
// this process, the server (rawecho) in its own.
func TestCallAllocs(t *testing.T) {
	argv, env := rawecho.Command()
	br, token := benchBridgeOpts(t, Options{Log: zerolog.Nop(), Audit: zerolog.Nop()}, argv, env)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := capwire.Dial(ctx, br.CallSocket(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	args, err := msgpack.Marshal(map[string]string{"text": benchText})
	if err != nil {
		t.Fatal(err)
	}
	call := func() {
		r, err := c.Call(ctx, "t", "echo", msgpack.RawMessage(args))
		if err != nil || len(r.Content) != 1 || r.Content[0].Text != benchText {
			t.Fatalf("call: %+v, %v", r, err)
		}
	}
	for range 100 { // pools filled, stacks grown, the server warm
		call()
	}
	// The fewest of several rounds: a call that finds the connection
	// taken by its idle reader (after a gap of over its grace, as a busy
	// machine may leave between two calls) waits as a follower, which
	// costs more, and that is the machine's doing, not the path's.
	n := math.Inf(1)
	for range 5 {
		n = min(n, testing.AllocsPerRun(200, call))
	}
	if n > maxCallAllocs {
		t.Errorf("a call: %.1f allocations, want at most %d", n, maxCallAllocs)
	} else {
		t.Logf("a call: %.1f allocations", n)
	}
}
