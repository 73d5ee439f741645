package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/lock"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/mcpwire"
)

// tomlServer renders an [mcp.NAME] table running the mcptest child for
// sc, with extra lines.
func tomlServer(name string, sc mcptest.Scenario, extra string) string {
	return "[mcp." + name + "]\n" + mcptest.TOML(sc) + "startup_timeout = \"30s\"\n" + extra + "\n"
}

// reloadable is a bridge serving the config file at path, which its
// Reload reads again as serve's does: the file, with the harness's
// sockets and timings set over it.
type reloadable struct {
	*testBridge
	path    string
	lock    atomic.Pointer[lock.File]         // the lock a reload reads; nil: none
	secrets atomic.Pointer[map[string]string] // what the last reload gave Options.Secrets
}

func startReloadable(t *testing.T, text string) *reloadable {
	t.Helper()
	dir := t.TempDir()
	r := &reloadable{path: filepath.Join(dir, "capbridge.toml")}
	r.write(t, text)
	var tb *testBridge
	var once sync.Once
	ready := make(chan struct{})
	load := func() (*config.Config, *lock.File, error) {
		data, err := os.ReadFile(r.path)
		if err != nil {
			return nil, nil, err
		}
		cfg, err := config.Load(r.path, data)
		if err != nil {
			return nil, nil, err
		}
		<-ready
		b := tb.cfg.Bridge
		cfg.Bridge.CallSocket, cfg.Bridge.ControlSocket = b.CallSocket, b.ControlSocket
		cfg.Bridge.ShutdownGrace, cfg.Bridge.WriteTimeout = b.ShutdownGrace, b.WriteTimeout
		return cfg, r.lock.Load(), config.ResolveSecrets(cfg, config.SecretSources{LookupEnv: os.LookupEnv, ReadFile: config.ReadSecretFile})
	}
	data, err := os.ReadFile(r.path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := config.Load(r.path, data)
	if err == nil {
		err = config.ResolveSecrets(first, config.SecretSources{LookupEnv: os.LookupEnv, ReadFile: config.ReadSecretFile})
	}
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t))
	}
	secrets := func(m map[string]string) { r.secrets.Store(&m) }
	tb = startBridgeOpts(t, Options{Log: log, Audit: log, Reload: load, Secrets: secrets}, nil, first.Servers...)
	once.Do(func() { close(ready) })
	r.testBridge = tb
	return r
}

