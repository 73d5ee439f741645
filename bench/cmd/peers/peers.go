package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A peer is one client connected, through whatever it needs, to its own
// rawecho server.
//
// call may be used by many goroutines at once; close is called once,
// after every call has returned, and must leave no process behind.
type peer interface {
	// call sends an echo tools/call with text and returns the text the
	// tool answered with.
	call(ctx context.Context, text string) (string, error)
	// procs names the processes the calls run through besides this one.
	procs() []proc
	close() error
}

// A proc is a child process whose costs are charged to a client.
type proc struct {
	Role string // "server" or "bridge"
	PID  int
}

// env is what every peer needs to start: how to run the raw server and the
// capbridge binary, and where temporary files go.
type env struct {
	serverArgv []string
	serverEnv  []string // added to the inherited environment
	// httpArgv and httpEnv start the same server behind HTTP, both
	// eras (rawecho.HTTPCommand); http2025Env the same for the 2025 era
	// alone (rawecho.HTTP2025Command).
	httpArgv    []string
	httpEnv     []string
	http2025Env []string
	capbridge   string // path of the capbridge binary
	// crelay is the C relay's binary; "" when it was not built, and
	// then crelaySkip says why c-relay's and c-relay-http's samples are
	// skipped.
	crelay     string
	crelaySkip string
	tmp        string // a directory the run owns
	// profileDir is where -profile puts capbridge's profiles ("": none);
	// profile is the path prefix of this sample's, set in the sample's
	// own process.
	profileDir, profile string
}

// A client is one of the compared clients.
type client struct {
	name  string
	start func(ctx context.Context, e *env, text string, inflight int) (peer, error)
}

// clients are the compared clients, in their nominal order (the harness
// rotates it from cell to cell).
var clients = []client{
	{"raw", startRaw},
	{"raw-relay", startRawRelay},
	{"c-relay", startCRelay},
	{"mcp-go", startMCPGo},
	{"go-sdk", startGoSDK},
	{"capbridge", startCapbridge},
	{"raw-http", startRawHTTP},
	{"c-relay-http", startCRelayHTTP},
	{"mcp-go-http", startMCPGoHTTP},
	{"go-sdk-http", startGoSDKHTTP},
	{"capbridge-http", startCapbridgeHTTP},
	{"capbridge-http-2025", startCapbridgeHTTP2025},
}

// stopGrace bounds how long a child is given to exit after its input is
// closed (or, for capbridge, after SIGTERM) before it is killed.
const stopGrace = 15 * time.Second

// waitProc waits for cmd to exit, killing it after stopGrace.
func waitProc(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not exit within %v of being asked to; killed", cmd.Path, stopGrace)
	}
}

// rawPeer is the floor: hand-built request lines, and replies checked by
// a byte scan, over a rawLink (the server's own pipes for raw, a relay's
// socket for raw-relay). With one call in flight it writes and then reads
// on the calling goroutine; with more, one reader goroutine hands each
// reply to its caller by id.
type rawPeer struct {
	link   rawLink
	br     *bufio.Reader
	text   string // the only text call accepts
	quoted []byte // text as a JSON string

	wmu sync.Mutex // guards bw and, when sequential, the whole exchange
	bw  *bufio.Writer
	seq bool

	stopKill func() bool // unregisters the kill at the end of the peer's ctx

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan rawReply // guarded by mu; nil once the reader stopped
	rerr    error                    // guarded by mu: why the reader stopped
	rdone   chan struct{}            // closed when the reader returns (concurrent mode)
}

// A rawLink is the byte stream a rawPeer talks over and the processes
// behind it. The rawPeer owns it from newRawPeer on.
type rawLink struct {
	r          io.Reader
	w          io.Writer
	closeWrite func() error // ends the requests; the far side exits on EOF, which ends the replies
	wait       func() error // once the replies ended: waits for the processes and releases the link
	kill       func()       // the backstop: ends the processes now
	procs      []proc
}

type rawReply struct {
	line []byte
	err  error
}

// maxRawLine bounds one reply line: the 16 KiB text and its envelope fit
// with room to spare.
const maxRawLine = 1 << 20

func startRaw(ctx context.Context, e *env, text string, inflight int) (peer, error) {
	cmd := exec.Command(e.serverArgv[0], e.serverArgv[1:]...)
	cmd.Env = append(os.Environ(), e.serverEnv...)
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
	p, err := newRawPeer(ctx, "raw", rawLink{
		r: stdout, w: stdin, closeWrite: stdin.Close,
		wait:  func() error { return waitProc(cmd) },
		kill:  func() { _ = cmd.Process.Kill() },
		procs: []proc{{"server", cmd.Process.Pid}},
	}, text, inflight)
	if err != nil {
		return nil, err // not a nil *rawPeer in a non-nil peer
	}
	return p, nil
}

