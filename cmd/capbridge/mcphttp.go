package main

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/internal/loopback"
	"github.com/capbridge/capbridge/internal/mcpserver"
	"github.com/capbridge/capbridge/internal/netlimit"
)

// maxFrontConns bounds the HTTP front's open connections. Its port may
// be reached by anyone on the loopback (or the network, with a token):
// without a bound, clients holding connections open took the process,
// which shares its descriptors with the bridge's sockets and the jails,
// to its descriptor limit, and no request was served. Beyond it,
// connections wait in the kernel's backlog.
const maxFrontConns = 128

// minFrontToken is the shortest bearer token the HTTP front takes: the
// port answers every guess, so a token must be one no one guesses.
const minFrontToken = 16

// httpFront is capbridge mcp's Streamable HTTP listener, opened before the
// bridge boots so a bad address fails at once.
type httpFront struct {
	ln      net.Listener
	local   bool
	token   string
	origins []string
	open    atomic.Int64 // connections open, at most maxFrontConns
	// connState, when set (by tests), is told of each connection's
	// changes of state, as http.Server.ConnState.
	connState func(net.Conn, http.ConnState)
}

// newHTTPFront opens addr. Off the loopback a bearer token is required:
// from tokenFile, else $CAPBRIDGE_MCP_TOKEN.
func newHTTPFront(addr, tokenFile, origins string) (*httpFront, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %v (give host:port, 127.0.0.1:8080)", addr, err)
	}
	local := loopback.Host(host)
	h := &httpFront{local: local, token: os.Getenv("CAPBRIDGE_MCP_TOKEN")}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %v", err)
		}
		h.token = strings.TrimSpace(string(b))
		if h.token == "" {
			return nil, fmt.Errorf("--token-file %s is empty", tokenFile)
		}
	}
	if h.token != "" && len(h.token) < minFrontToken {
		return nil, fmt.Errorf("the bearer token is %d bytes; give one of at least %d (openssl rand -hex 16), as anyone who reaches the port may guess at it", len(h.token), minFrontToken)
	}
	if !local && h.token == "" {
		return nil, fmt.Errorf("--listen %s is not on the loopback: anyone who reaches it could run programs with your servers; "+
			"give a bearer token (--token-file FILE, or $CAPBRIDGE_MCP_TOKEN), or listen on 127.0.0.1", addr)
	}
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			h.origins = append(h.origins, o)
		}
	}
	if h.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("--listen: %v", err)
	}
	if err := boundAsNamed(addr, local, h.ln.Addr()); err != nil {
		h.ln.Close()
		return nil, err
	}
	return h, nil
}

// boundAsNamed checks that a listener on a loopback name (localhost) is
// on the loopback: a name resolves as /etc/hosts says, which may be to
// an address others reach, where no token and a loopback's Host checks
// would be wrong.
func boundAsNamed(addr string, local bool, bound net.Addr) error {
	if ta, ok := bound.(*net.TCPAddr); !local || (ok && ta.IP.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("--listen %s bound %s, which is not on the loopback; listen on 127.0.0.1, or on the address itself with a bearer token", addr, bound)
}

// serve serves srv until ctx ends, then stops taking requests, ends the
// sessions and waits (bounded) for the calls running.
func (h *httpFront) serve(ctx context.Context, srv *mcpserver.Server, log zerolog.Logger) int {
	handler := &mcpserver.HTTP{Server: srv, Token: h.token, Local: h.local, Origins: h.origins}
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx },
		// net/http's own complaints (a failed accept, a handler's
		// panic) go where the rest of the log goes, through its secret
		// filter, not raw to stderr.
		ErrorLog:  stdlog.New(httpLogWriter{log}, "", 0),
		ConnState: h.connState}
	url := "http://" + h.ln.Addr().String() + "/mcp"
	log.Info().Str("url", url).Bool("token", h.token != "").Msg("serving MCP on Streamable HTTP")
	if h.token == "" {
		// Only the loopback gets here without one; on a machine shared
		// with other users, each of them could run programs with these
		// servers.
		log.Warn().Msg("no bearer token: any local user can reach this port; on a shared machine give --token-file FILE or $CAPBRIDGE_MCP_TOKEN")
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(netlimit.New(h.ln, maxFrontConns, &h.open)) }()
	select {
	case err := <-errc:
		log.Error().Err(err).Msg("the HTTP server stopped")
		handler.Close()
		return exitError
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	handler.Close()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn().Err(err).Msg("requests still open at shutdown were cut")
		_ = hs.Close()
	}
	return exitOK
}

// httpLogWriter logs each line net/http writes as a warning.
type httpLogWriter struct{ log zerolog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	w.log.Warn().Str("error", strings.TrimSpace(string(p))).Msg("the HTTP server")
	return len(p), nil
}
