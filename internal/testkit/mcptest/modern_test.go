package mcptest

import (
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// The modern eras on the wire, byte for byte where the server decides
// the bytes: the era pinned by the first request, the discover answer,
// the per-request _meta rule, resultType, the listen stream and its end.
func TestServeModern(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, tt := range []struct {
		name  string
		sc    Scenario
		steps []step
	}{
		{"legacy only: discover is -32601", Scenario{}, []step{
			{`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found: server/discover"}}`}},
		}},
		{"dual-era, pinned modern", Scenario{Era: EraModern, NotifyOnListen: []string{"notifications/tools/list_changed"}, RequestsOnListen: 1, TTLMs: 5}, []step{
			{`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":0,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcptest","version":"0.1.0"}},"cacheScope":"private","capabilities":{"tools":{"listChanged":true}},"supportedVersions":["2026-07-28"],"ttlMs":0}}`}},
			{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
				[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version: request without io.modelcontextprotocol/protocolVersion 2026-07-28","data":{"supported":["2026-07-28"]}}}`}},
			{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
				[]string{`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params: _meta lacks io.modelcontextprotocol/clientCapabilities"}}`}},
			{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[{"type":"text","text":"x"}]}}`}},
			{`{"jsonrpc":"2.0","id":4,"method":"ping","params":{` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found: ping (removed in 2026-07-28)"}}`}},
			{`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`,
				[]string{
					`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":5},"notifications":{"toolsListChanged":true}}}`,
					`{"jsonrpc":"2.0","id":"mcptest-modern-1","method":"ping"}`,
					`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":5}}}`,
				}},
			// Ending the stream answers nothing; the next request does.
			{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`, nil},
			{`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"},` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":6,"error":{"code":-32022,"message":"Unsupported protocol version: initialize after server/discover","data":{"supported":["2026-07-28"]}}}`}},
		}},
		{"dual-era, pinned legacy", Scenario{Era: EraModern}, []step{
			{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`,
				[]string{`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"mcptest","version":"0.1.0"}}}`}},
			{ping, []string{pong}},
		}},
		{"modern only", Scenario{Era: EraModernOnly}, []step{
			{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`,
				[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-era initialize","data":{"supported":["2026-07-28"]}}}`}},
		}},
		{"discover error", Scenario{Era: EraModernOnly, DiscoverError: []byte(`{"code":-32021,"message":"needs sampling","data":{"requiredCapabilities":{"sampling":{}}}}`)}, []step{
			{`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":0,"error":{"code":-32021,"message":"needs sampling","data":{"requiredCapabilities":{"sampling":{}}}}}`}},
		}},
		{"late discover", Scenario{DiscoverLate: true}, []step{
			{`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + modernMeta + `}}`, nil},
			{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`,
				[]string{
					`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"mcptest","version":"0.1.0"}}}`,
					`{"jsonrpc":"2.0","id":0,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcptest","version":"0.1.0"}},"cacheScope":"private","capabilities":{"tools":{"listChanged":true}},"supportedVersions":["2026-07-28"],"ttlMs":0}}`,
				}},
		}},
		{"input_required", Scenario{Era: EraModernOnly, ResultType: "input_required"}, []step{
			{`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + modernMeta + `}}`, []string{"*"}},
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + modernMeta + `}}`,
				[]string{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Proceed?","requestedSchema":{"type":"object","properties":{}}}}},"content":[{"type":"text","text":"x"}]}}`}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startServe(t, tt.sc)
			defer c.stop()
			for _, st := range tt.steps {
				c.send(st.send)
				for _, want := range st.want {
					got := string(c.rawLine())
					if want != "*" && got != want {
						t.Fatalf("after %.120s\n got %s\nwant %s", st.send, got, want)
					}
				}
			}
			c.send(ping)
			if got := string(c.rawLine()); got != pong && !strings.Contains(got, `"id":"p","error"`) {
				t.Errorf("a line nobody expected: %s", got)
			}
		})
	}
}
