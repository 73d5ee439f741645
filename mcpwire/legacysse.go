package mcpwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/capbridge/capbridge/internal/sse"
	"github.com/capbridge/capbridge/internal/weborigin"
)

// sseConn is the legacy HTTP+SSE transport (2024-11-05) as a Conn, so
// the stream carrier runs it as it runs a child: Read is the SSE
// stream's message events, each as one line; Write posts each line to
// the endpoint the stream named. It has no read deadline, so one
// goroutine reads it for the client's life (the transport is
// deprecated; this is the simple, safe choice).
//
// Concurrency: Read is called by one goroutine at a time, Write and
// SetWriteDeadline likewise (the Conn contract); the rest by anyone.
type sseConn struct {
	u        *url.URL
	endpoint string
	r        Remote
	hc       *http.Client
	dec      *sse.Decoder
	body     io.ReadCloser
	pending  []byte // the rest of the last event's line, for Read

	ctx    context.Context // the stream's; cancelled by Shutdown
	cancel context.CancelFunc

	wmu sync.Mutex
	wdl time.Time

	endOnce sync.Once
	done    chan struct{}
	reason  error

	shutOnce sync.Once
	exit     Exit
}

// dialSSE opens the SSE stream, waits for its endpoint event (within
// ctx and the handshake timeout) and runs the client over it in the
// legacy era (the transport predates the 2026-07-28 revision).
func dialSSE(ctx context.Context, u *url.URL, r Remote, cfg Config) (*Client, error) {
	cfg.Era = EraLegacy
	c := newClient(cfg)
	conn, err := openSSE(ctx, u, r, c.cfg)
	if err != nil {
		return nil, &DeadError{Reason: err}
	}
	c.car = newStream(c, conn)
	return c.connect(ctx)
}

func openSSE(ctx context.Context, u *url.URL, r Remote, cfg Config) (*sseConn, error) {
	sctx, cancel := context.WithCancel(context.Background())
	s := &sseConn{u: u, r: r, hc: r.Client, ctx: sctx, cancel: cancel, done: make(chan struct{})}
	hctx, hcancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer hcancel()
	// The stream outlives the handshake: it is bound to sctx, and the
	// handshake's deadline only interrupts the wait below (stop says
	// whether it came first).
	stop := context.AfterFunc(hctx, cancel)
	defer stop()
	resp, err := authorizedDo(hctx, s.hc, r.Auth, "GET (HTTP+SSE)", func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(sctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, err
		}
		s.header(req.Header)
		req.Header["Accept"] = hAcceptSSE
		return req, nil
	})
	if err != nil {
		cancel()
		if errors.Is(err, ErrAuthorization) {
			return nil, err
		}
		if hctx.Err() != nil {
			return nil, fmt.Errorf("mcpwire: the SSE stream at %s did not open in time: %w", shownURL(u), hctx.Err())
		}
		return nil, fmt.Errorf("mcpwire: GET %s: %w", shownURL(u), err)
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp) != "text/event-stream" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, errorPreview+8))
		_ = resp.Body.Close()
		cancel()
		return nil, &HTTPError{Method: "GET (HTTP+SSE)", Status: resp.StatusCode, ContentType: shownType(resp), Reason: "the legacy SSE stream did not open", Body: answerPreview(resp, b)}
	}
	s.body = resp.Body
	s.dec = sse.NewDecoder(resp.Body, sse.Limits{MaxLine: cfg.MaxLineBytes + 64, MaxEvent: cfg.MaxLineBytes})
	for {
		ev, err := s.dec.Next()
		if err != nil {
			_ = resp.Body.Close()
			cancel()
			if hctx.Err() != nil {
				return nil, fmt.Errorf("mcpwire: the SSE stream at %s sent no endpoint event in time", shownURL(u))
			}
			return nil, fmt.Errorf("mcpwire: the SSE stream at %s ended before its endpoint event: %w", shownURL(u), err)
		}
		if ev.Type != "endpoint" {
			continue
		}
		ep, err := u.Parse(string(bytes.TrimSpace(ev.Data)))
		if err != nil || weborigin.Of(ep) != weborigin.Of(u) {
			_ = resp.Body.Close()
			cancel()
			return nil, fmt.Errorf("mcpwire: the SSE stream's endpoint %q is not on the stream's origin %s: refused", answerPreview(resp, ev.Data), weborigin.Of(u))
		}
		if !stop() {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("mcpwire: the SSE stream at %s sent no endpoint event in time", shownURL(u))
		}
		s.endpoint = ep.String()
		return s, nil
	}
}

