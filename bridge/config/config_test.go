package config

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/bound"
)

const fullTOML = `# a complete configuration
[bridge]
call_socket = "/run/capbridge/call.sock"
control_socket = "/run/capbridge/control.sock"
call_socket_mode = "0660"
call_socket_group = "sandbox"
allowed_uids = [1000, 1001]
max_frame = "8MiB"
max_connections = 200
max_conn_inflight = 32
procs = 2
max_conns_per_grant = 4
max_conns_per_uid = 100
max_unauth_connections = 32
max_unauth_per_uid = 8
hello_timeout = "1s"
idle_timeout = "1m"
frame_timeout = "5s"
max_partial_bytes = "32MiB"
max_result_text = 65536
write_timeout = "2s"
shutdown_grace = "15s"
surface_budget = "32KiB"
log_format = "json"
log_level = "debug"
audit_values = true
audit_fail = "open"
audit_grant_budget = "1MiB"
metrics_listen = "[::1]:9464"

[mcp.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_TOKEN = "t0k3n" }
inherit_env = ["PATH", "HOME"]
cwd = "/srv/github"
startup_timeout = "90s"
restart = "always"
restart_backoff = "2s"
restart_max = "30s"
call_timeout = "30s"
max_call_timeout = "5m"
max_inflight = 4
max_queue = 0
max_inflight_per_grant = 3
tools.allow = ["create_issue", "list_issues"]

[mcp.fs]
command = "/usr/local/bin/mcp-server-filesystem"
args = ["/srv/data"]

[mcp.fs.tools]
deny = ["write_file"]
`

func TestLoadFull(t *testing.T) {
	cfg, err := Load("capbridge.toml", []byte(fullTOML))
	if err != nil {
		t.Fatal(err)
	}
	want := Bridge{
		CallSocket:       "/run/capbridge/call.sock",
		ControlSocket:    "/run/capbridge/control.sock",
		CallSocketMode:   0o660,
		CallSocketGroup:  "sandbox",
		AllowedUIDs:      []uint32{1000, 1001},
		MaxFrame:         8 << 20,
		MaxConnections:   200,
		MaxConnInflight:  32,
		Procs:            2,
		MaxConnsPerGrant: 4, MaxConnsPerUID: 100,
		MaxUnauthConnections: 32, MaxUnauthPerUID: 8,
		HelloTimeout: time.Second, IdleTimeout: time.Minute, FrameTimeout: 5 * time.Second,
		MaxPartialBytes:  32 << 20,
		MaxResultText:    65536,
		MaxResultData:    DefaultMaxResultData,
		WriteTimeout:     2 * time.Second,
		ShutdownGrace:    15 * time.Second,
		SurfaceBudget:    32 << 10,
		LogFormat:        "json",
		LogLevel:         "debug",
		AuditValues:      true,
		AuditFail:        AuditFailOpen,
		AuditGrantBudget: 1 << 20,
		MetricsListen:    "[::1]:9464",
		LockMode:         LockEnforce,
	}
	if !reflect.DeepEqual(cfg.Bridge, want) {
		t.Errorf("bridge:\n got %+v\nwant %+v", cfg.Bridge, want)
	}
	if len(cfg.Servers) != 2 || cfg.Servers[0].Name != "fs" || cfg.Servers[1].Name != "github" {
		t.Fatalf("servers = %+v, want fs and github in name order", cfg.Servers)
	}
	fs := cfg.Servers[0]
	if fs.Command != "/usr/local/bin/mcp-server-filesystem" || !reflect.DeepEqual(fs.Args, []string{"/srv/data"}) ||
		!reflect.DeepEqual(fs.ToolsDeny, []string{"write_file"}) || fs.ToolsAllow != nil ||
		!reflect.DeepEqual(fs.InheritEnv, bound.InheritEnv()) || fs.CallTimeout != DefaultCallTimeout ||
		fs.MaxInflight != DefaultMaxInflight || fs.MaxQueue != DefaultMaxQueue ||
		fs.MaxInflightPerGrant != DefaultMaxInflight/2 || fs.MaxQueuePerGrant != DefaultMaxQueue/2 || fs.Line != 48 ||
		fs.Restart != RestartOnFailure || fs.RestartBackoff != DefaultRestartBackoff || fs.RestartMax != DefaultRestartMax || fs.File != "capbridge.toml" {
		t.Errorf("fs = %+v", fs)
	}
	gh := cfg.Servers[1]
	wantGH := Server{
		Name: "github", Command: "npx",
		Args:           []string{"-y", "@modelcontextprotocol/server-github"},
		Env:            map[string]string{"GITHUB_TOKEN": "t0k3n"},
		InheritEnv:     []string{"PATH", "HOME"},
		Cwd:            "/srv/github",
		StartupTimeout: 90 * time.Second, CallTimeout: 30 * time.Second, MaxCallTimeout: 5 * time.Minute, CancelGrace: DefaultCancelGrace,
		Restart: RestartAlways, RestartBackoff: 2 * time.Second, RestartMax: 30 * time.Second,
		MaxInflight: 4, MaxQueue: 0, MaxInflightPerGrant: 3, MaxQueuePerGrant: 0,
		ToolsAllow: []string{"create_issue", "list_issues"},
		File:       "capbridge.toml", Line: 31,
	}
	if !reflect.DeepEqual(gh, wantGH) {
		t.Errorf("github:\n got %+v\nwant %+v", gh, wantGH)
	}
}

