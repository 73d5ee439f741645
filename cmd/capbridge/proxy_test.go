package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// testProxy is an HTTP proxy on loopback, as HTTPS_PROXY and HTTP_PROXY
// name one: CONNECT tunnels (for https) and absolute-form requests (for
// http). It resolves names itself, from hosts (a name to the address
// that serves it), so a server on loopback can be reached by a name that
// is not loopback's, which Go's proxy rules would send directly. It
// records what it was asked for.
type testProxy struct {
	*httptest.Server
	hosts map[string]string

	mu    sync.Mutex
	asked []string // "CONNECT host:port", "POST http://host/path"
	conns sync.WaitGroup
}

func startProxy(t *testing.T, hosts map[string]string) *testProxy {
	t.Helper()
	p := &testProxy{hosts: hosts}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.Close()
		p.conns.Wait()
	})
	return p
}

// dial connects to addr, a name of hosts (with its port) or an address.
func (p *testProxy) dial(ctx context.Context, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if to, ok := p.hosts[host]; ok {
		host = to
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
}

func (p *testProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if r.Method == http.MethodConnect {
		p.asked = append(p.asked, "CONNECT "+r.Host)
	} else {
		p.asked = append(p.asked, r.Method+" "+r.URL.String())
	}
	p.mu.Unlock()
	if r.Method != http.MethodConnect {
		// A forward proxy for plain http: the request as it came, to
		// the host it names.
		tr := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return p.dial(ctx, addr) }}
		defer tr.CloseIdleConnections()
		out := r.Clone(r.Context())
		out.RequestURI = ""
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		fl, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				if fl != nil {
					fl.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	}
	up, err := p.dial(r.Context(), r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	_, _ = rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	_ = rw.Flush()
	p.conns.Add(2)
	go func() { defer p.conns.Done(); _, _ = io.Copy(up, rw); _ = up.(*net.TCPConn).CloseWrite() }()
	go func() { defer p.conns.Done(); _, _ = io.Copy(down, up); _ = down.Close(); _ = up.Close() }()
}

// saw reports whether the proxy was asked for something containing s.
func (p *testProxy) saw(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.asked {
		if strings.Contains(a, s) {
			return true
		}
	}
	return false
}