func (r *reloadable) write(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(r.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A reload adds, removes and replaces a server and changes a policy while
// 32 calls are in flight on two other servers and 2 on the one replaced:
// none of those calls fails, the replaced one retires once its calls are
// done, the busy servers keep their processes, the policy holds for the next call,
// the connection and the grant carry on to the replacement, and the
// removed and replaced processes exit. A config that does not validate,
// or that changes what takes a restart, is refused whole, naming the
// file and line, and nothing changes.
func TestReloadUnderLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	gateDir := t.TempDir()
	gate := filepath.Join(gateDir, "open")
	// The busy servers' share per grant is all of max_inflight, so the
	// grant's 16 held calls leave it room for one more.
	busy := "max_inflight_per_grant = 32"
	base := tomlServer("busy1", mcptest.Scenario{}, busy) + tomlServer("busy2", mcptest.Scenario{}, busy)
	r := startReloadable(t, base+tomlServer("old", mcptest.Scenario{}, "")+tomlServer("swap", mcptest.Scenario{ServerName: "before"}, ""))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := r.control()
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"busy1": nil, "busy2": nil, "old": nil, "swap": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c := r.dial(g.Token)

	// 16 calls held in flight on each busy server.
	var wg sync.WaitGroup
	failed := make(chan error, 34)
	for i := range 32 {
		server := []string{"busy1", "busy2"}[i%2]
		wg.Go(func() {
			res, err := c.Call(ctx, server, "gate", map[string]any{"path": gate, "text": "done"})
			if err == nil && (res.IsError || res.Text() != "done") {
				err = errors.New("result " + res.Text())
			}
			if err != nil {
				failed <- err
			}
		})
	}
	// And 2 on the server the reload replaces: they finish on its old
	// process, which retires only then.
	for range 2 {
		wg.Go(func() {
			res, err := c.Call(ctx, "swap", "gate", map[string]any{"path": gate, "text": "done"})
			if err == nil && (res.IsError || res.Text() != "done") {
				err = errors.New("result " + res.Text())
			}
			if err != nil {
				failed <- err
			}
		})
	}
	eventually(t, "34 calls in flight", func() bool {
		return r.srv("busy1").status().Inflight == 16 && r.srv("busy2").status().Inflight == 16 && r.srv("swap").status().Inflight == 2
	})
	pid := func(name string) int { return r.srv(name).status().PID }
	busy1, busy2, swapBefore := pid("busy1"), pid("busy2"), pid("swap")
	oldServer, oldSwap := r.srv("old"), r.srv("swap")

	// Refused whole: a mistake names its file and line, a [bridge]
	// change that needs a restart is named; nothing changes.
	r.write(t, base+tomlServer("swap", mcptest.Scenario{}, "")+"[mcp.new]\ncomand = \"/bin/x\"\n")
	_, err = ctl.Reload(ctx)
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeBadConfig || !strings.Contains(ce.Message, r.path+":") || !strings.Contains(ce.Message, "comand") {
		t.Fatalf("a config with a mistake: %v, want bad_config naming %s and the key", err, r.path)
	}
	r.write(t, "[bridge]\nmax_frame = \"1MiB\"\n"+base)
	if _, err = ctl.Reload(ctx); !errors.As(err, &ce) || !strings.Contains(ce.Message, "[bridge] max_frame changed, which takes a restart") {
		t.Fatalf("a [bridge] change: %v", err)
	}
	if pid("swap") != swapBefore || r.srv("old") != oldServer || r.srv("new") != nil {
		t.Fatal("a refused reload changed the servers")
	}
	st, err := ctl.Status(ctx)
	if err != nil || st.Reloaded == nil || !strings.Contains(st.Reloaded.Error, "takes a restart") {
		t.Fatalf("status after a refused reload: %+v, %v", st.Reloaded, err)
	}

	// Applied: old removed, new added, swap replaced (its server name,
	// and so its environment, changed), busy2's policy changed.
	r.write(t, tomlServer("busy1", mcptest.Scenario{}, busy)+tomlServer("busy2", mcptest.Scenario{}, busy+"\ntools.deny = [\"add\"]")+
		tomlServer("new", mcptest.Scenario{}, "")+tomlServer("swap", mcptest.Scenario{ServerName: "after"}, ""))
	rl, err := ctl.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rl.Added, []string{"new"}) || !slices.Equal(rl.Removed, []string{"old"}) || !slices.Equal(rl.Replaced, []string{"swap"}) ||
		!slices.Equal(rl.Changed, []string{"busy2"}) || !slices.Equal(rl.Unchanged, []string{"busy1"}) || rl.Trigger != "control" {
		t.Fatalf("reloaded %+v", rl)
	}
	if pid("busy1") != busy1 || pid("busy2") != busy2 {
		t.Errorf("pids %d %d, want the busy servers' own %d %d", pid("busy1"), pid("busy2"), busy1, busy2)
	}
	if st := r.srv("swap").status(); st.State != string(StateReady) || st.PID == swapBefore || st.ServerName != "after" {
		t.Errorf("swap after the reload: %+v, want a new ready process", st)
	}
	// The same connection and grant: the replacement serves it, the
	// policy holds, the removed server is gone.
	if res, err := c.Call(ctx, "swap", "echo", map[string]any{"text": "hi"}); err != nil || res.Text() != "hi" {
		t.Errorf("swap through the old connection: %v, %v", res, err)
	}
	if _, err := c.Call(ctx, "busy2", "add", map[string]any{"a": 1, "b": 2}); !errors.Is(err, capwire.ErrUnknownTool) {
		t.Errorf("busy2's denied tool: %v, want unknown_tool", err)
	}
	if _, err := c.Call(ctx, "busy1", "add", map[string]any{"a": 1, "b": 2}); err != nil {
		t.Errorf("busy1's add: %v", err)
	}
	if _, err := c.Call(ctx, "old", "echo", map[string]any{"text": "x"}); !errors.Is(err, capwire.ErrUnknownCapability) {
		t.Errorf("the removed server: %v, want unknown_capability", err)
	}
	g2, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"new": nil}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "new ready", func() bool { return r.srv("new").status().State == string(StateReady) })
	if res, err := r.dial(g2.Token).Call(ctx, "new", "echo", map[string]any{"text": "new"}); err != nil || res.Text() != "new" {
		t.Errorf("the added server: %v, %v", res, err)
	}
	eventually(t, "the removed server retired", func() bool { return oldServer.status().State == string(StateRetired) })
	if st := oldSwap.status(); st.State != string(StateReady) || st.Inflight != 2 {
		t.Errorf("the replaced server with its calls in flight: %+v, want ready with 2 calls", st)
	}
	// Status lists the old process as draining beside its replacement,
	// and the removed server not at all once it has retired.
	st, err = ctl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Draining) != 1 || st.Draining[0].Name != "swap" || st.Draining[0].PID != swapBefore || st.Draining[0].Inflight != 2 {
		t.Errorf("status's draining servers: %+v, want swap's old process (pid %d) with its 2 calls", st.Draining, swapBefore)
	}

	// Released: every call held across the reloads succeeds.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Errorf("a call in flight across the reload failed: %v", err)
	}
	eventually(t, "the replaced server retired once its calls were done", func() bool { return oldSwap.status().State == string(StateRetired) })
	eventually(t, "status lists no draining server", func() bool {
		st, err := ctl.Status(ctx)
		return err == nil && len(st.Draining) == 0
	})
	if st := r.srv("busy2").status(); st.PID != busy2 || st.Restarts != 0 {
		t.Errorf("busy2 after the calls: %+v", st)
	}
	c.Close()
	ctl.Close()
	r.shutdown()
}

