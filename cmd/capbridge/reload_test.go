package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	st := watchedSecond(t, bin, env, srv, "the added server")
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

// serve --watch applies a save made while the servers boot, once serve
// is ready: the change is measured from the config serve loaded, not
// from the file as it is when the watch starts after the boot. The
// boot is held by the server's shell reading a FIFO, which the test
// opens (so the boot is under way), then saves the config, then
// releases. Such a save was taken for the starting point and never
// applied.
func testWatchSaveDuringBoot(t *testing.T, bin string) {
	dir := shortTempDir(t)
	gate := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "capbridge.toml")
	base := "[bridge]\ncall_socket = \"" + dir + "/call.sock\"\ncontrol_socket = \"" + dir + "/control.sock\"\n\n" +
		"[mcp.demo]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"read line < '" + gate + "' && exec '" + bin + "' demo-server\"]\n"
	if err := os.WriteFile(cfg, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	added := base + "\n[mcp.second]\ncommand = \"" + bin + "\"\nargs = [\"demo-server\"]\n"

	saved := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The open returns once the server's shell has opened the FIFO:
		// serve has loaded its config and is booting.
		w, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			saved <- err
			return
		}
		err = os.WriteFile(cfg, []byte(added), 0o644)
		if _, werr := w.WriteString("go\n"); err == nil {
			err = werr
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		saved <- err
	}()
	// Should the shell never open the FIFO, a reader that comes and
	// goes releases the goroutine waiting to.
	t.Cleanup(func() {
		if r, err := os.OpenFile(gate, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			r.Close()
		}
		<-done
	})

	srv, line := startServe(t, bin, nil, "serve", "-c", cfg, "--watch")
	if err := <-saved; err != nil {
		t.Fatalf("saving the config during the boot: %v", err)
	}
	if !strings.Contains(line, `"servers":{"demo":"ready"}`) {
		t.Fatalf("ready line %s; want the config as loaded, demo alone and ready", line)
	}
	env := []string{"CAPBRIDGE_CONTROL=" + dir + "/control.sock"}
	st := watchedSecond(t, bin, env, srv, "the save made during the boot")
	if r := st.Reloaded; r.Trigger != "watch" || strings.Join(r.Added, ",") != "second" || strings.Join(r.Unchanged, ",") != "demo" {
		t.Errorf("reloaded %+v, want second added by the watch, demo unchanged", r)
	}
	got := pids(st)
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
	demoGone(t, got["demo"])
	demoGone(t, got["second"])
}

// watchedSecond waits until the watch has reloaded the config into a
// second server, ready, and returns the status that says so; what names
// the change for the failure.
func watchedSecond(t *testing.T, bin string, env []string, srv *servedBinary, what string) control.Status {
	t.Helper()
	// Each status is an event; the limit is a backstop.
	limit := time.Now().Add(60 * time.Second)
	for {
		st := statusOf(t, bin, env)
		if st.Reloaded != nil && len(st.Servers) == 2 && st.Servers[1].State == "ready" {
			return st
		}
		if time.Now().After(limit) {
			t.Fatalf("the watch did not apply %s within 60 s: %+v; stderr:\n%s", what, st, srv.stderr.String())
		}
	}
}
