package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Roles the test binary plays in a child process, chosen by environment:
// a launcher that lowers its descriptor limit and execs capbridge, and an
// attacker that holds connections to a port.
const (
	envExecNofile = "CAPBRIDGE_TEST_EXEC_NOFILE" // the limit; argv[1:] is what to exec
	envFlood      = "CAPBRIDGE_TEST_FLOOD"       // "ADDR COUNT"
)

// maybeActAsChild runs the child roles; it returns only in the test
// process itself.
func maybeActAsChild() {
	if n := os.Getenv(envExecNofile); n != "" {
		limit, err := strconv.ParseUint(n, 10, 64)
		if err == nil {
			err = unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit})
		}
		if err == nil {
			env := slicesWithout(os.Environ(), envExecNofile)
			err = syscall.Exec(os.Args[1], os.Args[1:], env)
		}
		fmt.Fprintln(os.Stderr, "exec with a lowered RLIMIT_NOFILE:", err)
		os.Exit(2)
	}
	if spec := os.Getenv(envFlood); spec != "" {
		os.Exit(flood(spec))
	}
}

func slicesWithout(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// flood opens COUNT connections to ADDR, as fast as the kernel takes
// them, sends each a keep-alive request, says how many it holds, and
// keeps them busy (another request on each every half second, so no idle
// timeout frees them) until its stdin closes. A connection the kernel
// does not take within its dial timeout is given up on: the attacker
// holds what it can.
func flood(spec string) int {
	addr, countText, _ := strings.Cut(spec, " ")
	count, err := strconv.Atoi(countText)
	if err != nil {
		return 2
	}
	var mu sync.Mutex
	var held []net.Conn
	work := make(chan struct{})
	var wg sync.WaitGroup
	for range 512 {
		wg.Go(func() {
			// A full backlog drops the SYN: a short timeout gives up on
			// it rather than wait out the kernel's retransmissions.
			d := net.Dialer{Timeout: 100 * time.Millisecond}
			for range work {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					continue
				}
				_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: capbridge\r\n\r\n")
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		})
	}
	for range count {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	fmt.Printf("holding %d\n", len(held))
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			for _, c := range held {
				c.Close()
			}
			return 0
		case <-tick.C:
			for _, c := range held {
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: capbridge\r\n\r\n")
			}
		}
	}
}

// Two local processes each open 10 000 keep-alive connections to the
// metrics port of a capbridge whose descriptor limit is 256; while they
// hold them, a program with a token calls a tool through the call
// socket and the operator's client commands work through the control
// socket, and the metrics listener holds at most its 32 connections.
func testMetricsFlood(t *testing.T, bin string) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Max < 10_100 {
		t.Skipf("the attackers need 10 000 descriptors each; the hard limit is %d", lim.Max)
	}
	dir := shortTempDir(t)
	cfg := demoConfig(t, dir, bin, "metrics_listen = \"127.0.0.1:0\"\nlog_format = \"json\"\n")
	srv, line := startServe(t, os.Args[0], []string{envExecNofile + "=256"}, bin, "serve", "-c", cfg)
	var ready struct{ Metrics string }
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.Metrics == "" {
		t.Fatalf("ready line %q: %v", line, err)
	}

	for range 2 {
		a := exec.Command(os.Args[0])
		a.Env = append(os.Environ(), envFlood+"="+ready.Metrics+" 10000")
		stdin, err := a.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); _ = a.Wait() })
		held, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(held, "holding ") {
			t.Fatalf("attacker: %q, %v", held, err)
		}
		t.Logf("an attacker is %s connections", strings.TrimSpace(held))
	}

	env := []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}
	// The grant and the dial, through the control and call sockets while
	// the metrics port is flooded.
	ctx, c, _ := grantDial(t, bin, env, dir+"/call.sock", "--servers", "demo", "--ttl", "1m")
	r, err := c.Call(ctx, "demo", "echo", map[string]any{"text": "still here"})
	c.Close()
	if err != nil || r.Text() != "still here" {
		t.Fatalf("a call while the metrics port is flooded: %v, %v", r, err)
	}
	out, errOut, code := runCLI(t, bin, env, "metrics")
	m := regexp.MustCompile(`capbridge_connections_open\{socket="metrics"\} (\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("metrics through the control socket: exit %d, %s", code, errOut)
	}
	if n, _ := strconv.Atoi(m[1]); n > 32 {
		t.Errorf("the metrics listener holds %d connections, more than its 32", n)
	}
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after the flood: %v, %q", err, rest)
	}
}

// metrics_listen = "unix:PATH" serves the metrics on a socket only
// capbridge's user can reach (mode 0600), removed at exit.
func testMetricsUnixSocket(t *testing.T, bin string) {
	dir := shortTempDir(t)
	sock := dir + "/metrics.sock"
	cfg := demoConfig(t, dir, bin, "metrics_listen = \"unix:"+sock+"\"\n")
	srv, line := startServe(t, bin, nil, "serve", "-c", cfg)
	if !strings.Contains(line, `"metrics":"unix:`+sock+`"`) {
		t.Errorf("ready line %s", line)
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("metrics socket: %v, %v; want a socket of mode 0600", fi, err)
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := client.Get("http://capbridge/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "capbridge_grants_live") {
		t.Fatalf("GET /metrics over the socket: %s\n%.200s", resp.Status, body)
	}
	if _, err := srv.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the metrics socket was left behind")
	}
}
