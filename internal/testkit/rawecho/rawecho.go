// Package rawecho implements the fastest stdio MCP server we know how to
// write, the physical-limit peer of capbridge's benchmarks.
//
// It answers initialize (echoing a supported version), tools/list (one
// tool, echo), tools/call of echo (the "text" argument cut out of the
// request line by a byte scan and copied into a hand-built reply), and
// ping; other requests get -32601 and notifications are ignored. Started
// by ToolsCommand, it lists echo and thousands of generated tools
// (internal/testkit/bigtools) over several pages instead, and calls of any
// of them echo as echo does. One goroutine reads lines and writes each
// reply before reading the next, so benchmarks against it measure the
// client side and the pipes, not the server. It trusts its input to be what capbridge's own client writes
// (compact JSON, one message per line): it is a benchmark peer, not a
// server to expose to anything else.
package rawecho

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/bigtools"
)

// Env is the environment variable that makes a test binary serve instead
// of running its tests (see Command and MaybeServe).
const Env = "CAPBRIDGE_RAWECHO"

// Command returns the argv and extra environment that run rawecho as a
// child by re-executing the current (test) binary, whose TestMain calls
// MaybeServe first.
func Command() (argv, env []string) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{exe, "-test.run=^$", "-test.bench=^$"}, []string{Env + "=1", "GORACE=atexit_sleep_ms=0"}
}

// Start starts rawecho (Command) as a child process with pipes to its
// stdin and stdout and the caller's stderr, in the caller's environment
// without the variables named in drop. Closing stdin ends it; the caller
// then reaps it with cmd.Wait.
func Start(drop ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.ReadCloser, err error) {
	argv, env := Command()
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == Env || slices.Contains(drop, k)
	}), env...)
	cmd.Stderr = os.Stderr
	if stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, nil, err
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, nil, nil, err
	}
	if err = cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin, stdout, nil
}

// ToolsEnv and ListedEnv configure the server ToolsCommand starts.
const (
	ToolsEnv  = "CAPBRIDGE_RAWECHO_TOOLS"
	ListedEnv = "CAPBRIDGE_RAWECHO_LISTED"
)

// PageSize is how many tools one tools/list page of ToolsCommand's server
// holds.
const PageSize = 500

// ToolsCommand is Command for a server that lists n tools: echo, then
// n-1 generated ones (bigtools.Tool 1 … n-1), PageSize to a page. When
// listed is not empty, the server writes to that file, each time it is
// about to send a listing's last page, the time (Unix nanoseconds, in
// decimal): what a benchmark measures a bridge's readiness from.
func ToolsCommand(n int, listed string) (argv, env []string) {
	argv, env = Command()
	env = append(env, ToolsEnv+"="+strconv.Itoa(n))
	if listed != "" {
		env = append(env, ListedEnv+"="+listed)
	}
	return argv, env
}

// HTTPCommand is Command for the HTTP face (ServeHTTP, both eras): the
// child prints its URL as its first stdout line and serves until its
// stdin ends.
func HTTPCommand() (argv, env []string) {
	argv, _ = Command()
	return argv, []string{Env + "=http", "GORACE=atexit_sleep_ms=0"}
}

// HTTP2025Command is HTTPCommand for the face that speaks only the 2025
// era (ServeHTTP2025): server/discover is refused -32601, so every client
// initializes.
func HTTP2025Command() (argv, env []string) {
	argv, _ = Command()
	return argv, []string{Env + "=http-2025", "GORACE=atexit_sleep_ms=0"}
}

// MaybeServe serves on stdin/stdout (or, for HTTPCommand, on a loopback
// port until stdin ends) and exits when the environment asks for it;
// otherwise it returns at once.
func MaybeServe() {
	switch mode := os.Getenv(Env); mode {
	case "":
		return
	case "http", "http-2025":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(1)
		}
		fmt.Printf("http://%s/mcp\n", ln.Addr())
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
		h := ServeHTTP()
		if mode == "http-2025" {
			h = ServeHTTP2025()
		}
		_ = http.Serve(ln, h)
		os.Exit(1)
	}
	srv := server{tools: 1, listed: os.Getenv(ListedEnv)}
	if n, err := strconv.Atoi(os.Getenv(ToolsEnv)); err == nil && n > 1 {
		srv.tools = n
	}
	if err := srv.serve(os.Stdin, os.Stdout); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// server is one rawecho: how many tools it lists, and the file its
// listings' times go to.
type server struct {
	tools  int
	listed string
}

// ServeHTTP is the same server behind Streamable HTTP of both eras,
// stateless: server/discover is answered with a DiscoverResult naming
// 2026-07-28 and the initialize-era revisions, so a client of the
// 2026-07-28 revision speaks it (each request carrying its _meta
// envelope, which the byte scan ignores) and an older one initializes.
// Each POST's message is answered with a JSON body (202 for a
// notification), GET and DELETE with 405 (no stream, no session).
func ServeHTTP() http.Handler { return serveHTTP(true) }

