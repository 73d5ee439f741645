package mcpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// The HTTP/1.1 heads of h1Transport's exchanges, written and read
// without net/http's general machinery for the shapes MCP's requests and
// answers take: a request with a known length, and a response whose body
// has a Content-Length. Each is a fast path beside net/http's own code,
// never a second dialect: writeHead writes only requests that
// Request.Write would write the same (its caller falls back to
// Request.Write for any other), and readHead accepts only heads that
// http.ReadResponse reads, giving the same Response (anything else it
// leaves unread, for http.ReadResponse). FuzzWriteHead and FuzzReadHead
// hold them to that against net/http itself.
//
// Why: at one call in flight the exchange is on the call's critical path,
// and net/http's serializer and parser (a sorted copy of the fields per
// request; a textproto reader, a string per line and a map per response)
// were about a tenth of the bridge's CPU per call over loopback.

// defaultUserAgent is what Request.Write sends when a request names no
// User-Agent.
const defaultUserAgent = "Go-http-client/1.1"

// writeHead writes req's head and body to bw as Request.Write would, and
// reports whether it did; it writes nothing, and reports false, for a
// request outside the fast path's shapes: CONNECT, a method or header
// that is not a plain token and visible text, more than maxFastFields
// field names, a host with anything but letters, digits, dots, colons,
// dashes and brackets, an unknown or streamed body length, a close, a
// transfer encoding or trailer. What it writes is byte for byte what
// Request.Write would (the fields in its sorted order too). A body
// shorter or longer than its ContentLength is an error, as it is to
// Request.Write.
func writeHead(bw *bufio.Writer, req *http.Request) (bool, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	if !isToken(req.Method) || req.Method == http.MethodConnect || !plainHost(host) || req.URL.Opaque != "" || req.Close ||
		len(req.TransferEncoding) > 0 || req.Trailer != nil || req.ContentLength < 0 ||
		(req.ContentLength == 0) != (body == nil) {
		return false, nil
	}
	ua, hasUA := req.Header["User-Agent"]
	// The fields go in Request.Write's order, sorted by name: the order
	// of a field's values as a server joins them, when two names fold to
	// one, is then the same.
	var keyBuf [maxFastFields]string
	keys := keyBuf[:0]
	for k, vv := range req.Header {
		if !isToken(k) || len(keys) == maxFastFields {
			return false, nil
		}
		for _, v := range vv {
			if !plainValue(v) {
				return false, nil
			}
		}
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // Request.Write's own
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] <= ' ' || uri[i] >= 0x7f {
			return false, nil
		}
	}

	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	// Request.Write sends the first User-Agent value, none when it is
	// empty, and its own when the header is absent.
	switch {
	case !hasUA:
		bw.WriteString("User-Agent: " + defaultUserAgent + "\r\n")
	case len(ua) > 0 && ua[0] != "":
		writeField(bw, "User-Agent", ua[0])
	}
	// Without a body, POST, PUT and PATCH say 0, and the others
	// nothing (many servers want a length for those three).
	if req.ContentLength > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		bw.WriteString("Content-Length: ")
		var n [20]byte
		bw.Write(strconv.AppendInt(n[:0], req.ContentLength, 10))
		bw.WriteString("\r\n")
	}
	for _, k := range keys {
		for _, v := range req.Header[k] {
			writeField(bw, k, v)
		}
	}
	_, err := bw.WriteString("\r\n")
	if body == nil {
		return true, err
	}
	n, err := io.Copy(bw, io.LimitReader(body, req.ContentLength))
	var more int
	if err == nil && n == req.ContentLength {
		var one [1]byte
		more, _ = body.Read(one[:])
	}
	cerr := body.Close()
	switch {
	case err != nil:
		return true, err
	case n != req.ContentLength:
		return true, errShortBody
	case more > 0:
		return true, errLongBody
	}
	return true, cerr
}

// maxFastFields bounds the field names writeHead sorts on its stack; a
// request with more goes to Request.Write.
const maxFastFields = 24

