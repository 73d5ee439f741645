package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// The c-relay client is the two-hop floor with no runtime in the middle:
// raw's client over a Unix socket (read and written as raw-relay's is) to
// crelay.c, one process with two blocking threads, each a read() then a
// write() of what it returned on one buffer, to a rawecho child's pipes.
// A byte that arrives wakes exactly the thread blocked on it, so what
// raw-relay costs beyond it is the Go runtime's scheduling of a relay that
// does nothing. It is built by the machine's C compiler once per run; on
// a machine without one, its samples are skipped, saying so.

//go:embed crelay/crelay.c
var crelaySource []byte

// isCRelay says whether client is one of the C relay's: built only when
// one is measured, and skipped where the machine has no C compiler.
func isCRelay(client string) bool { return client == "c-relay" || client == "c-relay-http" }

// cCompilers are tried in order when $CC is unset.
var cCompilers = []string{"cc", "gcc", "clang"}

// findCC returns the C compiler to build crelay with, or "" and why there
// is none.
func findCC() (string, string) {
	if cc := os.Getenv("CC"); cc != "" {
		if path, err := exec.LookPath(cc); err == nil {
			return path, ""
		}
		return "", fmt.Sprintf("$CC (%s) is not an executable on PATH", cc)
	}
	for _, cc := range cCompilers {
		if path, err := exec.LookPath(cc); err == nil {
			return path, ""
		}
	}
	return "", "no C compiler on PATH (tried $CC, cc, gcc, clang)"
}

// buildCRelay compiles crelay.c into dir. It returns the binary's path, or
// "" and the reason the client is skipped when the machine has no C
// compiler; a compiler that fails is an error.
func buildCRelay(ctx context.Context, dir string) (bin, skip string, err error) {
	cc, skip := findCC()
	if cc == "" {
		return "", skip, nil
	}
	src := filepath.Join(dir, "crelay.c")
	if err := os.WriteFile(src, crelaySource, 0o600); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "crelay")
	build := exec.CommandContext(ctx, cc, "-O2", "-pthread", "-o", bin, src)
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building the C relay with %s: %w\n%s", cc, err, out)
	}
	return bin, "", nil
}

func startCRelay(ctx context.Context, e *env, text string, inflight int) (peer, error) {
	if e.crelay == "" {
		return nil, fmt.Errorf("c-relay: not built")
	}
	dir, err := os.MkdirTemp(e.tmp, "crelay")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "relay.sock")
	cmd := exec.Command(e.crelay, append([]string{sock}, e.serverArgv...)...)
	// The child inherits crelay's environment: the server's own.
	cmd.Env = append(withoutVars(os.Environ(), relayEnv, rawecho.Env, sampleEnv), e.serverEnv...)
	return startRelayed(ctx, "c-relay", cmd, dir, sock, text, inflight)
}

// The c-relay-http client is the same floor in front of an HTTP server:
// raw-http's client, its connections dialed to crelay's Unix socket
// (crelay -tcp), each relayed to a TCP connection of crelay's own to the
// server's loopback port. It is capbridge-http's path with a middle that
// does nothing, in C: what http-a's limit asks of any bridge is read
// against it.
type cRelayHTTPPeer struct {
	*rawHTTPPeer
	relay *exec.Cmd
	stdin io.WriteCloser // its end ends the relay
	dir   string
}

func startCRelayHTTP(ctx context.Context, e *env, _ string, inflight int) (peer, error) {
	if e.crelay == "" {
		return nil, fmt.Errorf("c-relay-http: not built")
	}
	srv, err := startHTTPEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	hostport, ok := strings.CutPrefix(srv.url, "http://")
	hostport, _, _ = strings.Cut(hostport, "/")
	if !ok {
		return nil, errors.Join(fmt.Errorf("c-relay-http: server URL %q is not http://", srv.url), srv.close())
	}
	dir, err := os.MkdirTemp(e.tmp, "crelay")
	if err != nil {
		return nil, errors.Join(err, srv.close())
	}
	sock := filepath.Join(dir, "relay.sock")
	cmd := exec.Command(e.crelay, "-tcp", sock, hostport)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	var stdout io.ReadCloser
	if err == nil {
		stdout, err = cmd.StdoutPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, errors.Join(err, srv.close())
	}
	p := &cRelayHTTPPeer{relay: cmd, stdin: stdin, dir: dir, rawHTTPPeer: &rawHTTPPeer{srv: srv}}
	bootCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	line, err := awaitReady(bootCtx, stdout)
	if err == nil && line != "ready" {
		err = fmt.Errorf("relay printed %q instead of its ready line", line)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, errors.Join(fmt.Errorf("c-relay-http: %w", err), p.close())
	}
	hc := newHTTPClient(inflight)
	hc.Transport.(*http.Transport).DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	p.hc = hc
	return p, nil
}

func (p *cRelayHTTPPeer) procs() []proc {
	return []proc{{"bridge", p.relay.Process.Pid}, p.srv.proc()}
}

// close ends the relay (its stdin's end), then the server.
func (p *cRelayHTTPPeer) close() error {
	if p.hc != nil {
		p.hc.CloseIdleConnections()
	}
	_ = p.stdin.Close()
	err := waitProc(p.relay)
	os.RemoveAll(p.dir)
	return errors.Join(err, p.srv.close())
}
