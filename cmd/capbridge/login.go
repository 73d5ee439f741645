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
	"time"

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
	fs := newCmdFlags("login", "capbridge login [-c capbridge.toml | --mcp-config EDITOR-CONFIG] [--browser CMD] NAME\n       capbridge login --client-metadata URL", `
Authorize capbridge at the remote server NAME, which needs a person's login
(OAuth 2.1, the MCP authorization flow): capbridge finds the server's
authorization server from its 401, identifies itself with oauth.client_id
when one is configured, else with the client metadata document at
oauth.client_metadata_url where the server takes those, else registers
itself where the server allows it; it opens the authorization page (the URL
is always printed; --browser CMD, else $BROWSER, else xdg-open, opens it) and
takes the answer on a loopback port. The tokens are saved under
$XDG_STATE_HOME/capbridge/oauth (mode 0600), where serve finds them,
refreshes them and saves them again; a server waiting in needs_login is
served at its next attempt. When a server wanted more scopes than the
login's token carries (status says so), login asks for them too.

--client-metadata URL prints the client metadata document to publish at
URL (an https URL of your own) for oauth.client_metadata_url.`)
	sf := addRemoteConfigFlags(fs, "the capbridge.toml where NAME is defined (with neither this nor --mcp-config there is only the built-in demo, which has no remote server)")
	browser := fs.String("browser", "", "the command that opens the authorization URL, given as its last argument (default: $BROWSER, else xdg-open); none opens nothing: open the printed URL yourself (the URL, with the login's state, is on a command's arguments, which other local users can read, while it runs)")
	metadata := fs.String("client-metadata", "", "print capbridge's client metadata document for this https URL, and exit")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *metadata != "" {
		if len(pos) != 0 {
			return fs.usageError(stderr, "--client-metadata takes no server name")
		}
		doc, err := mcpauth.ClientMetadataDocument(*metadata)
		if err != nil {
			fmt.Fprintln(stderr, "capbridge login:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "%s\n", doc)
		return exitOK
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
	headers, err := rm.Secrets(s.Name, os.LookupEnv, config.ReadSecretFile)
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
		if oa.Grant != config.GrantAuthorizationCode {
			fmt.Fprintf(stderr, "capbridge login: [mcp.%s] uses grant = %q: serve gets its tokens itself, no login is needed\n", s.Name, oa.Grant)
			return exitError
		}
		o.ClientID, o.Scopes, o.ClientMetadataURL, o.Issuer = oa.ClientID, oa.Scopes, oa.ClientMetadataURL, oa.Issuer
		if o.ClientSecret, err = oa.ClientSecret(s.Name, os.LookupEnv, config.ReadSecretFile); err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
	}
	if prev, err := store.Load(s.Name); err == nil && prev.URL == rm.URL {
		o.Previous = prev
		if len(prev.StepUp) > 0 {
			fmt.Fprintf(stderr, "%s wanted the scopes %q: asking for them too\n", s.Name, strings.Join(prev.StepUp, " "))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	saved, err := mcpauth.Login(ctx, o)
	if err == nil {
		// Under the store's lock: a serve refreshing the old login at
		// this moment cannot write it back over the new one.
		var unlock func()
		if unlock, err = store.Lock(s.Name); err == nil {
			err = store.Save(saved)
			unlock()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "capbridge login %s: %v\n", s.Name, err)
		return exitError
	}
	fmt.Fprintf(stdout, "logged in to %s (saved in %s)\n", s.Name, store.Dir)
	return exitOK
}

func runLogout(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("logout", "capbridge logout [-c capbridge.toml | --mcp-config EDITOR-CONFIG] NAME", `
Forget the login saved for the remote server NAME (its tokens under
$XDG_STATE_HOME/capbridge/oauth), revoking its tokens first at the
authorization server when it offers revocation (RFC 7009). A running serve
keeps the access token it holds until the server refuses it (at once, where
the tokens were revoked). -c names the config whose ca_file and client
certificate reach the authorization server, if it needs them.`)
	sf := addRemoteConfigFlags(fs, "the capbridge.toml where NAME is defined, for its ca_file and client certificate (default: none; the saved login alone)")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "give one server name")
	}
	name := pos[0]
	store, err := mcpauth.DefaultStore()
	if err != nil {
		fmt.Fprintf(stderr, "capbridge logout %s: %v\n", name, err)
		return exitError
	}
	var opts mcpwire.HTTPOptions
	if sf.config != "" || sf.mcpConfig != "" {
		s, err := remoteServer(sf, name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		opts = mcpwire.HTTPOptions{CAFile: s.Remote.CAFile, CertFile: s.Remote.ClientCert, KeyFile: s.Remote.ClientKey}
	}
	if sv, err := store.Load(name); err == nil {
		hc, err := mcpwire.HTTPClient(opts)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		ctx, cancel := context.WithTimeout(context.Background(), revokeWait)
		revoked, err := mcpauth.Revoke(ctx, hc, sv)
		cancel()
		switch {
		case err != nil:
			// The login is forgotten all the same: a token the server
			// would not revoke lives until it expires.
			fmt.Fprintf(stderr, "capbridge logout %s: %v; forgetting the login anyway\n", name, err)
		case revoked:
			fmt.Fprintf(stdout, "revoked the tokens at %s\n", sv.RevocationEndpoint)
		default:
			fmt.Fprintf(stdout, "the authorization server offers no revocation: the tokens live until they expire\n")
		}
	}
	// Under the store's lock: a serve refreshing the login at this moment
	// finishes first, and one refreshing after finds it gone.
	unlock, err := store.Lock(name)
	if err == nil {
		err = store.Delete(name)
		unlock()
	}
	if err != nil {
		fmt.Fprintf(stderr, "capbridge logout %s: %v\n", name, err)
		return exitError
	}
	fmt.Fprintf(stdout, "logged out of %s\n", name)
	return exitOK
}

// addRemoteConfigFlags registers the flags login and logout read the
// remote server's definition with; cfgUsage says what -c is for.
func addRemoteConfigFlags(fs *cmdFlags, cfgUsage string) *surfaceFlags {
	sf := &surfaceFlags{}
	fs.StringVar(&sf.config, "c", "", cfgUsage)
	fs.StringVar(&sf.mcpConfig, "mcp-config", "", "an editor's MCP config where NAME is defined, as serve --mcp-config reads it")
	fs.StringVar(&sf.workspace, "workspace", "", "what ${workspaceFolder} expands to in --mcp-config (default: that file's directory)")
	return sf
}

// revokeWait bounds logout's revocation requests.
const revokeWait = 10 * time.Second

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
// argument), else $BROWSER, else xdg-open, and returns without waiting for
// it to exit. A failure to open is reported; the URL was printed anyway.
func opener(cmd string, stderr io.Writer) func(string) error {
	if cmd == "none" {
		return func(string) error { return nil }
	}
	if cmd == "" {
		cmd = os.Getenv("BROWSER")
	}
	if cmd == "" {
		cmd = "xdg-open"
	}
	return func(u string) error {
		argv := append(strings.Fields(cmd), u)
		c := exec.Command(argv[0], argv[1:]...)
		// Its output goes to our stderr when that is a file, and
		// otherwise nowhere: no goroutine copies it after the login.
		f, _ := stderr.(*os.File)
		if f != nil {
			c.Stdout, c.Stderr = f, f
		}
		// Started, not waited for: a browser may stay in the foreground
		// until the person quits it, long after its redirect, whose code
		// would expire while the login waited.
		if err := c.Start(); err != nil {
			fmt.Fprintf(stderr, "(could not run %s: %v; open the URL above yourself)\n", argv[0], err)
			return nil
		}
		go func() {
			if err := c.Wait(); err != nil && f != nil {
				fmt.Fprintf(f, "(%s: %v; if no browser opened, open the URL above yourself)\n", argv[0], err)
			}
		}()
		return nil
	}
}