var (
	errShortBody = errors.New("mcpwire: the request body is shorter than its Content-Length")
	errLongBody  = errors.New("mcpwire: the request body is longer than its Content-Length")
)

// writeField writes "k: v\r\n", v without the blanks around it that
// Request.Write trims.
func writeField(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(strings.Trim(v, " \t"))
	bw.WriteString("\r\n")
}

// readHead reads a response head from br when the whole head is in br's
// buffer (or arrives there) and is one http.ReadResponse reads the same
// way: HTTP/1.1, a status of 200-599 but 204 and 304, CRLF line ends, no
// folded lines, token names, visible values, one Content-Length and no
// Transfer-Encoding or Pragma, to a request other than HEAD. It returns
// nil, consuming nothing, for any other head, for a head longer than br's
// buffer and when the connection ends or fails first: those are
// http.ReadResponse's to read, refuse or report.
func readHead(br *bufio.Reader, req *http.Request) *http.Response {
	if req.Method == http.MethodHead {
		return nil
	}
	head := peekHead(br)
	if head == nil {
		return nil
	}
	resp := parseHead(head, req)
	if resp == nil {
		return nil
	}
	_, _ = br.Discard(len(head))
	if resp.ContentLength == 0 {
		resp.Body = http.NoBody
	} else {
		resp.Body = &lengthBody{r: br, n: resp.ContentLength}
	}
	return resp
}

// peekHead returns the head at the start of br's buffer, through its
// blank line, reading more while the buffer has room. It returns nil as
// soon as a line ends in a bare LF (net/textproto may read it as a line
// end, so the blank line this waits for may never come) or a line is
// complete that the fast path would not take and net/http may refuse as
// it arrives: a status line that is not HTTP/1.1's with three digits, a
// field line that is folded or has no colon; and nil when the head does
// not fit, or the connection ends or fails first. So a server that is
// not speaking HTTP is told so by http.ReadResponse at its first line,
// not when the call's deadline ends the wait for a blank line.
func peekHead(br *bufio.Reader) []byte {
	if _, err := br.Peek(1); err != nil {
		return nil
	}
	// line is where the first line not yet complete starts, from where
	// its end is looked for: each byte is looked at once.
	line, from := 0, 0
	for {
		buf, _ := br.Peek(br.Buffered())
		for {
			j := bytes.IndexByte(buf[from:], '\n')
			if j < 0 {
				from = len(buf)
				break
			}
			at := from + j
			if at == 0 || buf[at-1] != '\r' {
				return nil
			}
			l := buf[line : at-1]
			switch {
			case line == 0:
				if !statusShape(l) {
					return nil
				}
			case len(l) == 0:
				return buf[:at+1]
			case l[0] == ' ' || l[0] == '\t' || bytes.IndexByte(l, ':') < 0:
				return nil
			}
			line, from = at+1, at+1
		}
		if len(buf) == br.Size() {
			return nil
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			return nil
		}
	}
}

