// Command client is the MCP client the official conformance suite
// (@modelcontextprotocol/conformance) runs as its --command: capbridge
// as a user runs it. It takes the scenario's server URL as its last
// argument and the scenario from MCP_CONFORMANCE_SCENARIO (and its data
// from MCP_CONFORMANCE_CONTEXT), writes a capbridge.toml naming that one
// server as an operator would, starts a real `capbridge serve`, and makes
// the scenario's tool calls through the capwire Go client, as a
// generated façade does. Authorization goes through capbridge's own
// flows: a server that needs a person's login is logged into with
// `capbridge login`, whose browser is this program run as
// `client browse URL` (it fetches the authorization URL and follows its
// redirect to capbridge's loopback listener), as the person would.
//
// The capbridge binary is $CAPBRIDGE_BIN, else the one beside this
// program, else capbridge on PATH.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
)

// The server's name in the config this program writes.
const serverName = "server"

// Bounds. The suite gives a scenario 30 s; everything here ends sooner.
const (
	scenarioTime = 25 * time.Second
	stopWait     = 5 * time.Second
	browseWait   = 10 * time.Second
	statusPoll   = 50 * time.Millisecond
	// maxLogins bounds the logins of one scenario: the first, then a
	// step-up for each call refused for want of scopes.
	maxLogins = 3
)

// cimdURL is the client ID metadata document the operator of this
// capbridge publishes (the suite's fixed URL): used as the client_id
// where an authorization server supports such documents.
const cimdURL = "https://conformance-test.local/client-metadata.json"

func main() {
	if len(os.Args) == 3 && os.Args[1] == "browse" {
		os.Exit(browse(os.Args[2]))
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: client SERVER_URL (run by the MCP conformance suite), or client browse URL")
		os.Exit(2)
	}
	if err := run(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Getenv("MCP_CONFORMANCE_CONTEXT")); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		os.Exit(1)
	}
}

// scenarioContext is MCP_CONFORMANCE_CONTEXT: what an operator would
// have been given for the scenario (a registered client, a key, an
// enterprise IdP's ID token).
type scenarioContext struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	IDPClientID      string `json:"idp_client_id"`
	IDPIDToken       string `json:"idp_id_token"`
	IDPIssuer        string `json:"idp_issuer"`
	IDPTokenEndpoint string `json:"idp_token_endpoint"`
}

// toolCall is one call a scenario's façade makes.
type toolCall struct {
	tool string
	args map[string]any
}

// calls are the tool calls of each scenario; a scenario not named calls
// the auth scenarios' test-tool.
var calls = map[string][]toolCall{
	"initialize":                          nil, // the handshake and the listing are the scenario
	"tools_call":                          {{tool: "add_numbers", args: map[string]any{"a": 5, "b": 3}}},
	"sse-retry":                           {{tool: "test_reconnection", args: map[string]any{}}},
	"elicitation-sep1034-client-defaults": {{tool: "test_client_elicitation_defaults", args: map[string]any{}}},
}

func callsOf(scenario string) []toolCall {
	if c, ok := calls[scenario]; ok {
		return c
	}
	return []toolCall{{tool: "test-tool", args: map[string]any{}}}
}