// ServeHTTP2025 is ServeHTTP for the 2025 era alone: server/discover is
// refused -32601.
func ServeHTTP2025() http.Handler { return serveHTTP(false) }

// discovered is the answer to server/discover, after the id.
const discovered = `,"result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rawecho","version":"1"}}}}`

func serveHTTP(modern bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var out []byte
		ok := false
		if id := field(body, `"id":`); modern && id != nil && bytes.Contains(body, []byte(`"method":"server/discover"`)) {
			out = append(append(append(make([]byte, 0, 256), `{"jsonrpc":"2.0","id":`...), id...), discovered...)
			ok = true
		} else {
			out, ok = server{tools: 1}.reply(make([]byte, 0, len(body)+128), body)
		}
		if !ok {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// echoTool is the tool every rawecho lists first.
const echoTool = `{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}`

var versions = [][]byte{[]byte(`"2025-11-25"`), []byte(`"2025-06-18"`), []byte(`"2025-03-26"`), []byte(`"2024-11-05"`)}

// Serve answers requests from r on w until r ends, listing echo alone.
func Serve(r io.Reader, w io.Writer) error { return server{tools: 1}.serve(r, w) }

func (s server) serve(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Longer than any benchmark sends: read the rest and refuse.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			line = nil
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		var ok bool
		if out, ok = s.reply(out[:0], line); !ok {
			continue // a notification, or a response to a request we never make
		}
		out = append(out, '\n')
		if s.listed != "" && lastPage(out) {
			// The benchmark reading it is this server's parent, on the same
			// machine: the wall clock is shared. Written before the page
			// is sent, so the file is there once the bridge can be ready,
			// however late this process runs again after the send.
			_ = os.WriteFile(s.listed, strconv.AppendInt(nil, time.Now().UnixNano(), 10), 0o600)
		}
		if _, err := bw.Write(out); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	}
}

// lastPage reports whether reply is a tools/list result with no next
// page.
func lastPage(reply []byte) bool {
	return bytes.Contains(reply, []byte(`"result":{"tools":[`)) && !bytes.Contains(reply, []byte(`"nextCursor":`))
}

// reply appends the answer to one request line to out, reporting false
// for a line that gets none (a notification, a response).
func (s server) reply(out, line []byte) ([]byte, bool) {
	id := field(line, `"id":`)
	if id == nil {
		return out, false
	}
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	switch {
	case bytes.Contains(line, []byte(`"method":"tools/call"`)):
		out = append(out, `,"result":{"content":[{"type":"text","text":`...)
		if t := field(line, `"text":`); t != nil {
			out = append(out, t...)
		} else {
			out = append(out, `""`...)
		}
		out = append(out, `}]}}`...)
	case bytes.Contains(line, []byte(`"method":"initialize"`)):
		v := versions[0]
		for _, s := range versions {
			if bytes.Contains(line, s) {
				v = s
				break
			}
		}
		out = append(out, `,"result":{"protocolVersion":`...)
		out = append(out, v...)
		out = append(out, `,"capabilities":{"tools":{}},"serverInfo":{"name":"rawecho","version":"1"}}}`...)
	case bytes.Contains(line, []byte(`"method":"tools/list"`)):
		out = append(out, `,"result":`...)
		from := 0
		if c := field(line, `"cursor":`); len(c) > 2 {
			from, _ = strconv.Atoi(string(c[1 : len(c)-1]))
		}
		out = bigtools.Page(out, from, PageSize, s.tools, echoTool)
		out = append(out, '}')
	case bytes.Contains(line, []byte(`"method":"ping"`)):
		out = append(out, `,"result":{}}`...)
	case bytes.Contains(line, []byte(`"method":`)):
		out = append(out, `,"error":{"code":-32601,"message":"Method not found"}}`...)
	default:
		return out, false
	}
	return out, true
}

// field returns the raw JSON value after key in line: a number, or a
// string with its quotes and escapes as they are. It returns nil when the
// key is absent or the value is of another kind.
func field(line []byte, key string) []byte {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return nil
	}
	v := line[i+len(key):]
	if len(v) == 0 {
		return nil
	}
	if v[0] == '"' {
		for j := 1; j < len(v); j++ {
			switch v[j] {
			case '\\':
				j++
			case '"':
				return v[:j+1]
			}
		}
		return nil
	}
	j := 0
	for j < len(v) && (v[j] == '-' || (v[j] >= '0' && v[j] <= '9')) {
		j++
	}
	if j == 0 {
		return nil
	}
	return v[:j]
}