func TestLoadEmptyIsDefaults(t *testing.T) {
	cfg, err := Load("empty.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Defaults()) {
		t.Errorf("got %+v, want the defaults", cfg)
	}
}

func TestEmptyAllowListAllowsNothing(t *testing.T) {
	cfg, err := Load("c.toml", []byte("[mcp.a]\ncommand = \"/bin/a\"\ntools.allow = []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Servers[0].ToolsAllow; a == nil || len(a) != 0 {
		t.Errorf("ToolsAllow = %#v, want an empty, non-nil list", a)
	}
}

// Every mistake names file:line, the key, and the fix.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		key       string
		msg, fix  string // substrings
	}{
		{"syntax", "[bridge]\ncall_socket = \n", 2, "", "TOML syntax", "toml.io"},
		{"unknown top-level", "[bridges]\n", 1, "bridges", `unknown key "bridges"`, `did you mean "bridge"?`},
		{"unknown bridge key", "[bridge]\n\ncall_sockt = \"/x\"\n", 3, "bridge.call_sockt", "unknown key", `did you mean "call_socket"?`},
		{"unknown server key far from any", "[mcp.a]\ncommand = \"/a\"\nfrobnicate = 1\n", 3, "mcp.a.frobnicate", "unknown key", "known keys here: command, args"},
		{"typo in server key", "[mcp.a]\ncommand = \"/a\"\ncall_timout = \"1s\"\n", 3, "mcp.a.call_timout", "unknown key", `did you mean "call_timeout"?`},
		{"bad duration", "[mcp.a]\ncommand = \"/a\"\ncall_timeout = \"5 sec\"\n", 3, "mcp.a.call_timeout", `bad duration "5 sec"`, `"30s"`},
		{"duration as number", "[mcp.a]\ncommand = \"/a\"\nstartup_timeout = 30\n", 3, "mcp.a.startup_timeout", "must be a duration string, not the number 30", `"30s"`},
		{"bad restart policy", "[mcp.a]\ncommand = \"/a\"\nrestart = \"sometimes\"\n", 3, "mcp.a.restart", `bad value`, "never, on-failure, always"},
		{"backoff above its cap", "[mcp.a]\ncommand = \"/a\"\nrestart_backoff = \"2m\"\n", 3, "mcp.a.restart_backoff", "longer than restart_max 1m0s", "raise restart_max"},
		{"negative duration", "[bridge]\nshutdown_grace = \"-1s\"\n", 2, "bridge.shutdown_grace", "bad duration", ""},
		{"bad name", "[mcp.\"my server\"]\ncommand = \"/a\"\n", 1, "mcp.my server", `bad server name "my server"`, "starts with a letter"},
		{"name starting with digit", "[mcp.9lives]\ncommand = \"/a\"\n", 1, "mcp.9lives", "bad server name", ""},
		{"no command", "[mcp.a]\nargs = [\"x\"]\n", 1, "mcp.a", "no command", "command ="},
		{"shell command line", "[mcp.gh]\ncommand = \"npx -y @scope/pkg\"\n", 2, "mcp.gh.command", "looks like a shell command line", `write command = "npx" and args = ["-y", "@scope/pkg"]`},
		{"args not strings", "[mcp.a]\ncommand = \"/a\"\nargs = [\"x\", 3]\n", 3, "mcp.a.args[1]", "must be a string, not the number 3", ""},
		{"args a string", "[mcp.a]\ncommand = \"/a\"\nargs = \"-v\"\n", 3, "mcp.a.args", "must be an array of strings", ""},
		{"bad env name", "[mcp.a]\ncommand = \"/a\"\nenv = { \"1X\" = \"v\" }\n", 3, "mcp.a.env.1X", `bad variable name "1X"`, ""},
		{"env value not string", "[mcp.a]\ncommand = \"/a\"\n[mcp.a.env]\nN = 1\n", 4, "mcp.a.env.N", "must be a string", ""},
		{"relative cwd", "[mcp.a]\ncommand = \"/a\"\ncwd = \"srv\"\n", 3, "mcp.a.cwd", "not an absolute path", ""},
		{"call beyond max", "[mcp.a]\ncommand = \"/a\"\ncall_timeout = \"20m\"\n", 3, "mcp.a.call_timeout", "longer than max_call_timeout 10m0s", "raise max_call_timeout"},
		{"zero inflight", "[mcp.a]\ncommand = \"/a\"\nmax_inflight = 0\n", 3, "mcp.a.max_inflight", "bad count", "from 1 to"},
		{"allow and deny", "[mcp.a]\ncommand = \"/a\"\ntools.allow = [\"x\"]\ntools.deny = [\"x\"]\n", 3, "mcp.a.tools", `"x" is both allowed and denied`, ""},
		{"unknown tools key", "[mcp.a]\ncommand = \"/a\"\ntools.alow = [\"x\"]\n", 3, "mcp.a.tools.alow", "unknown key", `did you mean "allow"?`},
		{"bad size", "[bridge]\nmax_frame = \"16 MB\"\n", 2, "bridge.max_frame", `bad size "16 MB"`, `"16MiB"`},
		{"size too large", "[bridge]\nmax_frame = \"1GiB\"\n", 2, "bridge.max_frame", "bad size", ""},
		{"size overflow", "[bridge]\nmax_frame = \"99999999999999999GiB\"\n", 2, "bridge.max_frame", "bad size", ""},
		{"world-writable socket", "[bridge]\ncall_socket_mode = \"0666\"\n", 2, "bridge.call_socket_mode", "lets every user on the host connect", "allowed_uids"},
		{"mode without owner rw", "[bridge]\ncall_socket_mode = \"0060\"\n", 2, "bridge.call_socket_mode", "bad socket mode", "owner's read and write"},
		{"relative socket", "[bridge]\ncall_socket = \"call.sock\"\n", 2, "bridge.call_socket", "not an absolute path", ""},
		{"same sockets", "[bridge]\ncall_socket = \"/s\"\ncontrol_socket = \"/s\"\n", 3, "bridge.control_socket", "same path as call_socket", ""},
		{"bad log format", "[bridge]\nlog_format = \"xml\"\n", 2, "bridge.log_format", `bad value "xml"`, "auto, json, console"},
		{"bad uid", "[bridge]\nallowed_uids = [-1]\n", 2, "bridge.allowed_uids", "bad uid", ""},
		{"grant share above the server's", "[mcp.a]\ncommand = \"x\"\nmax_inflight = 2\nmax_inflight_per_grant = 3\n", 4, "mcp.a.max_inflight_per_grant", "more than max_inflight", "at most max_inflight (2)"},
		{"grant queue above the server's", "[mcp.a]\ncommand = \"x\"\nmax_queue = 2\nmax_queue_per_grant = 3\n", 4, "mcp.a.max_queue_per_grant", "more than max_queue", "at most max_queue (2)"},
		{"partial budget too small", "[bridge]\nmax_partial_bytes = 1024\n", 2, "bridge.max_partial_bytes", "out of range", "65536"},
		{"bool as string", "[bridge]\naudit_values = \"yes\"\n", 2, "bridge.audit_values", "must be a boolean", "unquoted"},
		{"mcp not a table", "mcp = 3\n", 1, "mcp", "must be a table", ""},
		{"metrics on every address", "[bridge]\nmetrics_listen = \"0.0.0.0:9464\"\n", 2, "bridge.metrics_listen", "not a loopback address", `"127.0.0.1:9464"`},
		{"metrics on a LAN address", "[bridge]\nmetrics_listen = \"192.168.1.5:9464\"\n", 2, "bridge.metrics_listen", "not a loopback address", "tunnel"},
		{"metrics on a name", "[bridge]\nmetrics_listen = \"localhost:9464\"\n", 2, "bridge.metrics_listen", "not a loopback IP address", `"[::1]:9464"`},
		{"metrics without a port", "[bridge]\nmetrics_listen = \"127.0.0.1\"\n", 2, "bridge.metrics_listen", "not host:port", ""},
		{"metrics on a bad port", "[bridge]\nmetrics_listen = \"127.0.0.1:99999\"\n", 2, "bridge.metrics_listen", "bad port", ""},
		{"metrics on an empty host", "[bridge]\nmetrics_listen = \":9464\"\n", 2, "bridge.metrics_listen", "not a loopback IP address", ""},
		{"NUL in string", "[mcp.a]\ncommand = \"/a\\u0000b\"\n", 2, "mcp.a.command", "NUL", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("capbridge.toml", []byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Load = %v, want an *Error", err)
			}
			if e.File != "capbridge.toml" || e.Line != tc.line || e.Key != tc.key {
				t.Errorf("at %s:%d key %q, want line %d key %q (%v)", e.File, e.Line, e.Key, tc.line, tc.key, e)
			}
			if !strings.Contains(e.Msg, tc.msg) || !strings.Contains(e.Fix, tc.fix) {
				t.Errorf("error %q, want message containing %q and fix containing %q", e, tc.msg, tc.fix)
			}
			if tc.line > 0 && !strings.HasPrefix(e.Error(), "capbridge.toml:"+strconv.Itoa(tc.line)+": ") {
				t.Errorf("Error() = %q, want it to start with file:line", e.Error())
			}
		})
	}
}

