package mcpwire

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// The exact _meta every modern request carries for Config{ClientName:
// "n\"ame", ClientVersion: "9"}: capabilities {} and nothing more.
const testMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"n\"ame","version":"9"}`

// testCallMeta is what a tools/call carries instead: the tasks extension
// declared, nothing else.
const testCallMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"n\"ame","version":"9"}`

const discoverOK = `{"jsonrpc":"2.0","id":0,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"2"}}}}`

// connectModern connects to a scripted modern server that answers the
// probe with discover, checking the exact probe line, and returns once
// the listen request is read (its id is 1).
func connectModern(t *testing.T, discover string) (*Client, *script) {
	t.Helper()
	conn, m := newMemory(time.Second, 0)
	s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
	type res struct {
		c   *Client
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := Connect(context.Background(), conn, Config{ClientName: "n\"ame", ClientVersion: "9"})
		done <- res{c, err}
	}()
	want := `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{` + testMeta + `}}}` + "\n"
	if got := s.recv(); got != want {
		t.Fatalf("probe line\n got %q\nwant %q", got, want)
	}
	s.send(discover)
	want = `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{` + testMeta + `},"notifications":{"toolsListChanged":true}}}` + "\n"
	if got := s.recv(); got != want {
		t.Fatalf("listen line\n got %q\nwant %q", got, want)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("connect: %v", r.err)
	}
	return r.c, s
}

// TestModernWire pins every line the client writes in the modern era:
// the probe, the listen stream, tools/list and tools/call with the three
// reserved _meta keys (capabilities {}), no initialize, no answer to a
// server request, no ping, and the stream's cancellation at Close.
func TestModernWire(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s := connectModern(t, discoverOK)
		if c.Era() != EraModern || c.ProtocolVersion() != "2026-07-28" || c.ServerInfo().Name != "modern" || c.Initialize() != nil {
			t.Fatalf("era %v version %q info %+v", c.Era(), c.ProtocolVersion(), c.ServerInfo())
		}
		s.send(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`)

		ctx := context.Background()
		type listed struct {
			tools []Tool
			err   error
		}
		lc := make(chan listed, 1)
		go func() { ts, err := c.ListTools(ctx); lc <- listed{ts, err} }()
		if got, want := s.recv(), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{`+testMeta+`}}}`+"\n"; got != want {
			t.Errorf("tools/list line\n got %q\nwant %q", got, want)
		}
		// A server request: forbidden in this era, and not answered.
		s.send(`{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{}}`)
		s.send(`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","tools":[{"name":"t","inputSchema":{"type":"object"},"outputSchema":true}],"nextCursor":"c"}}`)
		if got, want := s.recv(), `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{`+testMeta+`},"cursor":"c"}}`+"\n"; got != want {
			t.Errorf("second page line\n got %q\nwant %q", got, want)
		}
		s.send(`{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"u","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"public"}}`)
		if r := <-lc; r.err != nil || len(r.tools) != 2 || string(r.tools[0].OutputSchema) != "true" {
			t.Fatalf("list: %+v, %v", r.tools, r.err)
		}
		if n := c.ServerRequests(); n != 1 {
			t.Errorf("server requests counted = %d, want 1", n)
		}

		// list_changed on the stream is the signal; one for another
		// subscription, or none, is dropped.
		s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}`)
		s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		call := func(resp string) (*CallToolResult, error) {
			type out struct {
				r   *CallToolResult
				err error
			}
			oc := make(chan out, 1)
			go func() { r, err := c.CallTool(ctx, "t", JSONArgs([]byte(`{"a":1}`)), CallOptions{}); oc <- out{r, err} }()
			line := s.recv()
			id := line[strings.Index(line, `"id":`)+5 : strings.Index(line, `,"method"`)]
			if want := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"_meta":{"progressToken":` + id + `,` + testCallMeta + `},"name":"t","arguments":{"a":1}}}` + "\n"; line != want {
				t.Errorf("tools/call line\n got %q\nwant %q", line, want)
			}
			s.send(strings.ReplaceAll(resp, "ID", id))
			o := <-oc
			return o.r, o.err
		}
		if r, err := call(`{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}]}}`); err != nil || r.Content[0].Text != "ok" {
			t.Fatalf("call: %+v %v", r, err)
		}
		select {
		case <-c.ToolsChanged():
			t.Error("list_changed off the stream was surfaced")
		default:
		}
		s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`)
		if _, err := call(`{"jsonrpc":"2.0","id":ID,"result":{"resultType":"complete","content":[]}}`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.ToolsChanged():
		default:
			t.Error("list_changed on the stream not surfaced")
		}

		_, err := call(`{"jsonrpc":"2.0","id":ID,"result":{"resultType":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{}}}}}`)
		var ir *InputRequiredError
		if !errors.As(err, &ir) || !errors.Is(err, ErrInputRequired) || len(ir.Requests) != 1 || ir.Requests[0] != "ok (elicitation/create)" {
			t.Errorf("input_required: %v", err)
		}
		_, err = call(`{"jsonrpc":"2.0","id":ID,"result":{"resultType":"later","content":[]}}`)
		var pf *ProtocolFault
		if !errors.As(err, &pf) || pf.Path != "/resultType" || !errors.Is(err, ErrProtocol) {
			t.Errorf("unknown resultType: %v", err)
		}
		_, err = call(`{"jsonrpc":"2.0","id":ID,"error":{"code":-32021,"message":"needs","data":{"requiredCapabilities":{"sampling":{}}}}}`)
		var re *RequirementError
		var rpc *RPCError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), `{"sampling":{}}`) || !errors.As(err, &rpc) || rpc.Code != -32021 {
			t.Errorf("-32021: %v", err)
		}
		if err := c.Ping(ctx); !errors.Is(err, ErrNotInEra) {
			t.Errorf("ping: %v", err)
		}

		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		if got, want := s.recv(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"client closing"}}`+"\n"; got != want {
			t.Errorf("close line\n got %q\nwant %q", got, want)
		}
		s.m.End("")
		<-closed
	})
}

