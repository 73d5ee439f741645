package capwire

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRoundTrip is one Call over a real Unix socket to the scripted
// echo peer (64 B of text in the args, echoed back as structured content),
// one at a time and with 32 in flight: the client's whole cost per call
// plus the peer's, which is the same before and after a client change.
func BenchmarkRoundTrip(b *testing.B) {
	args := map[string]any{"text": strings.Repeat("x", 64)}
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("inflight=%d", par), func(b *testing.B) {
			dir, err := os.MkdirTemp("", "cwb")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			path := filepath.Join(dir, "s")
			ln, err := net.Listen("unix", path)
			if err != nil {
				b.Fatal(err)
			}
			served := make(chan struct{})
			go func() {
				defer close(served)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				s := &scriptConn{conn: conn, fr: NewFrameReader(conn, 0)}
				if s.handshake() {
					serveEcho(s)
				}
			}()
			defer func() { <-served }()
			defer ln.Close()
			c, err := Dial(context.Background(), path, "good")
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			if par == 1 {
				for b.Loop() {
					if res, err := c.Call(ctx, "fs", "echo", args); err != nil || res.Text() != "echo" {
						b.Fatal(res, err)
					}
				}
				return
			}
			b.SetParallelism((par + 1) / 2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if res, err := c.Call(ctx, "fs", "echo", args); err != nil || res.Text() != "echo" {
						b.Error(res, err)
						return
					}
				}
			})
		})
	}
}