// Every mistake in a file is reported at once, in line order.
func TestLoadReportsAllErrors(t *testing.T) {
	doc := "[mcp.b]\ncommand = \"/b\"\ncall_timeout = \"x\"\n[mcp.a]\nargs = []\n[bridge]\nlog_level = \"loud\"\n"
	_, err := Load("c.toml", []byte(doc))
	var l ErrorList
	if !errors.As(err, &l) {
		t.Fatalf("got %v, want an ErrorList", err)
	}
	var lines []int
	for _, e := range l {
		lines = append(lines, e.Line)
	}
	if !reflect.DeepEqual(lines, []int{3, 4, 7}) {
		t.Errorf("error lines = %v, want [3 4 7]:\n%v", lines, err)
	}
}

func TestLoadTooLarge(t *testing.T) {
	_, err := Load("big.toml", make([]byte, maxFileSize+1))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

func TestDefaultSockets(t *testing.T) {
	call, control := DefaultSockets("/run/user/1000/", 1000)
	if call != "/run/user/1000/capbridge/call.sock" || control != "/run/user/1000/capbridge/control.sock" {
		t.Errorf("with XDG: %s %s", call, control)
	}
	call, control = DefaultSockets("", 42)
	if call != "/tmp/capbridge-42/call.sock" || control != "/tmp/capbridge-42/control.sock" {
		t.Errorf("without XDG: %s %s", call, control)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"command", "args", "env"}
	for in, want := range map[string]string{"comand": "command", "arg": "args", "xyzzy": "", "ENV": ""} {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCallSocketModeWithAllowedUIDs(t *testing.T) {
	cfg, err := Load("c.toml", []byte("[bridge]\ncall_socket_mode = \"0666\"\nallowed_uids = [1000]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bridge.CallSocketMode != os.FileMode(0o666) {
		t.Errorf("mode = %o", cfg.Bridge.CallSocketMode)
	}
}
