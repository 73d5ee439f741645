package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/mcpauth"
	"github.com/capbridge/capbridge/mcpwire"
)

// tokenDir is where logins are saved: $XDG_STATE_HOME/capbridge/oauth,
// else ~/.local/state/capbridge/oauth; "" when neither can be told.
func tokenDir() string {
	s, err := mcpauth.DefaultStore()
	if err != nil {
		return ""
	}
	return s.Dir
}

func runLogin(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("login", "capbridge login [-c capbridge.toml | --mcp-config EDITOR-CONFIG] [--browser CMD] NAME", `
Authorize capbridge at the remote server NAME, which needs a person's login
(OAuth 2.1, the MCP authorization flow): capbridge finds the server's
authorization server from its 401, registers itself there when no
oauth.client_id is configured and the server allows it, opens the
authorization page (the URL is always printed; --browser CMD, else $BROWSER,
else xdg-open, opens it) and takes the answer on a loopback port. The tokens
are saved under $XDG_STATE_HOME/capbridge/oauth (mode 0600), where serve
finds them, refreshes them and saves them again; a server waiting in
needs_login is served at its next attempt.`)
	sf := addSurfaceFlags(fs)
	browser := fs.String("browser", "", "the command that opens the authorization URL, given as its last argument (default: $BROWSER, else xdg-open)")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "give one server name")
	}
	s, err := remoteServer(sf, pos[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	store, err := mcpauth.DefaultStore()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	rm := s.Remote
	hc, err := mcpwire.HTTPClient(mcpwire.HTTPOptions{CAFile: rm.CAFile, CertFile: rm.ClientCert, KeyFile: rm.ClientKey})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	headers, err := rm.Secrets(s.Name, os.LookupEnv, os.ReadFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	o := mcpauth.LoginOptions{Server: s.Name, URL: rm.URL, HTTP: hc, Header: http.Header{},
		Printed: func(u string) {
			fmt.Fprintf(stderr, "Open this URL to authorize capbridge at %s:\n\n  %s\n\n", s.Name, u)
		},
		Open: opener(*browser, stderr)}
	for k, v := range headers {
		o.Header.Set(k, v)
	}
	if oa := rm.OAuth; oa != nil {
		if oa.Grant == config.GrantClientCredentials {
			fmt.Fprintf(stderr, "capbridge login: [mcp.%s] uses the client credentials grant: serve gets its tokens itself, no login is needed\n", s.Name)
			return exitError
		}
		o.ClientID, o.Scopes = oa.ClientID, oa.Scopes
		if o.ClientSecret, err = oa.ClientSecret(s.Name, os.LookupEnv, os.ReadFile); err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	saved, err := mcpauth.Login(ctx, o)
	if err == nil {
		err = store.Save(saved)
	}
	if err != nil {
		fmt.Fprintf(stderr, "capbridge login %s: %v\n", s.Name, err)
		return exitError
	}
	fmt.Fprintf(stdout, "logged in to %s (saved in %s)\n", s.Name, store.Dir)
	return exitOK
}

func runLogout(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("logout", "capbridge logout NAME", `
Forget the login saved for the remote server NAME (its tokens under
$XDG_STATE_HOME/capbridge/oauth). A running serve keeps the token it holds
until the server refuses it.`)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "give one server name")
	}
	store, err := mcpauth.DefaultStore()
	if err == nil {
		err = store.Delete(pos[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "capbridge logout %s: %v\n", pos[0], err)
		return exitError
	}
	fmt.Fprintf(stdout, "logged out of %s\n", pos[0])
	return exitOK
}

// remoteServer finds the remote server name in the config the flags
// name.
func remoteServer(sf *surfaceFlags, name string) (config.Server, error) {
	cfg, err := sf.load()
	if err != nil {
		return config.Server{}, err
	}
	for _, s := range cfg.Servers {
		if s.Name != name {
			continue
		}
		if s.Remote == nil {
			return config.Server{}, fmt.Errorf("capbridge login: %s is a server capbridge starts (command), not a remote one (url)", name)
		}
		return s, nil
	}
	return config.Server{}, fmt.Errorf("capbridge login: no server is called %q in the config", name)
}

// opener opens a URL with cmd (split on spaces; the URL is its last
// argument), else $BROWSER, else xdg-open. A failure to open is reported;
// the URL was printed anyway.
func opener(cmd string, stderr io.Writer) func(string) error {
	if cmd == "" {
		cmd = os.Getenv("BROWSER")
	}
	if cmd == "" {
		cmd = "xdg-open"
	}
	return func(u string) error {
		argv := append(strings.Fields(cmd), u)
		c := exec.Command(argv[0], argv[1:]...)
		c.Stdout, c.Stderr = stderr, stderr
		if err := c.Run(); err != nil {
			fmt.Fprintf(stderr, "(could not run %s: %v; open the URL above yourself)\n", argv[0], err)
		}
		return nil
	}
}
