package main

import (
	"context"
	"net"
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
// the process's descriptors stay the bridge's.
func TestMCPListenBoundsConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	t.Setenv("CAPBRIDGE_MCP_TOKEN", "")
	web, err := newHTTPFront("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	go func() { served <- web.serve(ctx, &mcpserver.Server{Name: "t", Version: "1"}, zerolog.Nop()) }()
	var held []net.Conn
	for range maxFrontConns + 32 {
		c, err := net.Dial("tcp", web.ln.Addr().String()) // sends nothing: a slow client
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	backstop := time.Now().Add(time.Minute)
	for web.open.Load() < maxFrontConns {
		if time.Now().After(backstop) {
			t.Fatalf("%d connections accepted in a minute, want %d", web.open.Load(), maxFrontConns)
		}
		time.Sleep(time.Millisecond) // polling a count, not a synchronisation
	}
	time.Sleep(50 * time.Millisecond) // the absence of more: a bound, not a synchronisation
	if n := web.open.Load(); n != maxFrontConns {
		t.Fatalf("%d connections open, at most %d may be", n, maxFrontConns)
	}
	for _, c := range held {
		c.Close()
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
