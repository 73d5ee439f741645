package capwire

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// testServers is what the scripted peer's grant reaches.
var testServers = []string{"github", "fs"}

func testAuth(h *HelloMsg) ([]string, error) {
	if h.Token != "good" {
		return nil, errors.New("unknown token")
	}
	return testServers, nil
}

// peer is a scripted capbridge on a real Unix socket in a fresh directory.
// Each accepted connection is handshaken by a scriptConn and then handed
// to script; the connection is closed when script returns.
type peer struct {
	path string
	ln   net.Listener
	wg   sync.WaitGroup
}

// sockPath returns a socket path short enough for sun_path (108 bytes),
// which t.TempDir's long names can exceed.
func sockPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

func listen(t *testing.T) (string, net.Listener) {
	t.Helper()
	path := sockPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, ln
}

// scriptConn is the scripted capbridge's side of one connection: frames
// decoded and encoded with this package's codec, writes serialized by a
// lock. It stands in for the bridge's server (bridge/internal/capserver), which
// imports this package and so cannot serve its tests.
type scriptConn struct {
	conn net.Conn
	fr   *FrameReader
	mu   sync.Mutex // serializes writes
}

// Read returns the next envelope from the client, or the error that ended
// the connection.
func (s *scriptConn) Read() (Message, error) {
	f, err := s.fr.ReadFrame(nil)
	if err != nil {
		return nil, err
	}
	return Decode(f)
}

// Send writes m as one frame. ctx is not consulted: the peer's writes are
// small, and a client that stops reading ends its test anyway.
func (s *scriptConn) Send(_ context.Context, m Message) error {
	f, err := AppendFrame(nil, m, 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.conn.Write(f)
	return err
}

// Fatal sends a fatal frame and closes the connection.
func (s *scriptConn) Fatal(code, message string) error {
	err := s.Send(context.Background(), &FatalMsg{Code: code, Message: message})
	s.conn.Close()
	return err
}

// handshake answers the hello as capbridge does: a welcome naming
// testServers for the good token, a fatal bad_token otherwise.
func (s *scriptConn) handshake() bool {
	m, err := s.Read()
	if err != nil {
		return false
	}
	h, ok := m.(*HelloMsg)
	if !ok {
		s.Fatal(CodeBadHello, "the first frame must be a hello")
		return false
	}
	servers, err := testAuth(h)
	if err != nil {
		s.Fatal(CodeBadToken, "token not accepted")
		return false
	}
	return s.Send(context.Background(), &WelcomeMsg{V: Version, Servers: servers}) == nil
}

func startPeer(t *testing.T, script func(s *scriptConn)) *peer {
	t.Helper()
	path, ln := listen(t)
	p := &peer{path: path, ln: ln}
	p.serve(func(conn net.Conn) {
		defer conn.Close()
		s := &scriptConn{conn: conn, fr: NewFrameReader(conn, 0)}
		if !s.handshake() {
			return
		}
		script(s)
	})
	return p
}

// startRaw is a peer that hands script the bare connection.
func startRaw(t *testing.T, script func(conn net.Conn)) *peer {
	t.Helper()
	path, ln := listen(t)
	p := &peer{path: path, ln: ln}
	p.serve(func(conn net.Conn) {
		defer conn.Close()
		script(conn)
	})
	return p
}

func (p *peer) serve(handle func(net.Conn)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				handle(conn)
			}()
		}
	}()
}

// stop closes the listener and waits for every connection's script. Tests
// defer it after leakcheck.Check so it runs first.
func (p *peer) stop() {
	p.ln.Close()
	p.wg.Wait()
}

// serveEcho answers every call with its id as text and its args as
// structured content, in arrival order, until the client goes away.
func serveEcho(s *scriptConn) {
	for {
		msg, err := s.Read()
		if err != nil {
			return
		}
		if c, ok := msg.(*CallMsg); ok {
			res := &ResultMsg{ID: c.ID, Result: Result{Content: []Block{{Type: BlockText, Kind: KindText, Text: c.Op}}, Structured: c.Args}}
			if err := s.Send(context.Background(), res); err != nil {
				return
			}
		}
	}
}

// writeFrame writes payload as one frame, for raw peers and raw clients.
func writeFrame(t *testing.T, w io.Writer, payload []byte) {
	t.Helper()
	if _, err := w.Write(frameOf(payload)); err != nil {
		t.Errorf("write frame: %v", err)
	}
}
