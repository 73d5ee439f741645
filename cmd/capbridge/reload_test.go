package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
)

// statusOf runs capbridge status --json against the control socket in
// env.
func statusOf(t *testing.T, bin string, env []string) control.Status {
	t.Helper()
	out, errOut, code := runCLI(t, bin, env, "status", "--json")
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errOut)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, out)
	}
	return st
}

// pids is each server's process id in st, by name.
func pids(st control.Status) map[string]int {
	out := map[string]int{}
	for _, s := range st.Servers {
		out[s.Name] = s.PID
	}
	return out
}

// serve --watch applies a saved change once it has held: the added
// server boots, the one left alone keeps its process. capbridge reload
// refuses a config with a mistake, naming file:line, and the running one
// stays; it applies a removal, and the removed server's process ends.
func testReloadAndWatch(t *testing.T, bin string) {
	dir := shortTempDir(t)
	cfg := demoConfig(t, dir, bin, "")
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}
	srv, _ := startServe(t, bin, nil, "serve", "-c", cfg, "--watch")
	demo := pids(statusOf(t, bin, env))["demo"]
	if demo == 0 {
		t.Fatal("no demo pid in status")
	}

	added := string(base) + "\n[mcp.second]\ncommand = \"" + bin + "\"\nargs = [\"demo-server\"]\n"
	if err := os.WriteFile(cfg, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each status is an event; the limit is a backstop.
	limit := time.Now().Add(60 * time.Second)
	var st control.Status
	for {
		st = statusOf(t, bin, env)
		if st.Reloaded != nil && len(st.Servers) == 2 && st.Servers[1].State == "ready" {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("the watch did not apply the added server within 60 s: %+v; stderr:\n%s", st, srv.stderr.String())
		}
	}
	if r := st.Reloaded; r.Trigger != "watch" || strings.Join(r.Added, ",") != "second" || strings.Join(r.Unchanged, ",") != "demo" {
		t.Errorf("reloaded %+v, want second added by the watch, demo unchanged", r)
	}
	second := pids(st)["second"]
	if got := pids(st)["demo"]; got != demo {
		t.Errorf("demo's pid %d after the reload, want its own %d", got, demo)
	}

	// A mistake: refused whole, naming the file and line.
	if err := os.WriteFile(cfg, []byte(added+"comand = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, bin, env, "reload")
	if code != exitError || !strings.Contains(errOut, cfg+":") || !strings.Contains(errOut, "comand") {
		t.Errorf("reload of a config with a mistake: exit %d, %q; want %d naming %s and the key", code, errOut, exitError, cfg)
	}
	if got := pids(statusOf(t, bin, env)); got["demo"] != demo || got["second"] != second {
		t.Errorf("a refused reload changed the servers: %v", got)
	}

	// A removal, through the CLI.
	if err := os.WriteFile(cfg, base, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, bin, env, "reload")
	if code != 0 || !strings.Contains(out, "removed second") {
		t.Fatalf("reload: exit %d, %q, %q", code, out, errOut)
	}
	if got := pids(statusOf(t, bin, env)); len(got) != 1 || got["demo"] != demo {
		t.Errorf("after the removal: %v", got)
	}
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
	demoGone(t, demo)
	demoGone(t, second)
	if !strings.Contains(srv.stderr.String(), `"event":"reload"`) {
		t.Errorf("no reload in the audit trail:\n%s", srv.stderr.String())
	}
}