// header puts the operator's headers on a request; authorizedDo adds
// the authorizer's.
func (s *sseConn) header(h http.Header) {
	for k, v := range s.r.Header {
		h[k] = v
	}
}

func (s *sseConn) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		ev, err := s.dec.Next()
		if err != nil {
			s.end(err)
			return 0, io.EOF
		}
		if ev.Type != "message" || len(ev.Data) == 0 {
			continue
		}
		// A message split over data lines is joined by newlines, which
		// JSON takes as whitespace between tokens (a raw newline cannot
		// be inside a string): spaces keep it one line.
		line := append(s.pending[:0], ev.Data...)
		for i, b := range line {
			if b == '\n' {
				line[i] = ' '
			}
		}
		s.pending = append(line, '\n')
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// Write posts each line of p to the endpoint, as a Conn's Write; the
// carrier posts each message by postLine instead, so that a refusal
// fails the call whose message it was.
func (s *sseConn) Write(p []byte) (int, error) {
	s.wmu.Lock()
	dl := s.wdl
	s.wmu.Unlock()
	ctx, cancel := s.ctx, context.CancelFunc(func() {})
	if !dl.IsZero() {
		ctx, cancel = context.WithDeadline(s.ctx, dl)
	}
	defer cancel()
	n := 0
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			i = len(p) - 1
		}
		if err := s.post(ctx, p[:i+1]); err != nil {
			return n, err
		}
		n += i + 1
		p = p[i+1:]
	}
	return n, nil
}

// postLine posts one message, bounded by ctx and the connection's life.
func (s *sseConn) postLine(ctx context.Context, line []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	return s.post(ctx, line)
}

func (s *sseConn) post(ctx context.Context, line []byte) error {
	resp, err := authorizedDo(ctx, s.hc, s.r.Auth, "POST (HTTP+SSE)", func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(line))
		if err != nil {
			return nil, err
		}
		s.header(req.Header)
		req.Header["Content-Type"] = hJSON
		return req, nil
	})
	if err != nil {
		return err
	}
	defer drainBody(resp)
	reason, mt := "", mediaType(resp)
	switch {
	case resp.StatusCode/100 != 2:
		reason = "the endpoint refused a message"
	case resp.StatusCode != http.StatusAccepted && (mt == "text/html" || mt == "application/xhtml+xml"):
		// The 2024-11-05 transport leaves the acceptance's body open:
		// servers send 202 with text, HTML included (Express's send()),
		// or nothing. But a page under another 2xx is no acceptance: a
		// login page or a proxy's, and the reply the call waits for on
		// the stream will never come.
		reason = "an HTML page is no acceptance of a message"
	default:
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorPreview+8))
	return &HTTPError{Method: "POST (HTTP+SSE)", Status: resp.StatusCode, ContentType: shownType(resp), Reason: reason, Body: answerPreview(resp, b)}
}

func (s *sseConn) SetWriteDeadline(t time.Time) error {
	s.wmu.Lock()
	s.wdl = t
	s.wmu.Unlock()
	return nil
}

// end records why the stream ended, once.
func (s *sseConn) end(err error) {
	s.endOnce.Do(func() {
		why := "the server closed it"
		if !errors.Is(err, io.EOF) {
			why = err.Error()
		}
		s.reason = fmt.Errorf("%w: the SSE stream at %s ended: %s", ErrExited, shownURL(s.u), why)
		close(s.done)
	})
}

func (s *sseConn) Done() <-chan struct{} { return s.done }

func (s *sseConn) EndReason() error {
	select {
	case <-s.done:
		return s.reason
	default:
		return nil
	}
}

func (s *sseConn) StderrTail() []byte { return nil }

func (s *sseConn) transportName() string { return "sse" }

// Shutdown closes the stream (the transport's only way to end a
// session) and lets the idle connections go.
func (s *sseConn) Shutdown() (Exit, error) {
	s.shutOnce.Do(func() {
		start := time.Now()
		s.cancel()
		_ = s.body.Close()
		s.hc.CloseIdleConnections()
		s.end(io.EOF)
		s.exit = Exit{How: ExitDisconnected, Status: "SSE stream closed", Took: time.Since(start)}
	})
	return s.exit, nil
}
