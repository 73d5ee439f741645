package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/bridgetest"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/testkit/interop"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// capbridge resources lists what the pinned npm server-everything offers,
// through a real bridge: every resource and template the control plane
// lists, for a person and as JSON; a server without resources has none;
// an unknown server is an error, a missing one a usage error.
func TestResources(t *testing.T) {
	defer leakcheck.Check(t)()
	argv, env := mcptest.Command(mcptest.Scenario{})
	srv := bridgetest.NewServer(t, bridgetest.WithServers(
		bridgetest.Stdio("everything", interop.Command(t, interop.Everything, t.TempDir()), nil),
		bridgetest.Stdio("t", argv, env)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Backstop)
	defer cancel()
	ctl := srv.Control()
	want, err := ctl.Resources(ctx, &control.ResourcesRequest{Server: "everything"})
	ctl.Close()
	if err != nil {
		t.Fatal(err)
	}
	var resources []struct{ URI, Name, MimeType string }
	var templates []struct{ URITemplate, Name string }
	if json.Unmarshal([]byte(want.Resources), &resources) != nil || json.Unmarshal([]byte(want.Templates), &templates) != nil ||
		len(resources) == 0 || len(templates) == 0 {
		t.Fatalf("everything offers %.200s and %.200s", want.Resources, want.Templates)
	}
	sock := srv.ControlSocket()
	cli := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"resources", "--control", sock}, args...), &out, &errOut)
		return out.String(), errOut.String(), code
	}

	out, errOut, code := cli("everything")
	if code != exitOK || !strings.HasPrefix(out, "everything: ") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	lines := strings.Split(out, "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	for _, r := range resources {
		if l := find("  " + r.URI + " "); !strings.Contains(l, r.Name) || !strings.Contains(l, r.MimeType) {
			t.Errorf("resource %s (%s, %s): line %q", r.URI, r.Name, r.MimeType, l)
		}
	}
	for _, tp := range templates {
		if l := find("  " + tp.URITemplate + " "); !strings.Contains(l, tp.Name) {
			t.Errorf("template %s (%s): line %q", tp.URITemplate, tp.Name, l)
		}
	}
	if !strings.Contains(out, "\nresources:\n") || !strings.Contains(out, "\ntemplates:\n") {
		t.Errorf("no sections:\n%s", out)
	}

	out, errOut, code = cli("--json", "everything")
	var got struct{ Resources, Templates []json.RawMessage }
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Resources) != len(resources) || len(got.Templates) != len(templates) {
		t.Errorf("--json: exit %d, stderr %q, stdout %.300s", code, errOut, out)
	}

	// mcptest answers resources/list with -32601: it offers none.
	if out, errOut, code = cli("t"); code != exitOK || out != "t: 0 resource(s), 0 template(s)\n" {
		t.Errorf("a server without resources: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	if _, errOut, code = cli("nope"); code != exitError || !strings.Contains(errOut, "nope") {
		t.Errorf("an unknown server: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code = cli(); code != exitUsage || !strings.Contains(errOut, "name one server") {
		t.Errorf("no server: exit %d, stderr %q", code, errOut)
	}
}

// Server text cannot drive the terminal or break the columns.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain name":         "plain name",
		"évé 数据":             "évé 数据",
		"\x1b[31mred\x1b[0m": "\ufffd[31mred\ufffd[0m",
		"a\tb\nc":            "a\ufffdb\ufffdc",
		"x\u202eevil":        "x\ufffdevil",
	} {
		if got := inert.Line(in); got != want {
			t.Errorf("inert.Line(%q) = %q, want %q", in, got, want)
		}
	}
}