// A reload without a configuration to read is refused.
func TestReloadWithoutConfig(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	ctl := tb.control()
	if _, err := ctl.Reload(context.Background()); !errors.Is(err, &control.Error{Code: control.CodeBadConfig}) {
		t.Errorf("reload: %v, want bad_config", err)
	}
	ctl.Close()
	tb.shutdown()
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"MaxConnsPerUID": "max_conns_per_uid", "AllowedUIDs": "allowed_uids", "CallSocket": "call_socket", "MaxFrame": "max_frame", "Procs": "procs", "MaxUnauthPerUID": "max_unauth_per_uid", "LockMode": "lock_mode"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%s) = %s, want %s", in, got, want)
		}
	}
}

// A call that looked up a server a reload then took out of the set goes
// to the server in force under its name; with none, it is denied
// unknown_capability, and a server drained but still in the set (a second
// reload under way) says try again. Only leave's count keeps a drained
// server from retiring.
func TestEnterDraining(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("a", mcptest.Scenario{}), mcptestServer("b", mcptest.Scenario{}))
	defer tb.shutdown()
	eventually(t, "a and b ready", func() bool {
		return tb.srv("a").status().State == string(StateReady) && tb.srv("b").status().State == string(StateReady)
	})
	a, b := tb.srv("a"), tb.srv("b")
	s, _, refused := tb.enter("a", a)
	if refused != nil || s != a {
		t.Fatalf("enter a: %v, %v", s, refused)
	}
	drained := a.drain()
	select {
	case <-drained:
		t.Fatal("drained with a call entered")
	default:
	}
	if _, _, refused := tb.enter("a", a); refused == nil || refused.denial.Code != capwire.CodeServerUnavailable || !strings.Contains(refused.denial.Message, "try again") {
		t.Errorf("a drained server still in the set: %+v", refused)
	}
	a.leave()
	<-drained
	prev := tb.set.Load()
	tb.set.Store(newServerSet([]*server{b}))
	if _, _, refused := tb.enter("a", a); refused == nil || refused.denial.Code != capwire.CodeUnknownCapability {
		t.Errorf("a server a reload removed: %+v", refused)
	}
	b2 := tb.newServer(*b.cfg(), nil)
	tb.set.Store(newServerSet([]*server{a, b2}))
	b.drain()
	if _, _, refused := tb.enter("b", b); refused == nil || refused.denial.Code != capwire.CodeServerUnavailable || !strings.Contains(refused.denial.Message, "starting") {
		t.Errorf("a replacement that has not booted answers for it: %+v", refused)
	}
	tb.set.Store(prev)
}