// statusShape reports whether l has the shape of an HTTP/1.1 status
// line: the version, a space, three digits, then a space or nothing.
func statusShape[T string | []byte](l T) bool {
	return len(l) >= 12 && string(l[:9]) == "HTTP/1.1 " &&
		isDigit(l[9]) && isDigit(l[10]) && isDigit(l[11]) && (len(l) == 12 || l[12] == ' ')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseHead reads head (through its blank line), or returns nil when
// http.ReadResponse might read it otherwise.
func parseHead(head []byte, req *http.Request) *http.Response {
	s := string(head) // one string: every name and value is a piece of it
	line, rest, _ := strings.Cut(s, "\r\n")
	// "HTTP/1.1 200 OK": http.ReadResponse's Status is what follows the
	// first space.
	if !statusShape(line) || !validValue(line[12:]) {
		return nil
	}
	status := line[9:]
	code := int(status[0]-'0')*100 + int(status[1]-'0')*10 + int(status[2]-'0')
	if code < 200 || code > 599 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}

	// Count the fields first: one map, one slice of values.
	fields := strings.Count(rest, "\r\n") - 1
	if fields < 0 {
		return nil
	}
	h := make(http.Header, fields)
	vals := make([]string, fields)
	for {
		line, rest, _ = strings.Cut(rest, "\r\n")
		if line == "" {
			break
		}
		// A name that is a token cannot start a folded line, and a
		// value of visible text holds no line end.
		k, v, ok := strings.Cut(line, ":")
		if !ok || !isToken(k) || !validValue(v) {
			return nil
		}
		k = canonicalKey(k)
		v = strings.Trim(v, " \t")
		if vv := h[k]; vv != nil {
			h[k] = append(vv, v)
		} else {
			h[k], vals = vals[:1:1], vals[1:]
			h[k][0] = v
		}
	}
	if _, ok := h["Transfer-Encoding"]; ok {
		return nil
	}
	if _, ok := h["Pragma"]; ok {
		return nil
	}
	cl := h["Content-Length"]
	if len(cl) != 1 {
		return nil
	}
	n, err := strconv.ParseUint(cl[0], 10, 63)
	if err != nil {
		return nil
	}
	resp := &http.Response{
		Status: status, StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(n), Request: req,
	}
	// A close among the Connection header's tokens ends the connection
	// after this response; http.ReadResponse then drops the header.
	for _, v := range h["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			if asciiEqualFold(strings.Trim(t, " \t"), "close") {
				resp.Close = true
			}
		}
	}
	if resp.Close {
		delete(h, "Connection")
	}
	return resp
}

// canonicalKey is k in canonical form, the common names without
// allocating.
func canonicalKey(k string) string {
	for _, c := range commonKeys {
		if asciiEqualFold(k, c) {
			return c
		}
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}

// asciiEqualFold reports whether a and b are equal with ASCII letters
// folded, as HTTP compares names and tokens (Unicode's folding would
// also match bytes no ASCII letter is).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// commonKeys are the response header names MCP servers and their
// frameworks send on every answer.
var commonKeys = [...]string{
	"Content-Type", "Content-Length", "Date", "Connection", "Keep-Alive",
	"Mcp-Session-Id", "Cache-Control", "Vary", "Server", "X-Powered-By",
	"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Etag",
}

// lengthBody is a response body of a known length read from its
// connection, as net/http's own: io.EOF with its last bytes, and
// io.ErrUnexpectedEOF when the connection ends first.
//
// Concurrency: Read from one goroutine at a time; Close from any, as
// h1Body's.
type lengthBody struct {
	r      *bufio.Reader
	n      int64 // bytes still to read
	closed atomic.Bool
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	switch {
	case err == io.EOF && b.n > 0:
		return n, io.ErrUnexpectedEOF
	case err == nil && b.n == 0:
		return n, io.EOF
	}
	return n, err
}

// Close marks the body closed. What is left unread stays on the
// connection, which h1Body then closes rather than reuses.
func (b *lengthBody) Close() error {
	b.closed.Store(true)
	return nil
}

// isToken reports whether s is an RFC 9110 token, as a method or field
// name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !validFieldByte(s[i]) {
			return false
		}
	}
	return true
}

// plainHost reports whether a Host value is one Request.Write sends as
// it is: ASCII letters, digits, dots, dashes, colons and the brackets of
// an IPv6 literal (no zone, nothing that needs Punycode).
func plainHost(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// plainValue reports whether a request header value is one Request.Write
// sends as it is, blanks around it aside: visible ASCII, spaces and tabs.
func plainValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// validFieldByte reports whether c may be in a field name (RFC 9110
// tchar).
func validFieldByte(c byte) bool {
	return c < 0x80 && tokenChars[c]
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// validValue reports whether s may be a field value or reason phrase as
// net/textproto reads them: visible ASCII, space, tab and obs-text.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\t' && (c < ' ' || c == 0x7f) {
			return false
		}
	}
	return true
}