// newRawPeer initializes the server at the far end of link and returns
// the peer; on failure it closes link first.
func newRawPeer(ctx context.Context, name string, link rawLink, text string, inflight int) (*rawPeer, error) {
	p := &rawPeer{
		link: link, br: bufio.NewReaderSize(link.r, maxRawLine),
		bw: bufio.NewWriterSize(link.w, 64<<10), text: text,
		seq: inflight <= 1, next: 1, pending: map[uint64]chan rawReply{},
	}
	// A server that stops answering would block a sequential call for
	// ever; killing it when ctx (the peer's lifetime) ends unblocks it.
	p.stopKill = context.AfterFunc(ctx, link.kill)
	q, err := json.Marshal(text)
	if err == nil {
		p.quoted = q
		err = p.handshake()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, errors.Join(err, p.close()))
	}
	if !p.seq {
		p.rdone = make(chan struct{})
		go p.readLoop()
	}
	return p, nil
}

// handshake runs initialize at 2025-11-25 and sends initialized.
func (p *rawPeer) handshake() error {
	if _, err := p.bw.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"peers-raw","version":"1"}}}` + "\n"); err != nil {
		return err
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	line, err := p.readLine()
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if !bytes.Contains(line, []byte(`"result"`)) || !bytes.Contains(line, []byte(`"2025-11-25"`)) {
		return fmt.Errorf("initialize answered %.200q", line)
	}
	if _, err := p.bw.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"); err != nil {
		return err
	}
	return p.bw.Flush()
}

func (p *rawPeer) readLine() ([]byte, error) {
	line, err := p.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("reply line longer than %d bytes", maxRawLine)
	}
	return line, err
}

func (p *rawPeer) writeCall(id uint64) error {
	var num [20]byte
	p.bw.WriteString(`{"jsonrpc":"2.0","id":`)
	p.bw.Write(strconv.AppendUint(num[:0], id, 10))
	p.bw.WriteString(`,"method":"tools/call","params":{"name":"echo","arguments":{"text":`)
	p.bw.Write(p.quoted)
	p.bw.WriteString("}}}\n")
	return p.bw.Flush()
}

func (p *rawPeer) call(ctx context.Context, text string) (string, error) {
	if text != p.text {
		return "", errors.New("raw: this peer was built for another text")
	}
	if p.seq {
		p.wmu.Lock()
		defer p.wmu.Unlock()
		id := p.next
		p.next++
		if err := p.writeCall(id); err != nil {
			return "", err
		}
		line, err := p.readLine()
		if err != nil {
			return "", err
		}
		return replyText(line, id)
	}
	ch := make(chan rawReply, 1)
	p.mu.Lock()
	if p.pending == nil {
		err := p.rerr
		p.mu.Unlock()
		return "", err
	}
	id := p.next
	p.next++
	p.pending[id] = ch
	p.mu.Unlock()
	p.wmu.Lock()
	err := p.writeCall(id)
	p.wmu.Unlock()
	if err != nil {
		return "", err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return "", r.err
		}
		return replyText(r.line, id)
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return "", ctx.Err()
	}
}

func (p *rawPeer) readLoop() {
	defer close(p.rdone)
	for {
		line, err := p.readLine()
		if err != nil {
			p.mu.Lock()
			p.rerr = fmt.Errorf("raw: reading replies: %w", err)
			for _, ch := range p.pending {
				ch <- rawReply{err: p.rerr}
			}
			p.pending = nil
			p.mu.Unlock()
			return
		}
		id, ok := replyID(line)
		if !ok {
			continue
		}
		p.mu.Lock()
		ch := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if ch != nil {
			ch <- rawReply{line: bytes.Clone(line)}
		}
	}
}

func (p *rawPeer) procs() []proc { return p.link.procs }

func (p *rawPeer) close() error {
	defer p.stopKill()
	err := p.link.closeWrite()
	if p.rdone != nil {
		<-p.rdone // the server exits on EOF, which ends the reader
	}
	return errors.Join(err, p.link.wait())
}

// replyID returns the numeric id of a reply line.
func replyID(line []byte) (uint64, bool) {
	i := bytes.Index(line, []byte(`"id":`))
	if i < 0 {
		return 0, false
	}
	v := line[i+5:]
	j := 0
	for j < len(v) && v[j] >= '0' && v[j] <= '9' {
		j++
	}
	id, err := strconv.ParseUint(string(v[:j]), 10, 64)
	return id, err == nil
}

// replyText checks that line answers call id with a result and returns the
// text of its first content block.
func replyText(line []byte, id uint64) (string, error) {
	if got, ok := replyID(line); !ok || got != id {
		return "", fmt.Errorf("raw: reply %.100q does not answer call %d", line, id)
	}
	i := bytes.Index(line, []byte(`"result":{"content":[{"type":"text","text":"`))
	if i < 0 {
		return "", fmt.Errorf("raw: reply without a text result: %.200q", line)
	}
	v := line[i+len(`"result":{"content":[{"type":"text","text":"`):]
	for j := 0; j < len(v); j++ {
		switch v[j] {
		case '\\':
			// Escapes are rare here; let encoding/json undo them.
			var s string
			end := bytes.Index(line[i:], []byte(`"}]}`))
			if end < 0 {
				return "", fmt.Errorf("raw: unterminated text in %.200q", line)
			}
			err := json.Unmarshal(line[i+len(`"result":{"content":[{"type":"text","text":`):i+end+1], &s)
			return s, err
		case '"':
			return string(v[:j]), nil
		}
	}
	return "", fmt.Errorf("raw: unterminated text in %.200q", line)
}

// mcpGoPeer is mark3labs/mcp-go's stdio client with its default
// negotiation.
type mcpGoPeer struct {
	c   *mcpgoclient.Client
	cmd *exec.Cmd
}

func startMCPGo(ctx context.Context, e *env, _ string, _ int) (peer, error) {
	var cmd *exec.Cmd
	// The command func only records the *exec.Cmd, to learn the server's
	// pid; it builds the command exactly as mcp-go's default does.
	c, err := mcpgoclient.NewStdioMCPClientWithOptions(e.serverArgv[0], e.serverEnv, e.serverArgv[1:],
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd = exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd, nil
		}))
	if err != nil {
		return nil, fmt.Errorf("mcp-go: %w", err)
	}
	var req mcpgo.InitializeRequest
	req.Params.ClientInfo = mcpgo.Implementation{Name: "peers-mcp-go", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, fmt.Errorf("mcp-go: initialize: %w", err)
	}
	return &mcpGoPeer{c: c, cmd: cmd}, nil
}

func (p *mcpGoPeer) call(ctx context.Context, text string) (string, error) {
	var req mcpgo.CallToolRequest
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": text}
	res, err := p.c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("mcp-go: unexpected result %+v", res)
	}
	tc, ok := res.Content[0].(mcpgo.TextContent)
	if !ok {
		return "", fmt.Errorf("mcp-go: content is a %T", res.Content[0])
	}
	return tc.Text, nil
}

func (p *mcpGoPeer) procs() []proc { return []proc{{"server", p.cmd.Process.Pid}} }

// close closes stdin and waits for the server (mcp-go's Close does both).
func (p *mcpGoPeer) close() error { return p.c.Close() }

// goSDKPeer is modelcontextprotocol/go-sdk's client over CommandTransport
// with its default negotiation.
type goSDKPeer struct {
	s   *gosdk.ClientSession
	cmd *exec.Cmd
}

func startGoSDK(ctx context.Context, e *env, _ string, _ int) (peer, error) {
	cmd := exec.Command(e.serverArgv[0], e.serverArgv[1:]...)
	cmd.Env = append(os.Environ(), e.serverEnv...)
	cmd.Stderr = os.Stderr
	c := gosdk.NewClient(&gosdk.Implementation{Name: "peers-go-sdk", Version: "1"}, nil)
	s, err := c.Connect(ctx, &gosdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return nil, fmt.Errorf("go-sdk: connect: %w", err)
	}
	return &goSDKPeer{s: s, cmd: cmd}, nil
}

func (p *goSDKPeer) call(ctx context.Context, text string) (string, error) {
	res, err := p.s.CallTool(ctx, &gosdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("go-sdk: unexpected result %+v", res)
	}
	tc, ok := res.Content[0].(*gosdk.TextContent)
	if !ok {
		return "", fmt.Errorf("go-sdk: content is a %T", res.Content[0])
	}
	return tc.Text, nil
}

func (p *goSDKPeer) procs() []proc { return []proc{{"server", p.cmd.Process.Pid}} }

// close closes the session; CommandTransport closes stdin and waits for
// the server (signalling it if it lingers).
func (p *goSDKPeer) close() error { return p.s.Close() }
