package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// rawClient is the physical limit: raw pipes, hand-built lines, one
// reader goroutine with an id→channel map, checking only the id and
// that a result is present.
type rawClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	wmu    sync.Mutex
	mu     sync.Mutex
	next   int64
	wait   map[int64]chan []byte
	done   chan struct{}
}

func startRaw(b *testing.B, argv, env []string) *rawClient {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	rc := &rawClient{cmd: cmd, stdin: in, stdout: bufio.NewReaderSize(out, 64<<10), wait: map[int64]chan []byte{}, done: make(chan struct{})}
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
	if _, err := rc.stdout.ReadBytes('\n'); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	go rc.readLoop()
	return rc
}

func (rc *rawClient) readLoop() {
	defer close(rc.done)
	for {
		line, err := rc.stdout.ReadSlice('\n')
		if err != nil {
			return
		}
		i := bytes.Index(line, []byte(`"id":`))
		j := bytes.IndexByte(line[i+5:], ',')
		id, _ := strconv.ParseInt(string(line[i+5:i+5+j]), 10, 64)
		if !bytes.Contains(line, []byte(`"result"`)) {
			panic("raw: no result")
		}
		rc.mu.Lock()
		ch := rc.wait[id]
		delete(rc.wait, id)
		rc.mu.Unlock()
		ch <- nil
	}
}

func (rc *rawClient) call(buf []byte, ch chan []byte) []byte {
	rc.mu.Lock()
	rc.next++
	id := rc.next
	rc.wait[id] = ch
	rc.mu.Unlock()
	buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"0123456789012345678901234567890123456789012345678901234567890123"}}}`+"\n"...)
	rc.wmu.Lock()
	_, _ = rc.stdin.Write(buf)
	rc.wmu.Unlock()
	<-ch
	return buf
}

func (rc *rawClient) close() {
	rc.stdin.Close()
	<-rc.done
	_ = rc.cmd.Wait()
}

const benchArgs = `{"text":"0123456789012345678901234567890123456789012345678901234567890123"}`

// benchServers are the peers of BenchmarkCallTool: the mcptest child
// (encoding/json, a goroutine per call: a realistic Go server) and
// rawecho (one goroutine, byte scans: the physical-limit server), so the client's own cost can be read
// against the floor.
func benchServers() []struct {
	name      string
	argv, env []string
} {
	margv, menv := mcptest.Command(mcptest.Scenario{})
	rargv, renv := rawecho.Command()
	return []struct {
		name      string
		argv, env []string
	}{{"mcptest", margv, menv}, {"rawecho", rargv, renv}}
}

// BenchmarkCallTool measures a full tools/call round trip (64 B of text)
// to each benchmark server, sequentially and with 32 calls in flight, for
// mcpwire and for the raw minimal client in the same run.
func BenchmarkCallTool(b *testing.B) {
	ctx := context.Background()
	for _, srv := range benchServers() {
		for _, par := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/mcpwire/inflight=%d", srv.name, par), func(b *testing.B) {
				c, err := Start(ctx, Command{Argv: srv.argv, Env: srv.env, Inherit: []string{"PATH", "HOME", "TMPDIR"}}, Config{})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				b.ReportAllocs()
				var fails atomic.Int64
				run := func() {
					r, err := c.CallTool(ctx, "echo", JSONArgs([]byte(benchArgs)), CallOptions{})
					if err != nil || len(r.Content) != 1 || len(r.Content[0].Text) != 64 {
						fails.Add(1)
					}
				}
				if par == 1 {
					for b.Loop() {
						run()
					}
				} else {
					b.SetParallelism((par + 1) / 2)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							run()
						}
					})
				}
				if fails.Load() > 0 {
					b.Fatalf("%d calls failed", fails.Load())
				}
			})
			b.Run(fmt.Sprintf("%s/raw/inflight=%d", srv.name, par), func(b *testing.B) {
				rc := startRaw(b, srv.argv, srv.env)
				defer rc.close()
				b.ReportAllocs()
				if par == 1 {
					buf, ch := make([]byte, 0, 256), make(chan []byte, 1)
					for b.Loop() {
						buf = rc.call(buf, ch)
					}
				} else {
					b.SetParallelism((par + 1) / 2)
					b.RunParallel(func(pb *testing.PB) {
						buf, ch := make([]byte, 0, 256), make(chan []byte, 1)
						for pb.Next() {
							buf = rc.call(buf, ch)
						}
					})
				}
			})
		}
	}
}
