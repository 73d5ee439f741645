package capwire

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// countConn counts the writes made on a connection.
type countConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// With one processor, calls made together reach capbridge in a few
// writes, not one each: a caller that finds other calls in flight yields
// before writing, and the callers already runnable queue their frames
// behind it. Every call still gets its own reply.
func TestCallsGatherIntoFewWrites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := startPeer(t, serveEcho)
	defer p.stop()
	nc, err := net.Dial("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countConn{Conn: nc}
	var d Dialer
	c, err := d.handshake(context.Background(), cc, "good")
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	defer c.Close()
	cc.writes.Store(0)
	const n = 32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			op := fmt.Sprintf("op%d", i)
			res, err := c.Call(context.Background(), "fs", op, nil)
			if err != nil || res.Text() != op {
				t.Errorf("call %d: %v, %v", i, res, err)
			}
		})
	}
	close(start)
	wg.Wait()
	writes := cc.writes.Load()
	t.Logf("%d calls made together: %d writes", n, writes)
	if writes > n/4 {
		t.Fatalf("%d calls made together took %d writes, want at most %d", n, writes, n/4)
	}
}
