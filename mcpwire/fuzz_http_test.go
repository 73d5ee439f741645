package mcpwire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/weborigin"
)

// memTransport is an http.RoundTripper that answers in memory: answer
// takes the requests it wants (non-nil), the face answers the other
// POSTs and DELETEs, and a GET is 405 (no stream for the server's own
// messages). A fuzzed answer's body is finite, so every read of it ends.
type memTransport struct {
	face   http.Handler
	answer func(req *http.Request, body []byte) *http.Response
}

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	if req.Method == http.MethodGet {
		return &http.Response{StatusCode: http.StatusMethodNotAllowed, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	if resp := m.answer(req, body); resp != nil {
		resp.Request = req
		return resp, nil
	}
	rec := httptest.NewRecorder()
	req.Body = io.NopCloser(bytes.NewReader(body))
	m.face.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// typedHTTPError reports whether err is one of the package's own: a
// hostile answer is described, never passed up as a bare error from
// below.
func typedHTTPError(err error) bool {
	var he *HTTPError
	var rpc *RPCError
	return errors.As(err, &he) || errors.As(err, &rpc) ||
		errors.Is(err, ErrProtocol) || errors.Is(err, ErrDead) || errors.Is(err, ErrVersion) ||
		errors.Is(err, ErrMalformed) || errors.Is(err, ErrTimeout)
}

// answeredMethods are the requests whose answer FuzzStreamableAnswer
// writes, by its which%4: the call, and each request of the handshake.
var answeredMethods = [4]string{"tools/call", "initialize", "server/discover", "tools/list"}

// FuzzStreamableAnswer hands the Streamable HTTP carrier a hostile
// answer (status, Content-Type, Mcp-Session-Id and body) to one of
// answeredMethods, "$ID" in the body standing for the request's id; the
// scenario's other requests are answered by mcptest's HTTP face, of the
// legacy era or (which&4) of both. The client must come back with a result or one
// of its typed errors, in a message that is valid UTF-8, and close
// without leaving a goroutine behind (synctest's bubble checks both
// that and that nothing waits forever: its clock runs every wait, the
// resumption's included, out).
func FuzzStreamableAnswer(f *testing.F) {
	ok := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"hi"}]}}`
	for _, s := range []struct {
		which  uint8
		status uint16
		ctype  string
		sess   string
		body   string
	}{
		{0, 200, "application/json", "", ok},
		{4, 200, "application/json", "", ok},
		{3, 200, "application/json", "", `{"jsonrpc":"2.0","id":$ID,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"\u0000"}]}}`},
		{2, 200, "application/json", "", `{"jsonrpc":"2.0","id":$ID,"result":{"supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`},
		{6, 200, "application/json", "", `{"jsonrpc":"2.0","id":$ID,"result":{"supportedVersions":[],"capabilities":{}}}`},
		{0, 200, "text/event-stream", "", "id: 1\ndata: " + ok + "\n\n"},
		{0, 200, "text/event-stream", "", "id: 1\nretry: 5000\n\n"},
		{0, 200, "text/event-stream", "", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: " + ok + "\n\n"},
		{0, 200, "text/event-stream", "", "data: \xff\xfe\n\n"},
		{0, 200, "application/json", "", `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"bad \xff"}}`},
		{0, 200, "application/json", "", `[` + ok + `]`},
		{0, 202, "", "", ""},
		{0, 400, "application/json", "", `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32020,"message":"HeaderMismatch"}}`},
		{0, 401, "text/html", "", "<html>\xc3\x28</html>"},
		{0, 404, "text/plain", "", "gone"},
		{0, 500, "application/json", "", `{"jsonrpc":`},
		{1, 200, "application/json", "s\x01", `{"jsonrpc":"2.0","id":$ID,"result":{}}`},
		{1, 200, "application/json", "abc", `{"jsonrpc":"2.0","id":$ID,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`},
		{1, 404, "text/html", "", "no"},
		{4, 200, "text/event-stream", "", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"resultType\":\"x\"}}\n\n"},
		{0, 200, "application/json; charset=\"utf-8", "", ok},
	} {
		f.Add(s.which, s.status, s.ctype, s.sess, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, which uint8, status uint16, ctype, sess string, body []byte) {
		code := int(status) % 600
		if code < 200 {
			code += 200
		}
		target := answeredMethods[which%4]
		sc := mcptest.Scenario{}
		if which&4 != 0 {
			sc.Era = mcptest.EraModern
		}
		inBubble(t, func(t *testing.T) {
			face := mcptest.NewHTTP(sc, mcptest.HTTPOptions{NoGET: true})
			defer face.Close()
			rt := memTransport{face: face, answer: func(req *http.Request, reqBody []byte) *http.Response {
				id := gjson.GetBytes(reqBody, "id")
				if !id.Exists() || gjson.GetBytes(reqBody, "method").Str != target {
					return nil
				}
				h := http.Header{}
				if ctype != "" {
					h["Content-Type"] = []string{ctype}
				}
				if sess != "" {
					h["Mcp-Session-Id"] = []string{sess}
				}
				b := bytes.ReplaceAll(body, []byte("$ID"), []byte(id.Raw))
				return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: -1}
			}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			c, err := Dial(ctx, Remote{URL: "http://fuzz.test/mcp", Client: &http.Client{Transport: rt}}, Config{})
			if err != nil {
				checkAnswerError(t, "Dial", err)
				return
			}
			if _, err := c.ListTools(ctx); err != nil {
				checkAnswerError(t, "ListTools", err)
			}
			res, err := c.CallTool(ctx, "echo", JSONArgs([]byte(`{"text":"hi"}`)), CallOptions{})
			if err != nil {
				checkAnswerError(t, "CallTool", err)
			} else if res == nil {
				t.Fatal("CallTool returned neither a result nor an error")
			}
			if _, err := c.Close(); err != nil && !typedHTTPError(err) {
				t.Fatalf("Close: %T %v", err, err)
			}
		})
	})
}

func checkAnswerError(t *testing.T, op string, err error) {
	t.Helper()
	if !typedHTTPError(err) {
		t.Fatalf("%s: an untyped error %T: %v", op, err, err)
	}
	if !utf8.ValidString(err.Error()) {
		t.Fatalf("%s: the error is not valid UTF-8: %q", op, err.Error())
	}
}

// FuzzLegacyEndpoint hands the HTTP+SSE transport a hostile stream
// before its endpoint event. The stream opens only on an endpoint of
// the stream's own origin, and every refusal says why in valid UTF-8.
func FuzzLegacyEndpoint(f *testing.F) {
	for _, s := range []string{
		"event: endpoint\ndata: /messages?session=1\n\n",
		"event: endpoint\ndata: http://fuzz.test/messages\n\n",
		"event: endpoint\ndata: http://elsewhere.test/messages\n\n",
		"event: endpoint\ndata: //elsewhere.test/m\n\n",
		"event: endpoint\ndata: https://fuzz.test/m\n\n",
		"event: endpoint\ndata: http://fuzz.test:80/m\n\n",
		"event: endpoint\ndata: http://FUZZ.test/m\n\n",
		"event: endpoint\ndata: http://fuzz.test@elsewhere.test/m\n\n",
		"event: endpoint\ndata: \\\\elsewhere.test\\m\n\n",
		"event: endpoint\ndata: /m\xff\n\n",
		": comment\n\nevent: other\ndata: x\n\nevent: endpoint\ndata: m\n\n",
		"event: endpoint\n",
		"data: " + string(bytes.Repeat([]byte("a"), 300)) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	base, err := url.Parse("http://fuzz.test/sse")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		inBubble(t, func(t *testing.T) {
			hc := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
					Body: io.NopCloser(bytes.NewReader(stream)), Request: req}, nil
			})}
			cfg := Config{}
			cfg.defaults()
			s, err := openSSE(context.Background(), base, Remote{URL: base.String(), Client: hc}, cfg)
			if err != nil {
				if !utf8.ValidString(err.Error()) {
					t.Fatalf("the refusal is not valid UTF-8: %q", err.Error())
				}
				return
			}
			defer s.end(ErrClosed)
			ep, err := url.Parse(s.endpoint)
			if err != nil || weborigin.Of(ep) != weborigin.Of(base) {
				t.Fatalf("endpoint %q accepted for a stream at %s", s.endpoint, base)
			}
		})
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMemTransportIsUsed keeps the in-memory harness honest: through it
// the face answers a whole call, so the fuzz targets' refusals come from
// the answers they are given, not from a harness that cannot connect.
func TestMemTransportIsUsed(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{NoGET: true})
		defer face.Close()
		rt := memTransport{face: face, answer: func(*http.Request, []byte) *http.Response { return nil }}
		c, err := Dial(context.Background(), Remote{URL: "http://fuzz.test/mcp", Client: &http.Client{Transport: rt}}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"in memory"}`)), CallOptions{})
		if err != nil || len(res.Content) != 1 || res.Content[0].Text != "in memory" {
			t.Fatalf("CallTool = %+v, %v", res, err)
		}
		if _, err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if n := face.Requests("POST tools/call"); n != 1 {
			t.Fatalf("the face saw %s tools/call", strconv.Itoa(n))
		}
	})
}
