package main

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/internal/mcpserver"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
)

// --listen on the loopback without a token is allowed, and warns: on a
// machine shared with other users each of them could reach the port.
// With a token it does not warn; off the loopback a token is required.
func TestMCPListenWarnsWithoutToken(t *testing.T) {
	defer leakcheck.Check(t)()
	t.Setenv("CAPBRIDGE_MCP_TOKEN", "")
	if _, err := newHTTPFront("0.0.0.0:0", "", ""); err == nil || !strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("off the loopback without a token: %v", err)
	}
	for _, token := range []string{"", "s3cret"} {
		t.Setenv("CAPBRIDGE_MCP_TOKEN", token)
		web, err := newHTTPFront("127.0.0.1:0", "", "")
		if err != nil {
			t.Fatal(err)
		}
		var logs syncbuf.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // serve says what it serves, then stops at once
		web.serve(ctx, &mcpserver.Server{Name: "t", Version: "1"}, zerolog.New(&logs))
		web.ln.Close()
		if warned := strings.Contains(logs.String(), "no bearer token"); warned != (token == "") {
			t.Errorf("token %q: the log:\n%s", token, logs.String())
		}
	}
}