// A remote server reloads as a process does: a changed url, or changed
// headers, replaces its session make before break (a call held on the
// old session finishes there), and the stdio server beside it keeps its
// process.
func TestReloadRemote(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the HTTP faces' cleanups
	face := func(name string) string {
		f := mcptest.NewHTTP(mcptest.Scenario{ServerName: name}, mcptest.HTTPOptions{})
		ts := httptest.NewServer(f)
		t.Cleanup(func() {
			f.Close()
			ts.Close()
		})
		return ts.URL + "/mcp"
	}
	urlA, urlB := face("a"), face("b")
	remote := func(url, extra string) string {
		return "[mcp.web]\nurl = " + strconv.Quote(url) + "\nstartup_timeout = \"30s\"\n" + extra + "\n"
	}
	local := tomlServer("local", mcptest.Scenario{}, "")
	r := startReloadable(t, local+remote(urlA, ""))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := r.control()
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"local": nil, "web": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c := r.dial(g.Token)
	localPID := r.srv("local").status().PID
	if st := r.srv("web").status(); st.ServerName != "a" {
		t.Fatalf("web before: %+v", st)
	}

	gate := filepath.Join(t.TempDir(), "open")
	held := make(chan error, 1)
	go func() {
		res, err := c.Call(ctx, "web", "gate", map[string]any{"path": gate, "text": "done"})
		if err == nil && res.Text() != "done" {
			err = errors.New("result " + res.Text())
		}
		held <- err
	}()
	eventually(t, "a call held on the first session", func() bool { return r.srv("web").status().Inflight == 1 })
	first := r.srv("web")

	for _, step := range []struct {
		what, text, want string
	}{
		{"a changed url", local + remote(urlB, ""), "b"},
		{"changed headers", local + remote(urlB, `headers = { "X-Team" = "core" }`), "b"},
	} {
		before := r.srv("web")
		r.write(t, step.text)
		rl, err := ctl.Reload(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if !slices.Equal(rl.Replaced, []string{"web"}) || !slices.Equal(rl.Unchanged, []string{"local"}) {
			t.Errorf("%s: reloaded %+v, want web replaced, local unchanged", step.what, rl)
		}
		now := r.srv("web")
		if now == before || now.status().ServerName != step.want || now.status().State != string(StateReady) {
			t.Errorf("%s: web after: %+v", step.what, now.status())
		}
		if res, err := c.Call(ctx, "web", "echo", map[string]any{"text": "hi"}); err != nil || res.Text() != "hi" {
			t.Errorf("%s: a call on the same connection: %v, %v", step.what, res, err)
		}
	}
	if st := r.srv("local").status(); st.PID != localPID {
		t.Errorf("local's pid %d, want its own %d", st.PID, localPID)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Errorf("the call held across the replacement: %v", err)
	}
	eventually(t, "the first session retired", func() bool { return first.status().State == string(StateRetired) })
	c.Close()
	ctl.Close()
	r.shutdown()
}

// A lock a reload brings holds the next call to the tools it approves,
// and one a reload takes away frees them again; the server keeps its
// process throughout.
func TestReloadLock(t *testing.T) {
	defer leakcheck.Check(t)()
	text := tomlServer("t", mcptest.Scenario{}, "")
	r := startReloadable(t, text)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := r.control()
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"t": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c := r.dial(g.Token)
	pid := r.srv("t").status().PID
	var echo []mcpwire.Tool
	for _, tool := range r.srv("t").current().raw {
		if tool.Name == "echo" {
			echo = append(echo, tool)
		}
	}
	entry, err := lockedServer(lock.Info{Name: "mcptest"}, echo)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		what   string
		lf     *lock.File
		addErr error
	}{
		{"a lock approving echo alone", &lock.File{Version: 1, Servers: map[string]*lock.Server{"t": entry}}, capwire.ErrUnknownTool},
		{"no lock", nil, nil},
	} {
		r.lock.Store(step.lf)
		rl, err := ctl.Reload(ctx)
		if err != nil || !slices.Equal(rl.Changed, []string{"t"}) {
			t.Fatalf("%s: reload %+v, %v; want t changed", step.what, rl, err)
		}
		if _, err := c.Call(ctx, "t", "add", map[string]any{"a": 1, "b": 2}); !errors.Is(err, step.addErr) {
			t.Errorf("%s: add: %v, want %v", step.what, err, step.addErr)
		}
		if res, err := c.Call(ctx, "t", "echo", map[string]any{"text": "hi"}); err != nil || res.Text() != "hi" {
			t.Errorf("%s: echo: %v, %v", step.what, res, err)
		}
		if got := r.srv("t").status().PID; got != pid {
			t.Errorf("%s: pid %d, want the server's own %d", step.what, got, pid)
		}
	}
	c.Close()
	ctl.Close()
	r.shutdown()
}