// probeAnswer connects with the probe answered by answer and returns
// what Connect made of it; when the client falls back, the scripted
// legacy server completes the handshake.
func probeAnswer(t *testing.T, cfg Config, answer string) (*Client, error) {
	t.Helper()
	conn, m := newMemory(time.Second, 0)
	s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
	type res struct {
		c   *Client
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := Connect(context.Background(), conn, cfg)
		done <- res{c, err}
	}()
	s.recv()
	if answer != "" {
		s.send(answer)
	}
	lines := make(chan string, 4)
	go func() {
		for {
			l, err := s.in.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				s.m.End("")
			}
			return r.c, r.err
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			if strings.Contains(l, `"method":"initialize"`) {
				s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"old","version":"1"}}}`)
				if answer == "" {
					// The late answer to the probe: ignored.
					s.send(discoverOK)
				}
			}
		}
	}
}

func TestProbeOutcomes(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, tt := range []struct {
		name   string
		cfg    Config
		answer string
		era    Era
		check  func(error) bool
	}{
		{name: "legacy -32601", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}`, era: EraLegacy},
		{name: "legacy other error", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"boom"}}`, era: EraLegacy},
		{name: "no answer in time, late answer ignored", cfg: Config{DiscoverTimeout: 5 * time.Second}, era: EraLegacy},
		{name: "-32022 naming 2026-07-28", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"no","data":{"supported":["2026-07-28"]}}}`, era: EraModern},
		{name: "-32022 naming a legacy revision", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"no","data":{"supported":["2025-06-18"]}}}`, era: EraLegacy},
		{name: "-32022 naming only unknown revisions", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"no","data":{"supported":["2099-01-01"]}}}`,
			check: func(err error) bool {
				var ve *VersionError
				return errors.As(err, &ve) && ve.Supported[0] == "2099-01-01" && errors.Is(err, ErrVersion)
			}},
		// go-sdk v1.8.0 answers discover with the revisions it speaks,
		// all of the initialize era: the client initializes.
		{name: "discover naming only legacy revisions", answer: `{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":["2025-11-25","2025-06-18"],"capabilities":{}}}`, era: EraLegacy},
		{name: "modern required, discover naming only legacy revisions", cfg: Config{Era: EraModern}, answer: `{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":["2025-11-25"],"capabilities":{}}}`,
			check: func(err error) bool { return errors.Is(err, ErrVersion) }},
		{name: "discover naming only unknown revisions", answer: `{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":["2099-01-01"],"capabilities":{}}}`,
			check: func(err error) bool { return errors.Is(err, ErrVersion) }},
		{name: "discover naming no revision", answer: `{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":[],"capabilities":{}}}`,
			check: func(err error) bool {
				return errors.Is(err, ErrVersion) && strings.Contains(err.Error(), "supports protocol versions []")
			}},
		{name: "-32021", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32021,"message":"no","data":{"requiredCapabilities":{"roots":{}}}}}`,
			check: func(err error) bool {
				var re *RequirementError
				return errors.As(err, &re) && strings.Contains(err.Error(), `{"roots":{}}`) && errors.Is(err, ErrDead)
			}},
		{name: "-32020", answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32020,"message":"mismatch"}}`,
			check: func(err error) bool { var re *RequirementError; return errors.As(err, &re) }},
		// A server that answers every method it does not know with an
		// empty result (the conformance suite's mock servers do) is met
		// with initialize; a modern client refuses it.
		{name: "empty discover result", answer: `{"jsonrpc":"2.0","id":0,"result":{}}`, era: EraLegacy},
		{name: "modern required, empty discover result", cfg: Config{Era: EraModern}, answer: `{"jsonrpc":"2.0","id":0,"result":{}}`,
			check: func(err error) bool { return errors.Is(err, ErrProtocol) }},
		{name: "malformed discover result", answer: `{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":"2026-07-28","capabilities":{}}}`,
			check: func(err error) bool { return errors.Is(err, ErrProtocol) }},
		{name: "modern required, legacy server", cfg: Config{Era: EraModern}, answer: `{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}`,
			check: func(err error) bool { var rpc *RPCError; return errors.As(err, &rpc) && rpc.Code == -32601 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				c, err := probeAnswer(t, tt.cfg, tt.answer)
				if tt.check != nil {
					if err == nil || !tt.check(err) {
						t.Errorf("err = %v", err)
					}
					if c != nil {
						c.Close()
					}
					return
				}
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				if c.Era() != tt.era {
					t.Errorf("era = %v, want %v", c.Era(), tt.era)
				}
				if tt.era == EraLegacy && (c.Initialize() == nil || c.ServerInfo().Name != "old") {
					t.Errorf("legacy handshake not done: %+v", c.Initialize())
				}
				closed := make(chan struct{})
				go func() { c.Close(); close(closed) }()
				<-closed
			})
		})
	}
}