func run(serverURL, scenario, rawContext string) error {
	var sc scenarioContext
	if rawContext != "" {
		if err := json.Unmarshal([]byte(rawContext), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTime)
	defer cancel()
	dir, err := os.MkdirTemp("", "capconf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath, err := writeConfig(dir, serverURL, scenario, sc)
	if err != nil {
		return err
	}
	bin, err := capbridgeBin()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	b := &bridge{bin: bin, self: self, cfg: cfgPath, env: env}
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.stop()
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.callAll(ctx, callsOf(scenario))
}

// writeConfig writes the capbridge.toml an operator would write for the
// scenario's server, secrets in files beside it.
func writeConfig(dir, serverURL, scenario string, sc scenarioContext) (string, error) {
	file := func(name, content string) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, []byte(content), 0o600)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[bridge]\ncall_socket = %q\ncontrol_socket = %q\nlog_level = \"info\"\n\n", filepath.Join(dir, "call.sock"), filepath.Join(dir, "control.sock"))
	fmt.Fprintf(&b, "[mcp.%s]\nurl = %q\n", serverName, serverURL)
	// A needs_login server is tried again soon after a login.
	b.WriteString("startup_timeout = \"15s\"\ncall_timeout = \"15s\"\nrestart_backoff = \"100ms\"\nrestart_max = \"500ms\"\n")
	if !strings.HasPrefix(scenario, "auth/") {
		return file("capbridge.toml", b.String())
	}
	fmt.Fprintf(&b, "\n[mcp.%s.oauth]\n", serverName)
	switch {
	case scenario == "auth/cross-app-access-complete-flow":
		// Enterprise-managed authorization: the person's ID token from
		// the IdP, exchanged there for an identity assertion grant.
		secret, err := file("client-secret", sc.ClientSecret)
		if err != nil {
			return "", err
		}
		idToken, err := file("id-token", sc.IDPIDToken)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "grant = \"id_jag\"\nclient_id = %q\nclient_secret_file = %q\nidp_issuer = %q\nidp_client_id = %q\nid_token_file = %q\n",
			sc.ClientID, secret, sc.IDPIssuer, sc.IDPClientID, idToken)
	case sc.PrivateKeyPEM != "":
		key, err := file("client-key.pem", sc.PrivateKeyPEM)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "grant = \"client_credentials\"\nclient_id = %q\nprivate_key_file = %q\n", sc.ClientID, key)
	case scenario == "auth/client-credentials-basic":
		secret, err := file("client-secret", sc.ClientSecret)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "grant = \"client_credentials\"\nclient_id = %q\nclient_secret_file = %q\n", sc.ClientID, secret)
	default:
		// A person's login: with a client registered beforehand when the
		// scenario gives one, else the published client metadata
		// document where the server takes one, else registration.
		b.WriteString("grant = \"authorization_code\"\n")
		fmt.Fprintf(&b, "client_metadata_url = %q\n", cimdURL)
		if sc.ClientID != "" {
			fmt.Fprintf(&b, "client_id = %q\n", sc.ClientID)
		}
		if sc.ClientSecret != "" {
			secret, err := file("client-secret", sc.ClientSecret)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "client_secret_file = %q\n", secret)
		}
	}
	return file("capbridge.toml", b.String())
}

// capbridgeBin finds the capbridge binary: $CAPBRIDGE_BIN, else beside
// this program, else on PATH.
func capbridgeBin() (string, error) {
	if p := os.Getenv("CAPBRIDGE_BIN"); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "capbridge")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("capbridge")
	if err != nil {
		return "", errors.New("no capbridge binary: set CAPBRIDGE_BIN, put capbridge beside this program, or on PATH")
	}
	return p, nil
}

// bridge is the capbridge serve this program runs.
type bridge struct {
	bin, self, cfg string
	env            []string

	cmd    *exec.Cmd
	exited chan struct{}
	line   chan readyLine
	call   string // the call socket
	ctl    string // the control socket
}

type readyLine struct {
	Ready         bool              `json:"ready"`
	CallSocket    string            `json:"call_socket"`
	ControlSocket string            `json:"control_socket"`
	Servers       map[string]string `json:"servers"`
}

func (b *bridge) start(ctx context.Context) error {
	b.cmd = exec.Command(b.bin, "serve", "-c", b.cfg)
	b.cmd.Env = b.env
	b.cmd.Stderr = os.Stderr
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s serve: %w", b.bin, err)
	}
	b.exited = make(chan struct{})
	b.line = make(chan readyLine, 1)
	go func() {
		// The ready line, then whatever else serve prints, to stderr.
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		first := true
		for sc.Scan() {
			if first {
				first = false
				var rl readyLine
				if json.Unmarshal(sc.Bytes(), &rl) == nil && rl.Ready {
					b.line <- rl
					continue
				}
			}
			fmt.Fprintln(os.Stderr, sc.Text())
		}
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	return nil
}

