package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	MaybeServe()
	leakcheck.Main(m)
}

// waitFor bounds every wait in these tests. Generous: the machine is
// shared and the race detector is slow; nothing asserts on speed.
const waitFor = 30 * time.Second

// msg is one line the server wrote, decoded loosely; raw keeps the bytes.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw []byte
}

// text returns the text of a result's only text block, and its isError.
func (m msg) text(t *testing.T) (string, bool) {
	t.Helper()
	var r struct {
		Content []struct {
			Type, Text string
		}
		IsError bool
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("want a result with one text block, got %.300s (%v)", m.raw, err)
	}
	return r.Content[0].Text, r.IsError
}

// lineReader turns a stream into a channel of lines, closed at EOF.
func lineReader(r io.Reader) <-chan []byte {
	lines := make(chan []byte, 64)
	go func() {
		defer close(lines)
		// ReadBytes, not a Scanner: a Scanner rescans its whole buffer
		// after every read, quadratic on the 17 MB line. The server's
		// output is bounded (MaxOutputBytes), so ReadBytes is too.
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			l, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			lines <- bytes.TrimSuffix(l, []byte{'\n'})
		}
	}()
	return lines
}

// peer is the raw client side of one server: lines in, lines out.
type peer struct {
	t     *testing.T
	w     io.Writer
	lines <-chan []byte
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Fatalf("writing %q: %v", line, err)
	}
}

// call sends tools/call id name args (args is JSON or "").
func (p *peer) call(id int, name, args string) {
	p.t.Helper()
	if args == "" {
		args = "{}"
	}
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
}

// rawLine returns the next stdout line, failing at EOF or after waitFor.
func (p *peer) rawLine() []byte {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("stdout ended; wanted another line")
		}
		return l
	case <-time.After(waitFor):
		p.t.Fatal("no line from the server in time")
	}
	return nil
}

func (p *peer) recv() msg {
	p.t.Helper()
	l := p.rawLine()
	var m msg
	if err := json.Unmarshal(l, &m); err != nil {
		p.t.Fatalf("line is not JSON-RPC: %.300q: %v", l, err)
	}
	m.raw = l
	return m
}

// recvID receives the next line and checks it is a response to id.
func (p *peer) recvID(id string) msg {
	p.t.Helper()
	m := p.recv()
	if string(m.ID) != id {
		p.t.Fatalf("want a response to id %s, got %.300s", id, m.raw)
	}
	return m
}

// expectText receives the response to id and checks its text and isError.
func (p *peer) expectText(id, want string, wantErr bool) {
	p.t.Helper()
	got, isErr := p.recvID(id).text(p.t)
	if got != want || isErr != wantErr {
		p.t.Fatalf("response %s: got text %q isError %v, want %q %v", id, got, isErr, want, wantErr)
	}
}

// expectEOF checks that stdout ends with no further line.
func (p *peer) expectEOF() {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if ok {
			p.t.Fatalf("want stdout to end, got line %.300q", l)
		}
	case <-time.After(waitFor):
		p.t.Fatal("stdout did not end in time")
	}
}

// handshake performs initialize + notifications/initialized and returns
// the initialize result.
func (p *peer) handshake(version string) json.RawMessage {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	m := p.recvID("0")
	if m.Result == nil {
		p.t.Fatalf("initialize failed: %s", m.raw)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m.Result
}

// sink drains a stream to EOF and closes it, counting bytes and keeping
// the first 64 KiB.
type sink struct {
	mu   sync.Mutex
	n    int
	head []byte
	done chan struct{}
}

func drain(r io.ReadCloser) *sink {
	s := &sink{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer r.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			s.mu.Lock()
			s.n += n
			if room := 64<<10 - len(s.head); room > 0 {
				s.head = append(s.head, buf[:min(n, room)]...)
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *sink) snapshot() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, string(s.head)
}

// waitBytes waits until at least n bytes arrived.
func (s *sink) waitBytes(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		got, _ := s.snapshot()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr: %d bytes, want at least %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// child is a server started through Command, talked to over os.Pipe
// files (so exec starts no copying goroutines and Wait returns when the
// child exits, even while a grandchild holds stdout).
type child struct {
	peer
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *sink
	waited chan struct{} // closed when cmd.Wait returned
	state  *os.ProcessState
}

func startChild(t *testing.T, sc Scenario) *child {
	t.Helper()
	argv, env := Command(sc)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so reap can kill the grandchild with it; and
	// Pdeathsig, so a crashed test run leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	for _, f := range []*os.File{inR, outW, errW} {
		f.Close()
	}
	if err != nil {
		for _, f := range []*os.File{inW, outR, errR} {
			f.Close()
		}
		t.Fatal(err)
	}
	c := &child{
		peer:   peer{t: t, w: inW, lines: lineReader(outR)},
		cmd:    cmd,
		stdin:  inW,
		stdout: outR,
		stderr: drain(errR),
		waited: make(chan struct{}),
	}
	go func() {
		defer close(c.waited)
		_ = cmd.Wait()
		c.state = cmd.ProcessState
	}()
	return c
}

// reap kills the child's process group (the grandchild too), waits for
// the child, and closes every pipe end, so nothing outlives the test.
func (c *child) reap() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-c.waited:
	case <-time.After(waitFor):
		c.t.Error("child not reaped in time")
	}
	c.stdin.Close()
	for range c.lines {
	}
	c.stdout.Close()
	<-c.stderr.done
}

// exited waits for the child to exit by itself.
func (c *child) exited() *os.ProcessState {
	c.t.Helper()
	select {
	case <-c.waited:
		return c.state
	case <-time.After(waitFor):
		c.t.Fatal("child did not exit in time")
	}
	return nil
}

// alive reports whether the child is still running after d.
func (c *child) alive(d time.Duration) bool {
	select {
	case <-c.waited:
		return false
	case <-time.After(d):
		return true
	}
}

// closeStdin is the client's shutdown signal.
func (c *child) closeStdin() {
	c.t.Helper()
	if err := c.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		c.t.Fatal(err)
	}
}

// expectStatus checks the way the child ended: an exit code, or (sig != 0)
// death by a signal.
func expectStatus(t *testing.T, st *os.ProcessState, code int, sig syscall.Signal) {
	t.Helper()
	ws := st.Sys().(syscall.WaitStatus)
	switch {
	case sig != 0 && !(ws.Signaled() && ws.Signal() == sig):
		t.Fatalf("child ended %v, want death by %v", st, sig)
	case sig == 0 && !(ws.Exited() && ws.ExitStatus() == code):
		t.Fatalf("child ended %v, want exit status %d", st, code)
	}
}

// stderrHas waits until the child's stderr holds want.
func (c *child) stderrHas(want string) {
	c.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		_, head := c.stderr.snapshot()
		if strings.Contains(head, want) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stderr lacks %q; it holds %.500q", want, head)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// grandchildPid parses the pid the grandchild scenario reports on stderr.
func (c *child) grandchildPid() int {
	c.t.Helper()
	c.stderrHas("holds stdout")
	_, head := c.stderr.snapshot()
	_, after, _ := strings.Cut(head, "grandchild pid ")
	pid, err := strconv.Atoi(strings.Fields(after)[0])
	if err != nil {
		c.t.Fatalf("no grandchild pid in %q", head)
	}
	return pid
}
