package bridge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
)

// A key written in a remote server's URL path is redacted wherever
// capbridge writes, as the server's own redactor takes it out of what
// callers see: a log line quoting the URL shows its place only.
func TestSecretsHoldPathKeys(t *testing.T) {
	const key = "k3f9a1c0e7b2d4a6f8e1b7c5d"
	cfg := config.Defaults()
	remote := config.NewServer("web", "")
	remote.Remote = &config.Remote{URL: "https://mcp.example.com/mcp/" + key + "/sse", Transport: config.TransportAuto}
	cfg.Servers = []config.Server{remote, config.NewServer("local", "/bin/true")}
	var out bytes.Buffer
	w := NewSecretWriter(&out, cfg)
	if _, err := w.Write([]byte(`{"error":"POST https://mcp.example.com/mcp/` + key + `/sse: connection refused"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), key) || !strings.Contains(out.String(), "/mcp/[redacted:web url path 2]/sse") {
		t.Errorf("a log line quoting the URL: %s", out.String())
	}
	// The path's words are not keys, nor is anything of a stdio server.
	if got := Secrets(cfg); len(got) != 1 || got["web url path 2"] != key {
		t.Errorf("secrets %q, want the key alone", got)
	}
}

// status shows where a remote server is, without a key in its path.
func TestShownURLHidesPathKeys(t *testing.T) {
	for raw, want := range map[string]string{
		"https://mcp.example.com/mcp/k3f9a1c0e7b2d4a6f8e1b7c5d/sse?key=x": "https://mcp.example.com/mcp/[redacted:url path 2]/sse",
		"https://mcp.example.com/v1/organizations/acme/mcp":               "https://mcp.example.com/v1/organizations/acme/mcp",
	} {
		if got := shownURL(raw); got != want {
			t.Errorf("shownURL(%s) = %s, want %s", raw, got, want)
		}
	}
}
