package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// orderedArgs encodes key, value pairs as one MessagePack map, in the
// order given, as a hostile program would write them.
func orderedArgs(t *testing.T, kv ...any) msgpack.RawMessage {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kv); i += 2 {
		if err := enc.EncodeString(kv[i].(string)); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// A program tries the guard sidesteps over the call socket, against a
// real server: a case variant of the guarded key beside it (which Go's
// encoding/json and .NET bind to the guarded argument), one element of a
// list outside the prefix, an integer just past a float64's exact range,
// and an array where an optional guard names an object's member. Each is
// refused not_granted at the pointer that broke, before the server sees
// it; the calls within the guards are served.
func TestGuardAttacksOverTheSocket(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg, err := config.Load("capbridge.toml", []byte(`[mcp.t]
command = "/x"
restrict.echo."/text" = { prefix = "/srv/data/" }
restrict.echo."/paths/*" = { prefix = "/srv/data/", optional = true }
restrict.echo."/n" = { max = 9007199254740992, optional = true }
restrict.echo."/opts/mode" = { values = ["safe"], optional = true }
`))
	if err != nil {
		t.Fatal(err)
	}
	s := mcptestServer("t", mcptest.Scenario{Tools: []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{` +
		`"text":{"type":"string"},"paths":{"type":"array","items":{"type":"string"}},"n":{"type":"integer"},` +
		`"opts":{"type":"object","properties":{"mode":{"type":"string"}}}},"required":["text"]}}`)}})
	s.Restrict = cfg.Servers[0].Restrict
	tb := startBridge(t, nil, s)
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()

	for _, tc := range []struct {
		name string
		args msgpack.RawMessage
		path string // "" for a call that is served
	}{
		{"within", orderedArgs(t, "text", "/srv/data/a", "paths", []string{"/srv/data/b"}, "n", int64(1)<<53, "opts", map[string]string{"mode": "safe"}), ""},
		{"case variant beside the key", orderedArgs(t, "text", "/srv/data/a", "TEXT", "/etc/passwd"), "/TEXT"},
		{"case variant alone", orderedArgs(t, "Text", "/etc/passwd"), "/Text"},
		{"one element outside", orderedArgs(t, "text", "/srv/data/a", "paths", []string{"/srv/data/a", "/etc/shadow"}), "/paths/1"},
		{"2^53 + 1", orderedArgs(t, "text", "/srv/data/a", "n", int64(1)<<53+1), "/n"},
		{"array for an object", orderedArgs(t, "text", "/srv/data/a", "opts", []string{"unsafe"}), "/opts"},
	} {
		r, err := c.Call(ctx, "t", "echo", tc.args)
		var d *capwire.Denied
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.path == "" && r.Text() != "/srv/data/a":
			t.Errorf("%s: served %q", tc.name, r.Text())
		case tc.path == "":
		case !errors.As(err, &d) || d.Code != capwire.CodeNotGranted || d.Path != tc.path:
			t.Errorf("%s: result %v, error %v; want not_granted at %s", tc.name, r, err, tc.path)
		}
	}
	c.Close()
	tb.shutdown()
}
