package mcpwire

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// echoHTTP is rawecho's logic behind net/http: a stateless Streamable
// HTTP server of the 2025 era that answers initialize, refuses
// server/discover (-32601), takes notifications (202), offers no GET
// stream (405), and echoes a tools/call's text, all as JSON bodies.
func echoHTTP() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var id, method, text []byte
		_ = jsonlex.EachMember(body, func(k, v []byte) error {
			switch {
			case jsonlex.KeyIs(k, "id"):
				id = v
			case jsonlex.KeyIs(k, "method"):
				method = v
			case jsonlex.KeyIs(k, "params"):
				_ = jsonlex.EachMember(v, func(k, v []byte) error {
					if jsonlex.KeyIs(k, "arguments") {
						_ = jsonlex.EachMember(v, func(k, v []byte) error {
							if jsonlex.KeyIs(k, "text") {
								text = v
							}
							return nil
						})
					}
					return nil
				})
			}
			return nil
		})
		if id == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		out := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
		switch string(method) {
		case `"initialize"`:
			out = append(out, `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}}`...)
		case `"tools/call"`:
			out = append(out, `,"result":{"content":[{"type":"text","text":`...)
			out = append(out, text...)
			out = append(out, `}]}}`...)
		default:
			out = append(out, `,"error":{"code":-32601,"message":"Method not found"}}`...)
		}
		_, _ = w.Write(out)
	})
}

const benchText = "0123456789012345678901234567890123456789012345678901234567890123"

// BenchmarkHTTPRaw is the floor: a keep-alive net/http client posting
// hand-built tools/call bodies and reading the answers whole, checking
// nothing.
func BenchmarkHTTPRaw(b *testing.B) {
	ts := httptest.NewServer(echoHTTP())
	defer ts.Close()
	hc, _ := HTTPClient(HTTPOptions{})
	defer hc.CloseIdleConnections()
	b.ReportAllocs()
	b.SetParallelism(16) // ×GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 256)
		id := 0
		for pb.Next() {
			id++
			buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
			buf = strconv.AppendInt(buf, int64(id), 10)
			buf = append(buf, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+benchText+`"}}}`...)
			req, _ := http.NewRequest(http.MethodPost, ts.URL, bytes.NewReader(buf))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	})
}

// BenchmarkHTTPClient is mcpwire's Streamable HTTP carrier against the
// same server, the same number of calls in flight.
func BenchmarkHTTPClient(b *testing.B) {
	ts := httptest.NewServer(echoHTTP())
	defer ts.Close()
	c, err := Dial(context.Background(), Remote{URL: ts.URL}, Config{MaxInFlight: 4096})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := JSONArgs([]byte(`{"text":"` + benchText + `"}`))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := c.CallTool(context.Background(), "echo", args, CallOptions{})
			if err != nil || len(res.Content) != 1 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHTTPSerial is one call in flight at a time over each
// transport the carrier may use, against the same in-process server:
// net/http's Transport (goroutine hand-offs to its connection's read and
// write loops) and h1Transport (the caller exchanges itself). It reports
// the process's context switches per call (the server's included, the
// same for both).
func BenchmarkHTTPSerial(b *testing.B) {
	ts := httptest.NewServer(echoHTTP())
	defer ts.Close()
	for _, tc := range []struct {
		name string
		hc   func() *http.Client
	}{
		{"net-http", func() *http.Client {
			return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), CheckRedirect: sameOrigin}
		}},
		{"h1", func() *http.Client { hc, _ := HTTPClient(HTTPOptions{}); return hc }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			hc := tc.hc()
			defer hc.CloseIdleConnections()
			c, err := Dial(context.Background(), Remote{URL: ts.URL, Client: hc}, Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			args := JSONArgs([]byte(`{"text":"` + benchText + `"}`))
			b.ReportAllocs()
			before := contextSwitches()
			b.ResetTimer()
			for b.Loop() {
				res, err := c.CallTool(context.Background(), "echo", args, CallOptions{})
				if err != nil || len(res.Content) != 1 {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(contextSwitches()-before)/float64(b.N), "ctxsw/op")
		})
	}
}

// contextSwitches is the process's voluntary and involuntary context
// switches so far.
func contextSwitches() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Nvcsw + ru.Nivcsw
}
