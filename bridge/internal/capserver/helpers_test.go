package capserver

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
)

// testServers is what testAuth's grant reaches.
var testServers = []string{"github", "fs"}

func testAuth(h *capwire.HelloMsg) ([]string, error) {
	if h.Token != "good" {
		return nil, errors.New("unknown token")
	}
	return testServers, nil
}

// raw marks bytes that m appends verbatim instead of encoding.
type raw = msgpack.RawMessage

// m builds a MessagePack map with keys in the order given (at most 15
// pairs), so tests can place a field after the fault they provoke.
func m(kv ...any) raw {
	b := []byte{0x80 | byte(len(kv)/2)}
	for _, v := range kv {
		b = appendVal(b, v)
	}
	return b
}

func arr(vs ...any) raw {
	b := []byte{0x90 | byte(len(vs))}
	for _, v := range vs {
		b = appendVal(b, v)
	}
	return b
}

func appendVal(b []byte, v any) []byte {
	if r, ok := v.(raw); ok {
		return append(b, r...)
	}
	enc, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(b, enc...)
}

func prefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func frameOf(payload []byte) []byte { return append(prefix(uint32(len(payload))), payload...) }

// peer accepts connections on a real Unix socket in a fresh directory and
// hands each to a handler.
type peer struct {
	path string
	ln   net.Listener
	wg   sync.WaitGroup
}

// listen returns a socket path short enough for sun_path (108 bytes),
// which t.TempDir's long names can exceed, and a listener on it.
func listen(t *testing.T) (string, net.Listener) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, ln
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

// stop closes the listener and waits for every handler. Tests defer it
// after leakcheck.Check so it runs first.
func (p *peer) stop() {
	p.ln.Close()
	p.wg.Wait()
}

// waitFor bounds every wait on a real socket in these tests, including
// the server's wait for a hello the test sends at once: a backstop
// against a hang, never an expectation of speed.
const waitFor = time.Minute

// rawClient speaks frames by hand, to send what a Client never would.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	fr   *capwire.FrameReader
}

func dialRaw(t *testing.T, path string) *rawClient {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(waitFor))
	return &rawClient{t: t, conn: conn, fr: capwire.NewFrameReader(conn, 0)}
}

func (r *rawClient) send(payload []byte) {
	if _, err := r.conn.Write(frameOf(payload)); err != nil {
		r.t.Errorf("write frame: %v", err)
	}
}

func (r *rawClient) sendMsg(msg capwire.Message) {
	f, err := capwire.AppendFrame(nil, msg, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(f[4:])
}

func (r *rawClient) recv() (capwire.Message, error) {
	f, err := r.fr.ReadFrame(nil)
	if err != nil {
		return nil, err
	}
	return capwire.Decode(f)
}

func (r *rawClient) hello() {
	r.sendMsg(&capwire.HelloMsg{V: 1, Token: "good"})
	if msg, err := r.recv(); err != nil {
		r.t.Fatalf("no welcome: %v", err)
	} else if _, ok := msg.(*capwire.WelcomeMsg); !ok {
		r.t.Fatalf("got %#v, want a welcome", msg)
	}
}