// Every setting of a server has its place in a reload: a change to it
// either replaces the server (processOf) or changes its policy in place
// (policyOf), never both, unless it is where the server was written or
// a record of what the others hold (Refs and Secrets, whose values are
// in Env and Remote). A field added to config.Server without a place
// fails here, rather than being ignored by every reload.
func TestReloadClassifiesEverySetting(t *testing.T) {
	derived := map[string]bool{"Refs": true, "Secrets": true, "File": true, "Line": true}
	typ := reflect.TypeFor[config.Server]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if !typ.Field(i).IsExported() {
			continue // the reader's own bookkeeping
		}
		var s config.Server
		setNonZero(t, reflect.ValueOf(&s).Elem().Field(i))
		inProcess := !reflect.ValueOf(processOf(s)).Field(i).IsZero()
		inPolicy := !reflect.ValueOf(policyOf(s)).Field(i).IsZero()
		switch {
		case derived[name] && (inProcess || inPolicy):
			t.Errorf("%s is where the server was written or a record of other settings, yet a reload compares it", name)
		case !derived[name] && inProcess == inPolicy:
			t.Errorf("%s: in processOf %v, in policyOf %v; want exactly one", name, inProcess, inPolicy)
		}
	}
}

// setNonZero gives v a value that is not its type's zero.
func setNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				setNonZero(t, v.Field(i))
				return
			}
		}
		t.Fatalf("%s has no field to set", v.Type())
	default:
		t.Fatalf("no non-zero value for a %s", v.Type())
	}
}

// A call waiting in its server's admission queue when a reload denies
// its tool, restricts its arguments or removes its server is held to the
// reload: it does not reach the server once the reload has returned.
// (Its checks were made before it queued; it is checked again once
// admitted.)
func TestReloadHoldsQueuedCalls(t *testing.T) {
	defer leakcheck.Check(t)()
	lim := "max_inflight = 1\nmax_inflight_per_grant = 1\n"
	for _, tc := range []struct {
		name, next, code string
	}{
		{"deny", tomlServer("s", mcptest.Scenario{}, lim+`tools.deny = ["echo"]`), capwire.CodeUnknownTool},
		{"restrict", tomlServer("s", mcptest.Scenario{}, lim+`restrict.echo."/text" = { prefix = "/tmp/" }`), capwire.CodeNotGranted},
		{"remove", "", capwire.CodeUnknownCapability},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "open")
			other := tomlServer("other", mcptest.Scenario{}, "")
			r := startReloadable(t, tomlServer("s", mcptest.Scenario{}, lim)+other)
			defer r.shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), backstop)
			defer cancel()
			ctl := r.control()
			defer ctl.Close()
			c := r.dial(r.grant(map[string][]string{"s": nil}))
			held := make(chan error, 1)
			go func() {
				_, err := c.Call(ctx, "s", "gate", map[string]any{"path": gate, "text": "held"})
				held <- err
			}()
			s := r.srv("s")
			eventually(t, "the gate call holding the slot", func() bool { return s.status().Inflight == 1 })
			queued := make(chan error, 1)
			go func() {
				_, err := c.Call(ctx, "s", "echo", map[string]any{"text": "/etc/shadow"})
				queued <- err
			}()
			eventually(t, "the echo call queued", func() bool { return s.adm.Queued() == 1 })
			r.write(t, tc.next+other)
			if _, err := ctl.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := <-held; err != nil {
				t.Fatalf("the held call: %v", err)
			}
			err := <-queued
			var d *capwire.Denied
			if !errors.As(err, &d) || d.Code != tc.code {
				t.Fatalf("the queued call after the reload: %v; want denied %s", err, tc.code)
			}
		})
	}
}