// ready waits for serve's ready line, and logs in when the server needs
// a person's authorization.
func (b *bridge) ready(ctx context.Context) error {
	var rl readyLine
	select {
	case rl = <-b.line:
	case <-b.exited:
		return fmt.Errorf("capbridge serve exited before it was ready: %s", b.cmd.ProcessState)
	case <-ctx.Done():
		return fmt.Errorf("capbridge serve was not ready in time")
	}
	b.call, b.ctl = rl.CallSocket, rl.ControlSocket
	state := rl.Servers[serverName]
	fmt.Fprintf(os.Stderr, "conformance client: %s: %s\n", serverName, state)
	switch {
	case state == "ready":
		return nil
	case strings.HasPrefix(state, "needs_login"):
		return b.login(ctx)
	}
	return fmt.Errorf("the server did not boot: %s", state)
}

// login runs `capbridge login` for the server, this program being the
// person's browser, then waits until serve has picked the login up.
func (b *bridge) login(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, b.bin, "login", "-c", b.cfg, "--browser", b.self+" browse", serverName)
	cmd.Env = b.env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("capbridge login: %w", err)
	}
	for {
		st, err := b.status(ctx)
		if err != nil {
			return err
		}
		switch st.State {
		case "ready":
			return nil
		case "backoff", "failed", "dead", "retired":
			// An attempt after the login failed for another reason than
			// a missing login: a person would read it and stop.
			return fmt.Errorf("after the login the server is %s: %s", st.State, st.Reason)
		}
		select {
		case <-time.After(statusPoll):
		case <-ctx.Done():
			return fmt.Errorf("after the login the server is still %s: %s", st.State, st.Reason)
		}
	}
}

// status is the server's line in capbridge status.
func (b *bridge) status(ctx context.Context) (control.ServerStatus, error) {
	c, err := control.Dial(ctx, b.ctl)
	if err != nil {
		return control.ServerStatus{}, err
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return control.ServerStatus{}, err
	}
	for _, s := range st.Servers {
		if s.Name == serverName {
			return s, nil
		}
	}
	return control.ServerStatus{}, fmt.Errorf("capbridge status names no %s", serverName)
}

// callAll makes the scenario's calls as a façade does, under a grant for
// the server. A call refused because the server wants more scopes than
// the login's token carries is made again after a new login (the step-up
// a person does when status says so), at most maxLogins times.
func (b *bridge) callAll(ctx context.Context, calls []toolCall) error {
	if len(calls) == 0 {
		return nil
	}
	c, err := control.Dial(ctx, b.ctl)
	if err != nil {
		return err
	}
	g, err := c.Grant(ctx, &control.GrantRequest{Servers: map[string][]string{serverName: nil}})
	c.Close()
	if err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	cw, err := capwire.Dial(ctx, b.call, g.Token)
	if err != nil {
		return err
	}
	defer cw.Close()
	for _, tc := range calls {
		for logins := 1; ; logins++ {
			r, err := cw.Call(ctx, serverName, tc.tool, tc.args)
			if err == nil {
				fmt.Fprintf(os.Stderr, "conformance client: %s: isError=%v %q\n", tc.tool, r.IsError, r.Text())
				break
			}
			st, serr := b.status(ctx)
			if serr != nil || st.Login == "" || logins > maxLogins {
				return fmt.Errorf("%s: %w", tc.tool, err)
			}
			fmt.Fprintf(os.Stderr, "conformance client: %s: %v; status says: %s\n", tc.tool, err, st.Login)
			if err := b.login(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop ends serve with SIGTERM, as an operator does, and waits for it.
func (b *bridge) stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(stopWait):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// browse is the person's browser: it fetches the authorization URL and
// follows its redirects, the last of which reaches capbridge login's
// loopback listener with the code.
func browse(u string) int {
	hc := &http.Client{Timeout: browseWait}
	resp, err := hc.Get(u)
	if err != nil {
		fmt.Fprintln(os.Stderr, "browse:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	// The final URL's query carries the code: only where it went is shown.
	at := resp.Request.URL
	fmt.Fprintf(os.Stderr, "browse: %s://%s%s: HTTP %d: %s\n", at.Scheme, at.Host, at.Path, resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
