package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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
	t.Setenv("CAPBRIDGE_MCP_TOKEN", "s3cret")
	if _, err := newHTTPFront("127.0.0.1:0", "", ""); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("a 6-byte token: %v", err)
	}
	for _, token := range []string{"", "s3cret-0123456789abcdef"} {
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

// The front holds at most maxFrontConns connections open, however many
// clients connect and wait: the rest stay in the kernel's backlog, and
// are taken as others close. Every connection the server starts on is
// counted by the limit, which finds the count within the bound.
func TestMCPListenBoundsConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	t.Setenv("CAPBRIDGE_MCP_TOKEN", "")
	web, err := newHTTPFront("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	const clients = maxFrontConns + 32
	started, closed := make(chan int64, clients), make(chan struct{}, clients)
	web.connState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			started <- web.open.Load()
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	go func() { served <- web.serve(ctx, &mcpserver.Server{Name: "t", Version: "1"}, zerolog.Nop()) }()
	var held []net.Conn
	for range clients {
		c, err := net.Dial("tcp", web.ln.Addr().String()) // sends nothing: a slow client
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	backstop := time.After(time.Minute)
	seen := 0
	next := func() {
		select {
		case open := <-started:
			// At least itself: the limit counts it.
			if seen++; open < 1 || open > maxFrontConns {
				t.Fatalf("a connection started with %d open through the limit, want 1 to %d", open, maxFrontConns)
			}
		case <-backstop:
			t.Fatalf("%d connections started in a minute", seen)
		}
	}
	for seen < maxFrontConns {
		next()
	}
	// As the clients go, the ones waiting are taken, each within the bound.
	for _, c := range held {
		c.Close()
	}
	for seen < clients {
		next()
	}
	for range clients {
		select {
		case <-closed:
		case <-backstop:
			t.Fatal("connections still open a minute after their clients went")
		}
	}
	cancel()
	<-served
	web.ln.Close()
}

// A loopback name that resolved off the loopback (an edited /etc/hosts)
// is refused: its listener would take requests others send, without the
// token the address would need.
func TestMCPListenBoundAsNamed(t *testing.T) {
	for _, c := range []struct {
		addr  string
		local bool
		bound net.Addr
		ok    bool
	}{
		{"localhost:8080", true, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, true},
		{"localhost:8080", true, &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, true},
		{"localhost:8080", true, &net.TCPAddr{IP: net.IPv4(192, 168, 1, 20), Port: 8080}, false},
		{"0.0.0.0:8080", false, &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, true},
	} {
		err := boundAsNamed(c.addr, c.local, c.bound)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "not on the loopback")) {
			t.Errorf("%s bound %s: %v", c.addr, c.bound, err)
		}
	}
}