// A legacy initialize answer naming the modern revision is refused: it
// is reachable only through server/discover.
func TestInitializeNamingModernRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		_, err := probeAnswerInit(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"`+mcpproto.ModernVersion+`","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Offered != mcpproto.ModernVersion {
			t.Fatalf("err = %v", err)
		}
	})
}

func probeAnswerInit(t *testing.T, initAnswer string) (*Client, error) {
	conn, m := newMemory(time.Second, 0)
	s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
	errc := make(chan error, 1)
	go func() { _, err := Connect(context.Background(), conn, Config{}); errc <- err }()
	s.refuseProbe()
	s.recv()
	s.send(initAnswer)
	return nil, <-errc
}

// A modern listing's ttlMs is a re-list cadence: ToolsChanged fires when
// it passes (floored at 1 s), and Close stops it.
func TestModernRelistCadence(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		c, s := connectModern(t, discoverOK)
		list := func(ttl string) {
			done := make(chan error, 1)
			go func() { _, err := c.ListTools(context.Background()); done <- err }()
			line := s.recv()
			id := line[strings.Index(line, `"id":`)+5 : strings.Index(line, `,"method"`)]
			s.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[],"ttlMs":` + ttl + `,"cacheScope":"private"}}`)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		list("5000")
		start := time.Now()
		<-c.ToolsChanged()
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("re-list after %v, want 5s", d)
		}
		list("1")
		start = time.Now()
		<-c.ToolsChanged()
		if d := time.Since(start); d != minRelist {
			t.Errorf("re-list after %v, want the floor %v", d, minRelist)
		}
		list("0") // no cadence
		list("60000")
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		s.recv() // the listen stream's cancellation
		s.m.End("")
		<-closed
		// On the fake clock the two minutes pass as soon as every
		// goroutine is blocked: a cadence timer left running would fire
		// within them (its last ttl was one minute).
		select {
		case <-c.ToolsChanged():
			t.Error("re-list cadence ran after Close")
		case <-time.After(2 * time.Minute):
		}
	})
}

// Server requests in the modern era are bounded: past MaxServerRequests
// the server is dead with ErrProtocol.
func TestModernServerRequestBound(t *testing.T) {
	defer leakcheck.Check(t)()
	inBubble(t, func(t *testing.T) {
		conn, m := newMemory(time.Second, 0)
		s := &script{t: t, m: m, in: bufio.NewReader(m.Stdin)}
		done := make(chan *Client, 1)
		go func() {
			c, err := Connect(context.Background(), conn, Config{MaxServerRequests: 2})
			if err != nil {
				t.Errorf("connect: %v", err)
			}
			done <- c
		}()
		s.recv()
		s.send(strings.Replace(discoverOK, `"listChanged":true`, `"listChanged":false`, 1))
		c := <-done
		for i := range 3 {
			s.send(`{"jsonrpc":"2.0","id":"r` + strconv.Itoa(i) + `","method":"roots/list"}`)
		}
		<-c.Done()
		if err := c.Err(); !errors.Is(err, ErrProtocol) || c.ServerRequests() != 3 {
			t.Errorf("err %v after %d requests", err, c.ServerRequests())
		}
		s.m.End("")
		c.Close()
	})
}