// A reload that finds its server's supervisor busy re-listing (a server
// that announces tools/list_changed and never answers tools/list) and
// gives up waiting for it still holds the next call to its policy: the
// call is refused until the table is rebuilt under it, never served
// under the old one.
func TestReloadPolicyHoldsWhileRelisting(t *testing.T) {
	defer leakcheck.Check(t)()
	asked := filepath.Join(t.TempDir(), "asked")
	sc := mcptest.Scenario{Relisted: []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`)}, RelistHangs: asked}
	server := func(extra string) string {
		return "[mcp.s]\n" + mcptest.TOML(sc) + "startup_timeout = \"1s\"\n" + extra + "\n"
	}
	r := startReloadable(t, server(""))
	defer r.shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := r.control()
	defer ctl.Close()
	c := r.dial(r.grant(map[string][]string{"s": nil}))
	if _, err := c.Call(ctx, "s", "relist", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the re-listing asked", func() bool { _, err := os.Stat(asked); return err == nil })
	r.write(t, server(`tools.deny = ["echo"]`))
	if _, err := ctl.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.Call(ctx, "s", "echo", map[string]any{"text": "denied now"})
	var d *capwire.Denied
	if !errors.As(err, &d) || (d.Code != capwire.CodeServerUnavailable && d.Code != capwire.CodeUnknownTool) {
		t.Fatalf("echo after the reload that denied it: %v", err)
	}
}

// The call path's side of the above, without the race: once a policy is
// in force, a call is never made under a table built for another.
func TestCallRefusedUnderStaleTable(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}))
	defer tb.shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	defer c.Close()
	if _, err := c.Call(ctx, "t", "echo", map[string]any{"text": "before"}); err != nil {
		t.Fatal(err)
	}
	s := tb.srv("t")
	next := *s.cfg()
	next.ToolsDeny = []string{"echo"}
	s.conf.Store(&next) // as repolicy stores it, the table not rebuilt yet
	_, err := c.Call(ctx, "t", "echo", map[string]any{"text": "after"})
	var d *capwire.Denied
	if !errors.As(err, &d) || d.Code != capwire.CodeServerUnavailable || !strings.Contains(d.Message, "new policy") {
		t.Fatalf("a call under the old table: %v", err)
	}
}

// A reload that rotates a secret (the file a ${file:…} names, changed)
// replaces the server, whose earlier process drains with the earlier
// value: what capbridge writes is redacted of every value a running
// server holds, the earlier ones of servers that drain through later
// reloads included.
func TestReloadKeepsRotatedSecrets(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	tok, gate := filepath.Join(dir, "token"), filepath.Join(dir, "open")
	values := []string{"first-secret-value-1", "second-secret-value-2", "third-secret-value-3"}
	rotate := func(v string) {
		if err := os.WriteFile(tok, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rotate(values[0])
	conf := "[mcp.s]\n" + mcptest.TOML(mcptest.Scenario{}, `TOKEN = "${file:`+tok+`}"`) + "startup_timeout = \"30s\"\n"
	r := startReloadable(t, conf)
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	ctl := r.control()
	g, err := ctl.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{"s": nil}})
	if err != nil {
		t.Fatal(err)
	}
	c := r.dial(g.Token)
	held := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "s", "gate", map[string]any{"path": gate})
		held <- err
	}()
	eventually(t, "a call held on the first server", func() bool {
		select {
		case err := <-held:
			t.Fatalf("the call to hold ended: %v", err)
		default:
		}
		return r.srv("s").status().Inflight == 1
	})
	for i, v := range values[1:] {
		rotate(v)
		rl, err := ctl.Reload(ctx)
		if err != nil || !slices.Contains(rl.Replaced, "s") {
			t.Fatalf("reload %d: %+v, %v; want s replaced", i+1, rl, err)
		}
		got := slices.Collect(maps.Values(*r.secrets.Load()))
		for _, want := range values[:i+2] {
			if !slices.Contains(got, want) {
				t.Errorf("after reload %d the secrets redacted are %q, without %q, which a running server holds", i+1, got, want)
			}
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctl.Close()
	r.shutdown()
}
