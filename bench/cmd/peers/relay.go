package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
	"github.com/capbridge/capbridge/internal/unixconn"
)

// The raw-relay client is the two-hop floor: raw's request lines over a
// Unix socket to a relay process that copies bytes, unparsed, to a rawecho
// child's stdin and the child's stdout back to the socket. It is capbridge's
// path with a middle that does nothing, so a bridge's latency and
// throughput can be read against the cost of the hops alone.

// relayEnv makes the harness binary a relay (see maybeRelay): it names the
// socket to listen on.
const relayEnv = "CAPBRIDGE_PEERS_RELAY"

// relayBuf is the size of each of the relay's two copy buffers; a 16 KiB
// call and its reply fit in one read when the kernel has them whole.
const relayBuf = 64 << 10

// maybeRelay runs this process as a relay and exits when relayEnv is set;
// otherwise it returns at once.
func maybeRelay() {
	sock := os.Getenv(relayEnv)
	if sock == "" {
		return
	}
	// One thread runs Go code, as in capbridge serve by default (and with
	// the same rule: GOMAXPROCS in the environment wins), so capbridge /
	// raw-relay compares bridges that schedule alike; a second P only adds
	// wake-ups of an idle thread per hop.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if err := relay(sock, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "raw-relay:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// relay listens on sock, starts a rawecho child, writes "ready PID\n" (the
// child's pid) to ready, accepts one connection and relays it to the child
// until the child's stdout ends. The child always ends before relay
// returns: it closes the child's stdin (on EOF from the socket, or on any
// failure), which makes rawecho exit, and reaps it.
func relay(sock string, ready io.Writer) error {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	cmd, stdin, stdout, err := rawecho.Start(relayEnv)
	if err != nil {
		return err
	}
	var nc net.Conn
	if _, err = fmt.Fprintf(ready, "ready %d\n", cmd.Process.Pid); err == nil {
		nc, err = ln.Accept()
	}
	ln.Close()
	if err != nil {
		stdin.Close()
		_, _ = io.Copy(io.Discard, stdout)
		return errors.Join(err, cmd.Wait())
	}

	// The socket as capwire's client reads and writes it, so that the
	// floor pays no more for its hops than capbridge does.
	conn := unixconn.Take(nc)
	up := make(chan error, 1)
	go func() {
		err := pump(stdin, conn)
		stdin.Close() // the child exits on EOF
		up <- err
	}()
	downErr := pump(conn, stdout)
	// The child's stdout ended: it exited (normally because its stdin
	// ended). Closing the socket also ends the other pump if the child
	// went first.
	conn.Close()
	upErr := <-up
	if errors.Is(upErr, net.ErrClosed) {
		upErr = nil
	}
	if downErr != nil {
		downErr = fmt.Errorf("child to socket: %w", downErr)
	}
	if upErr != nil {
		upErr = fmt.Errorf("socket to child: %w", upErr)
	}
	return errors.Join(downErr, upErr, cmd.Wait())
}

// pump copies src to dst until src ends, writing what each read returned
// at once: the relay holds nothing back and adds no flush delay of its own.
func pump(dst io.Writer, src io.Reader) error {
	buf := make([]byte, relayBuf)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// awaitReady returns the first line a relay prints on r, without its
// newline, or an error if none comes before ctx ends.
func awaitReady(ctx context.Context, r io.Reader) (string, error) {
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(io.LimitReader(r, 64)).ReadString('\n')
		lines <- strings.TrimSuffix(line, "\n")
	}()
	select {
	case line := <-lines:
		return line, nil
	case <-ctx.Done():
		return "", fmt.Errorf("relay was not ready within %v", readyTimeout)
	}
}

// withoutVars returns environ without the variables named.
func withoutVars(environ []string, names ...string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

func startRawRelay(ctx context.Context, e *env, text string, inflight int) (peer, error) {
	dir, err := os.MkdirTemp(e.tmp, "relay")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "relay.sock")
	cmd := exec.Command(e.serverArgv[0], e.serverArgv[1:]...)
	cmd.Env = append(withoutVars(os.Environ(), relayEnv, rawecho.Env), relayEnv+"="+sock, "GORACE=atexit_sleep_ms=0")
	return startRelayed(ctx, "raw-relay", cmd, dir, sock, text, inflight)
}

// startRelayed starts cmd, a relay that listens on sock, prints "ready
// PID\n" (its server's pid) on stdout and relays one connection to its
// server, then connects raw's client to it through sock. The relay owns
// dir, removed once it is gone.
func startRelayed(ctx context.Context, name string, cmd *exec.Cmd, dir, sock, text string, inflight int) (peer, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer pr.Close()
	cmd.Stdout = pw
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	pw.Close() // the relay holds the only write end: its exit ends the ready line's read
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	fail := func(err error) (peer, error) {
		_ = cmd.Process.Kill()
		_ = waitProc(cmd)
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	bootCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	line, err := awaitReady(bootCtx, pr)
	if err != nil {
		return fail(err)
	}
	pid, ok := strings.CutPrefix(line, "ready ")
	server, err := strconv.Atoi(pid)
	if !ok || err != nil || server <= 0 {
		return fail(fmt.Errorf("relay printed %q instead of its ready line", line))
	}
	var d net.Dialer
	c, err := d.DialContext(bootCtx, "unix", sock)
	if err != nil {
		return fail(err)
	}
	// Read and written as capwire's client does its socket. Both what
	// Take returns (its own socket, or the *net.UnixConn itself) close
	// their write side.
	conn := unixconn.Take(c)
	p, err := newRawPeer(ctx, name, rawLink{
		r: conn, w: conn, closeWrite: conn.(interface{ CloseWrite() error }).CloseWrite,
		wait: func() error {
			err := waitProc(cmd)
			conn.Close()
			os.RemoveAll(dir)
			if err == nil && alive(server) {
				err = fmt.Errorf("server %d outlived the relay", server)
			}
			return err
		},
		kill:  func() { _ = cmd.Process.Kill() },
		procs: []proc{{"bridge", cmd.Process.Pid}, {"server", server}},
	}, text, inflight)
	if err != nil {
		return nil, err // not a nil *rawPeer in a non-nil peer
	}
	return p, nil
}
