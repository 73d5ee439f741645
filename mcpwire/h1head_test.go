package mcpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// Response heads as servers send them, and heads the fast path must leave
// to http.ReadResponse.
var headSeeds = []struct {
	name string
	in   string
	fast bool // readHead reads it
}{
	{"go net/http", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 05 Dec 2026 23:00:00 GMT\r\nContent-Length: 5\r\n\r\nhello", true},
	{"node keep-alive", "HTTP/1.1 200 OK\r\nX-Powered-By: Express\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 2\r\nETag: W/\"2-vyGp6PvFo4RvsFtPoIWeCReyIC8\"\r\nDate: Sat, 05 Dec 2026 23:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n{}", true},
	{"connection close", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, Close\r\n\r\n{}next", true},
	{"session and error", "HTTP/1.1 404 Not Found\r\nmcp-session-id: abc\r\ncontent-length: 0\r\n\r\n", true},
	{"no reason", "HTTP/1.1 202\r\nContent-Length: 0\r\n\r\n", true},
	{"repeated field", "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer a=1\r\nWww-Authenticate: Basic\r\nContent-Length: 3\r\n\r\nabc", true},
	{"blanks around values", "HTTP/1.1 200 OK\r\nContent-Length:\t 4 \r\nX-A:  b \t\r\n\r\nbody", true},
	{"obs-text value", "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n", true},
	{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true},
	{"trailer without chunks", "HTTP/1.1 200 OK\r\nTrailer: X\r\nContent-Length: 1\r\n\r\nx", true},
	{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false},
	{"sse, close-delimited", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {}\n\n", false},
	{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", false},
	{"204", "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", false},
	{"304", "HTTP/1.1 304 Not Modified\r\n\r\n", false},
	{"1xx", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
	{"folded", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", false},
	{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", false},
	{"bare LF ends it", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok", false},
	{"bare LF on a field", "HTTP/1.1 200 OK\r\nX-A: b\nContent-Length: 2\r\n\r\nok", false},
	{"LF inside", "HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 0\r\n\r\n", false},
	{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
	{"lengths differ", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", false},
	{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", false},
	{"pragma", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n", false},
	{"space in name", "HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 0\r\n\r\n", false},
	{"no colon", "HTTP/1.1 200 OK\r\nXA\r\nContent-Length: 0\r\n\r\n", false},
	{"control in value", "HTTP/1.1 200 OK\r\nX-A: a\x01\r\nContent-Length: 0\r\n\r\n", false},
	{"html status line", "<html><body>hello</body></html>\r\n\r\n", false},
	{"truncated head", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", false},
	{"empty", "", false},
}

// TestReadHead reads each seed with the fast path and with net/http, and
// wants the fast path to take exactly the heads it is meant to and read
// each as net/http does.
func TestReadHead(t *testing.T) {
	for _, tc := range headSeeds {
		t.Run(tc.name, func(t *testing.T) {
			fast := compareHead(t, []byte(tc.in), 4096, nil)
			if fast != tc.fast {
				t.Errorf("fast path took it: %v, want %v", fast, tc.fast)
			}
			// Arriving a byte at a time, the head is read the same way.
			if again := compareHead(t, []byte(tc.in), 4096, iotest.OneByteReader); again != fast {
				t.Errorf("a byte at a time the fast path took it: %v; whole: %v", again, fast)
			}
		})
	}
}

// TestReadHeadWaitsForNoMore reads every seed whose head is complete
// (its blank line there, by CRLF or bare LF) from a connection that has
// nothing more to send: readHead must decide without asking for more, as
// a server that keeps the connection open sends nothing after its answer.
func TestReadHeadWaitsForNoMore(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	for _, tc := range headSeeds {
		if !strings.Contains(tc.in, "\n\n") && !strings.Contains(tc.in, "\n\r\n") {
			continue
		}
		// On a live connection, a read past the answer would block.
		r := &failingReader{b: []byte(tc.in), err: errors.New("read past the answer")}
		resp := readHead(bufio.NewReaderSize(r, 4096), req)
		if r.failed {
			t.Errorf("%s: readHead waited for bytes after a complete head", tc.name)
		}
		if (resp != nil) != tc.fast {
			t.Errorf("%s: fast path took it: %v, want %v", tc.name, resp != nil, tc.fast)
		}
	}
}

// TestReadHeadStopsAtABadLine: a line the fast path would not take ends
// its wait as soon as the line is complete, so that a server that is not
// speaking HTTP (or not the HTTP it takes) is answered by
// http.ReadResponse at that line rather than by the call's deadline. For
// a bad status line, net/http refuses there too, reading no further.
func TestReadHeadStopsAtABadLine(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	for _, tc := range []struct {
		in         string
		statusLine bool // net/http refuses at this line
	}{
		{"SSH-2.0-OpenSSH_9.6\r\n", true},
		{"HTTP/1.1 2x0 OK\r\n", true},
		{"HTTP/1.1 20\r\n", true},
		{"\r\n", true},
		{"HTTP/1.0 200 OK\r\n", false},
		{"HTTP/1.1 2000 OK\r\n", false},
		{"HTTP/1.1 200 OK\r\nno colon here\r\n", false},
		{"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n", false},
		{"HTTP/1.1 200 OK\nContent-Length: 0", false},
	} {
		// On a live connection, a read past these bytes would block.
		r := &failingReader{b: []byte(tc.in), err: errors.New("read past the bad line")}
		if resp := readHead(bufio.NewReaderSize(r, 4096), req); resp != nil || r.failed {
			t.Errorf("%q: fast path %v, waited for more: %v", tc.in, resp != nil, r.failed)
		}
		if !tc.statusLine {
			continue
		}
		r = &failingReader{b: []byte(tc.in), err: errors.New("read past the bad line")}
		if _, err := http.ReadResponse(bufio.NewReader(r), req); err == nil || r.failed {
			t.Errorf("%q: net/http: %v, waited for more: %v", tc.in, err, r.failed)
		}
	}
}

// TestReadHeadLongerThanBuffer leaves a head that does not fit in the
// connection's buffer to net/http.
func TestReadHeadLongerThanBuffer(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 200) + "\r\nContent-Length: 0\r\n\r\n"
	if compareHead(t, []byte(in), 64, nil) {
		t.Error("the fast path read a head longer than the buffer")
	}
	if !compareHead(t, []byte(in), 4096, nil) {
		t.Error("the fast path did not read the same head in a buffer it fits")
	}
}

// FuzzReadHead holds readHead to http.ReadResponse: on any bytes,
// arriving whole or a byte at a time into a buffer the head may or may
// not fit, a head it reads is one net/http reads to the same response
// (status, protocol, fields, length, close), body bytes and body error,
// leaving the same bytes after the body; a head it does not read is left
// wholly unconsumed.
func FuzzReadHead(f *testing.F) {
	for _, tc := range headSeeds {
		f.Add([]byte(tc.in), uint16(4096), false)
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), uint16(16), true)
	f.Fuzz(func(t *testing.T, in []byte, size uint16, oneByte bool) {
		var wrap func(io.Reader) io.Reader
		if oneByte {
			wrap = iotest.OneByteReader
		}
		compareHead(t, in, int(size), wrap)
	})
}

// compareHead reads in with readHead through a buffer of size (bufio's
// minimum at least) and checks it against http.ReadResponse as
// FuzzReadHead says; it reports whether readHead read the head.
func compareHead(t *testing.T, in []byte, size int, wrap func(io.Reader) io.Reader) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	var src io.Reader = bytes.NewReader(in)
	if wrap != nil {
		src = wrap(src)
	}
	br := bufio.NewReaderSize(src, size)
	got := readHead(br, req)
	if got == nil {
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, in) {
			t.Fatalf("left to net/http, but %d of %d bytes were consumed", len(in)-len(rest), len(in))
		}
		return false
	}
	wbr := bufio.NewReader(bytes.NewReader(in))
	want, err := http.ReadResponse(wbr, req)
	if err != nil {
		t.Fatalf("the fast path read %q, which net/http refuses: %v", in, err)
	}
	if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
		got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
		got.ContentLength != want.ContentLength || got.Close != want.Close ||
		!reflect.DeepEqual(got.TransferEncoding, want.TransferEncoding) || got.Trailer != nil || want.Trailer != nil {
		t.Fatalf("read %q as\n%+v\nnet/http:\n%+v", in, got, want)
	}
	if !reflect.DeepEqual(got.Header, want.Header) {
		t.Fatalf("read %q with fields %q, net/http %q", in, got.Header, want.Header)
	}
	gb, gerr := io.ReadAll(got.Body)
	wb, werr := io.ReadAll(want.Body)
	if !bytes.Equal(gb, wb) || (gerr == nil) != (werr == nil) || (gerr != nil && !errors.Is(gerr, werr) && !errors.Is(werr, gerr)) {
		t.Fatalf("body of %q: %q, %v; net/http: %q, %v", in, gb, gerr, wb, werr)
	}
	if err := got.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := got.Body.Read(make([]byte, 1)); got.ContentLength > 0 && !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Fatalf("a read after Close: %v", err)
	}
	grest, _ := io.ReadAll(br)
	wrest, _ := io.ReadAll(wbr)
	if !bytes.Equal(grest, wrest) {
		t.Fatalf("after the body of %q: %q; net/http: %q", in, grest, wrest)
	}
	return true
}

// A request as the carrier builds one: a JSON body, the protocol's
// fields and an operator's.
func carrierRequest(t testing.TB, method, url, body string, fields map[string][]string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		req.Header[k] = v
	}
	return req
}

// TestWriteHead writes each request with the fast path and with
// Request.Write, and wants the fast path to take exactly the requests it
// is meant to and send what net/http's would, as a server reads it.
func TestWriteHead(t *testing.T) {
	mcp := map[string][]string{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"},
	}
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		fast bool
	}{
		{"tools/call", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1:8080/mcp?key=v", `{"jsonrpc":"2.0","id":1}`, mcp)
		}, true},
		{"GET stream", func() *http.Request {
			return carrierRequest(t, "GET", "http://h.example/mcp", "", map[string][]string{"Accept": {"text/event-stream"}, "Last-Event-Id": {"7"}})
		}, true},
		{"DELETE, no body", func() *http.Request {
			return carrierRequest(t, "DELETE", "http://[::1]:9/mcp", "", map[string][]string{"Mcp-Session-Id": {"s"}})
		}, true},
		{"operator fields", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{
				"X-API-Key": {" k "}, "Authorization": {"Bearer t"}, "User-Agent": {"capbridge/1"}, "X-Two": {"a", "b"},
			})
		}, true},
		{"empty user agent", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{"User-Agent": {""}})
		}, true},
		{"fields net/http sets itself", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{"Host": {"other"}, "Content-Length": {"99"}})
		}, true},
		{"close", func() *http.Request {
			r := carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", nil)
			r.Close = true
			return r
		}, false},
		{"newline in a value", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{"X-A": {"a\r\nX-Injected: 1"}})
		}, false},
		{"non-ASCII value", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{"X-A": {"café"}})
		}, false},
		{"bad field name", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{"X A": {"b"}})
		}, false},
		{"unicode host", func() *http.Request { return carrierRequest(t, "POST", "http://bücher.example/mcp", "{}", nil) }, false},
		{"CONNECT", func() *http.Request { return carrierRequest(t, "CONNECT", "http://h.example:80", "", nil) }, false},
		{"one field spelled two ways", func() *http.Request {
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", map[string][]string{"x-a": {"1"}, "X-A": {"2"}, "X-a": {"3"}})
		}, true},
		{"too many fields", func() *http.Request {
			many := map[string][]string{}
			for i := range maxFastFields + 1 {
				many["X-F"+strconv.Itoa(i)] = []string{"v"}
			}
			return carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", many)
		}, false},
		{"unknown length", func() *http.Request {
			r := carrierRequest(t, "POST", "http://127.0.0.1/mcp", "", nil)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("{}")), -1
			return r
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fast := compareWrite(t, tc.req(), tc.req()); fast != tc.fast {
				t.Errorf("fast path took it: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// TestWriteHeadBodyLength fails a request whose body is shorter or
// longer than it says, as Request.Write does.
func TestWriteHeadBodyLength(t *testing.T) {
	for _, tc := range []struct {
		length int64
		want   error
	}{{5, errShortBody}, {1, errLongBody}} {
		mk := func() *http.Request {
			req := carrierRequest(t, "POST", "http://127.0.0.1/mcp", "{}", nil)
			req.ContentLength = tc.length
			return req
		}
		if ok, err := writeHead(bufio.NewWriter(io.Discard), mk()); !ok || !errors.Is(err, tc.want) {
			t.Errorf("length %d: writeHead = %v, %v; want true, %v", tc.length, ok, err, tc.want)
		}
		if err := mk().Write(io.Discard); err == nil {
			t.Errorf("length %d: Request.Write wrote it", tc.length)
		}
	}
}

// FuzzWriteHead holds writeHead to Request.Write: for any method, URL,
// two fields and body, a request it writes it writes byte for byte as
// Request.Write does (or both refuse it), and one it does not write, it
// leaves wholly unwritten.
func FuzzWriteHead(f *testing.F) {
	f.Add("POST", "http://127.0.0.1:8080/mcp", "Mcp-Method", "tools/call", "Mcp-Name", "echo", "{}")
	f.Add("GET", "http://h/mcp?a=b", "Last-Event-Id", "1", "Accept", "text/event-stream", "")
	f.Add("DELETE", "http://[::1]/mcp", "X-A", " v\t", "x-a", "w", "")
	f.Add("POST", "http://h/", "User-Agent", "", "Content-Length", "3", "x")
	f.Add("POST", "http://h/", "X-A", "a\nb", "X-B", "c", "x")
	f.Add("CONNECT", "http://h:80", "X-A", "a", "X-B", "b", "")
	f.Fuzz(func(t *testing.T, method, url, key, value, key2, value2, body string) {
		mk := func() *http.Request {
			var r io.Reader
			if body != "" {
				r = strings.NewReader(body)
			}
			req, err := http.NewRequest(method, url, r)
			if err != nil || req.URL.Scheme != "http" || req.URL.Host == "" {
				return nil
			}
			req.Header[key] = []string{value}
			req.Header[key2] = append(req.Header[key2], value2)
			return req
		}
		if mk() == nil {
			return
		}
		compareWrite(t, mk(), mk())
	})
}

// compareWrite writes a with writeHead and b (the same request) with
// Request.Write, and checks them as FuzzWriteHead says; it reports
// whether writeHead wrote a.
func compareWrite(t *testing.T, a, b *http.Request) bool {
	t.Helper()
	var got bytes.Buffer
	bw := bufio.NewWriter(&got)
	ok, err := writeHead(bw, a)
	if !ok {
		if err != nil || bw.Buffered() != 0 {
			t.Fatalf("left to net/http, but wrote %d bytes (%v)", bw.Buffered(), err)
		}
		return false
	}
	var want bytes.Buffer
	werr := b.Write(&want)
	if (err == nil) != (werr == nil) {
		t.Fatalf("writeHead: %v; Request.Write: %v", err, werr)
	}
	if err != nil {
		return true // both refused it
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("wrote\n%q\nRequest.Write:\n%q", got.Bytes(), want.Bytes())
	}
	return true
}

// BenchmarkWriteHead writes the carrier's tools/call request with the
// fast path and with Request.Write.
func BenchmarkWriteHead(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + benchText + `"}}}`
	fields := map[string][]string{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"},
	}
	bw := bufio.NewWriterSize(io.Discard, h1Buffer)
	for _, tc := range []struct {
		name  string
		write func(*http.Request) error
	}{
		{"fast", func(r *http.Request) error { _, err := writeHead(bw, r); return err }},
		{"net-http", func(r *http.Request) error { return r.Write(bw) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := tc.write(carrierRequest(b, "POST", "http://127.0.0.1:8080/mcp", body, fields)); err != nil {
					b.Fatal(err)
				}
				bw.Reset(io.Discard)
			}
		})
	}
}

// BenchmarkReadHead reads a net/http server's answer to a tools/call,
// head and body, with the fast path and with http.ReadResponse.
func BenchmarkReadHead(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + benchText + `"}]}}`
	in := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 05 Dec 2026 23:00:00 GMT\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	src := strings.NewReader(in)
	br := bufio.NewReaderSize(src, h1Buffer)
	buf := make([]byte, 512)
	for _, tc := range []struct {
		name string
		read func() (*http.Response, error)
	}{
		{"fast", func() (*http.Response, error) { return readHead(br, req), nil }},
		{"net-http", func() (*http.Response, error) { return http.ReadResponse(br, req) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(in)
				br.Reset(src)
				resp, err := tc.read()
				if err != nil || resp == nil {
					b.Fatal(err)
				}
				if n, _ := io.ReadFull(resp.Body, buf[:len(body)]); n != len(body) {
					b.Fatal(n)
				}
			}
		})
	}
}
