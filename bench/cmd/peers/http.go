package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The HTTP cells: each client reaches its own rawecho behind net/http
// (rawecho.ServeHTTP: stateless Streamable HTTP of both eras, JSON
// answers), a child process serving a loopback port. The SDKs and the
// raw floor speak the 2025 era to it; capbridge finds the 2026-07-28 one
// (capbridge-http), or, against the face of the 2025 era alone
// (capbridge-http-2025), initializes.

// httpEcho is one rawecho HTTP server child.
type httpEcho struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startHTTPEcho starts the server of both eras and reads its URL, its
// first line.
func startHTTPEcho(ctx context.Context, e *env) (*httpEcho, error) {
	return startHTTPEchoEnv(ctx, e, e.httpEnv)
}

// startHTTPEchoEnv starts the server with extra environment env (which
// picks its eras).
func startHTTPEchoEnv(ctx context.Context, e *env, extra []string) (*httpEcho, error) {
	cmd := exec.Command(e.httpArgv[0], e.httpArgv[1:]...)
	cmd.Env = append(os.Environ(), extra...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &httpEcho{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(io.LimitReader(stdout, 1<<10)).ReadString('\n')
		line <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case h.url = <-line:
	case <-ctx.Done():
	case <-time.After(readyTimeout):
	}
	if !strings.HasPrefix(h.url, "http://") {
		_ = h.close()
		return nil, fmt.Errorf("rawecho http: printed %q instead of its URL", h.url)
	}
	return h, nil
}

// close ends the server (its stdin's end is its signal) and waits.
func (h *httpEcho) close() error {
	_ = h.stdin.Close()
	return waitProc(h.cmd)
}

func (h *httpEcho) proc() proc { return proc{"server", h.cmd.Process.Pid} }

// newHTTPClient is a keep-alive client with room for every call in
// flight, as each SDK's own default would have were it tuned.
func newHTTPClient(inflight int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(inflight, 2)
	return &http.Client{Transport: tr}
}

// rawHTTPPeer is the floor over HTTP: hand-built bodies POSTed on a
// keep-alive client, the answer's text cut out by a byte scan.
type rawHTTPPeer struct {
	srv  *httpEcho
	hc   *http.Client
	next atomic.Uint64
}

func startRawHTTP(ctx context.Context, e *env, _ string, inflight int) (peer, error) {
	srv, err := startHTTPEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	return &rawHTTPPeer{srv: srv, hc: newHTTPClient(inflight)}, nil
}

func (p *rawHTTPPeer) call(ctx context.Context, text string) (string, error) {
	id := p.next.Add(1)
	body := make([]byte, 0, len(text)+128)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendUint(body, id, 10)
	body = append(body, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":`...)
	body = strconv.AppendQuote(body, text)
	body = append(body, `}}}`...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := p.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	line, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return replyText(line, id)
}

func (p *rawHTTPPeer) procs() []proc { return []proc{p.srv.proc()} }

func (p *rawHTTPPeer) close() error {
	p.hc.CloseIdleConnections()
	return p.srv.close()
}

// goSDKHTTPPeer is go-sdk's client over its StreamableClientTransport.
type goSDKHTTPPeer struct {
	srv *httpEcho
	s   *gosdk.ClientSession
}

func startGoSDKHTTP(ctx context.Context, e *env, _ string, inflight int) (peer, error) {
	srv, err := startHTTPEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	c := gosdk.NewClient(&gosdk.Implementation{Name: "peers-go-sdk", Version: "1"}, nil)
	s, err := c.Connect(ctx, &gosdk.StreamableClientTransport{Endpoint: srv.url, HTTPClient: newHTTPClient(inflight), DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("go-sdk http: connect: %w", err), srv.close())
	}
	return &goSDKHTTPPeer{srv: srv, s: s}, nil
}

func (p *goSDKHTTPPeer) call(ctx context.Context, text string) (string, error) {
	return (&goSDKPeer{s: p.s}).call(ctx, text)
}

func (p *goSDKHTTPPeer) procs() []proc { return []proc{p.srv.proc()} }

func (p *goSDKHTTPPeer) close() error { return errors.Join(p.s.Close(), p.srv.close()) }

// mcpGoHTTPPeer is mcp-go's streamable HTTP client.
type mcpGoHTTPPeer struct {
	srv *httpEcho
	c   *mcpgoclient.Client
}

func startMCPGoHTTP(ctx context.Context, e *env, _ string, inflight int) (peer, error) {
	srv, err := startHTTPEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	c, err := mcpgoclient.NewStreamableHttpClient(srv.url)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("mcp-go http: %w", err), srv.close())
	}
	if err := c.Start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("mcp-go http: start: %w", err), srv.close())
	}
	var req mcpgo.InitializeRequest
	req.Params.ClientInfo = mcpgo.Implementation{Name: "peers-mcp-go", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, errors.Join(fmt.Errorf("mcp-go http: initialize: %w", err), srv.close())
	}
	return &mcpGoHTTPPeer{srv: srv, c: c}, nil
}

func (p *mcpGoHTTPPeer) call(ctx context.Context, text string) (string, error) {
	return (&mcpGoPeer{c: p.c}).call(ctx, text)
}

func (p *mcpGoHTTPPeer) procs() []proc { return []proc{p.srv.proc()} }

func (p *mcpGoHTTPPeer) close() error { return errors.Join(p.c.Close(), p.srv.close()) }

// capbridgeHTTPPeer is the jail boundary to a remote server: capwire,
// the call socket, capbridge serve with the server's url, HTTP.
type capbridgeHTTPPeer struct {
	*capbridgePeer
	srv *httpEcho
}

func startCapbridgeHTTP(ctx context.Context, e *env, _ string, _ int) (peer, error) {
	return startCapbridgeHTTPEnv(ctx, e, e.httpEnv)
}

// startCapbridgeHTTP2025 is capbridge against the face of the 2025 era
// alone: the same path, with initialize and a session-less 2025 exchange.
func startCapbridgeHTTP2025(ctx context.Context, e *env, _ string, _ int) (peer, error) {
	return startCapbridgeHTTPEnv(ctx, e, e.http2025Env)
}

func startCapbridgeHTTPEnv(ctx context.Context, e *env, serverEnv []string) (peer, error) {
	srv, err := startHTTPEchoEnv(ctx, e, serverEnv)
	if err != nil {
		return nil, err
	}
	write := func(cfgPath, call, control string) error {
		cfg := fmt.Sprintf("[bridge]\ncall_socket = %s\ncontrol_socket = %s\n\n[mcp.t]\nurl = %s\n", tomlQuote(call), tomlQuote(control), tomlQuote(srv.url))
		return os.WriteFile(cfgPath, []byte(cfg), 0o600)
	}
	p, err := bootCapbridge(ctx, e, write, srv.cmd.Process.Pid)
	if err != nil {
		return nil, errors.Join(err, srv.close())
	}
	return &capbridgeHTTPPeer{capbridgePeer: p, srv: srv}, nil
}

func (p *capbridgeHTTPPeer) close() error { return errors.Join(p.capbridgePeer.close(), p.srv.close()) }
