package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/capbridge/capbridge/bridge/config"
)

func runInit(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("init", "capbridge init [--from EDITOR-CONFIG [--workspace DIR]] [--out FILE] [--force] | --mcp-host HOST [-c capbridge.toml] [--mcp-host-config FILE]", `
Write a commented capbridge.toml: every key of the [bridge] table and of a
server's table, commented out at its default, and, with --from, the stdio
servers of an editor's MCP config (Claude Desktop, Claude Code, Cursor,
Windsurf, VS Code or Codex) as [mcp.NAME] tables. An env value that takes
a variable is written as the editor wrote it, for serve to resolve from its
environment at each boot, as capbridge.toml's env values may; the editor's
other placeholders (in the command, arguments and cwd, the workspace, and a
variable not set) are expanded as serve --mcp-config would expand them, and
each table says which it used; a remote
server's credentials are written only as the names of their variables
(bearer_token_env, header_env, or a header's ${VAR} kept as written and
read at each boot), and a URL that would hold a variable's value is left
out, with a warning. The file
is checked with serve's reader before it is written. It refuses to replace
an existing file without --force.

With --mcp-host (claude-code, claude-desktop, cursor, vscode) it writes
instead the entry that adds capbridge mcp, with -c's config, to that MCP
host: Claude Code's command line, or the JSON entry the others take; with
--mcp-host-config it adds that entry to the host's config file (created if
missing; its other servers and comments kept).`)
	from := fs.String("from", "", "an editor's MCP config whose stdio servers to convert")
	workspace := fs.String("workspace", "", "what ${workspaceFolder} expands to in --from (default: that file's directory)")
	out := fs.String("out", "capbridge.toml", `where to write ("-": standard output)`)
	force := fs.Bool("force", false, "replace --out if it exists (with --mcp-host-config: the capbridge entry)")
	host := fs.String("mcp-host", "", "write the entry for this MCP host instead: claude-code, claude-desktop, cursor or vscode")
	hostCfg := fs.String("c", "capbridge.toml", "with --mcp-host: the capbridge.toml the entry's capbridge mcp reads")
	hostFile := fs.String("mcp-host-config", "", "with --mcp-host: add the entry to this host config file (claude_desktop_config.json, .cursor/mcp.json, .vscode/mcp.json)")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; init takes only flags", pos[0])
	}
	if *host != "" {
		if err := mcpHostEntry(*host, *hostCfg, *hostFile, *force, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return exitConfig
		}
		return exitOK
	}
	data, secret, warnings, err := initConfig(*from, *workspace, *out)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfig
	}
	// What was left out is said on screen as well as in the file, whose
	// end nobody may read: a remote server silently missing from the
	// config is a tool that silently stops working.
	for _, w := range warnings {
		fmt.Fprintf(stderr, "capbridge init: left out: %v\n", w)
	}
	if *out == "-" {
		_, _ = stdout.Write(data)
		return exitOK
	}
	mode := os.FileMode(0o644)
	if secret {
		mode = 0o600 // env values and expanded variables often hold tokens
	}
	if err := writeNew(*out, data, mode, *force); err != nil {
		fmt.Fprintln(stderr, "capbridge init:", err)
		return exitError
	}
	fmt.Fprintf(stdout, "wrote %s (mode %04o); check it with `capbridge doctor -c %s`, run it with `capbridge serve -c %s`\n", *out, mode, *out, *out)
	return exitOK
}

// writeNew writes data to path, which must not exist unless force is
// set: then it is replaced atomically (replaceUserFile).
func writeNew(path string, data []byte, mode os.FileMode, force bool) error {
	if force {
		return replaceUserFile(path, data, mode)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; give --force to replace it, or --out another path", path)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// initConfig renders the file, and checks that serve's reader takes it.
// secret reports whether it holds env values, expanded variables, or a
// remote server's headers or URL query copied from the editor's file,
// any of which may be a credential; warnings are what of the editor's
// file was left out (disabled servers, credentials the file cannot
// name).
func initConfig(from, workspace, out string) (data []byte, secret bool, warnings config.ErrorList, err error) {
	var b strings.Builder
	var starts []serverStart
	b.WriteString(initHeader)
	if from != "" {
		fmt.Fprintf(&b, "#\n# The servers were converted from %s by capbridge init.\n", commentText(from))
	}
	b.WriteString(initBridge)
	b.WriteString(initServerKeys)
	if from == "" {
		b.WriteString(initNoServers)
	} else {
		var servers []convertedServer
		servers, warnings, err = convertEditor(from, workspace)
		if err != nil {
			return nil, false, nil, err
		}
		lines := strings.Count(b.String(), "\n")
		for _, s := range servers {
			starts = append(starts, serverStart{line: lines + 1, s: s.Server})
			at := b.Len()
			writeServer(&b, s)
			lines += strings.Count(b.String()[at:], "\n")
			secret = secret || len(s.Env) > 0 || len(s.vars) > 0 || copiesCredentials(s.Remote)
		}
		if len(servers) == 0 {
			fmt.Fprintf(&b, "\n# %s has no server capbridge can run.\n", commentText(from))
		}
		for _, w := range warnings {
			fmt.Fprintf(&b, "\n# Left out: %s", commentText(w.Error()))
		}
		if len(warnings) > 0 {
			b.WriteString("\n")
		}
	}
	data = []byte(b.String())
	name := out
	if out == "-" {
		name = "(standard output)"
	}
	if _, err := config.Load(name, data); err != nil {
		if list, ok := errors.AsType[config.ErrorList](err); ok && len(starts) > 0 {
			return nil, false, nil, fmt.Errorf("capbridge init: %s has what capbridge.toml cannot hold, so nothing is written:\n%v", from, atEditor(list, starts))
		}
		return nil, false, nil, fmt.Errorf("capbridge init: the file would not load, so it is not written:\n%v", err)
	}
	return data, secret, warnings, nil
}

// serverStart is the line of the file being written where a converted
// server's lines start.
type serverStart struct {
	line int
	s    config.Server
}

// atEditor moves the errors in a converted server's lines to the entry of
// the editor's file it came from: the file they would name is the one
// not written, and the editor's file is the one to fix.
func atEditor(list config.ErrorList, starts []serverStart) config.ErrorList {
	out := make(config.ErrorList, len(list))
	for i, e := range list {
		c := *e
		if j := slices.IndexFunc(starts, func(st serverStart) bool { return st.line > e.Line }); j != 0 && e.Line > 0 {
			if j < 0 {
				j = len(starts)
			}
			c.File, c.Line = starts[j-1].s.File, starts[j-1].s.Line
		}
		out[i] = &c
	}
	return out
}

// convertedServer is an editor's server with the variables its entry
// used.
type convertedServer struct {
	config.Server
	vars []string // "${NAME}", "${NAME} (not set: its default)", "${workspaceFolder} = DIR"
}

// placeholder matches a variable as the second reading of the editor's
// file renders it (see convertEditor).
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// convertEditor reads the editor's file as serve --mcp-config does, and
// finds which variables each server used. It reads the file twice with
// the same reader: once for the values, and once with every variable
// resolving to its own name, /${NAME} (and the workspace to
// /${workspaceFolder}), so that what each field used shows in the result.
// The reader takes every ${ as the start of a placeholder and the second
// reading never uses a default, so a ${NAME} in its result is a variable
// the entry names, and nothing else.
func convertEditor(from, workspace string) ([]convertedServer, config.ErrorList, error) {
	data, err := readBounded(from)
	if err != nil {
		return nil, nil, err
	}
	if workspace == "" {
		if workspace, err = filepath.Abs(filepath.Dir(from)); err != nil {
			return nil, nil, fmt.Errorf("capbridge init: %v; give --workspace DIR", err)
		}
	}
	unset := map[string]bool{}
	servers, warnings, err := config.LoadEditor(from, data, config.EditorOptions{
		Workspace: workspace,
		LookupEnv: func(name string) (string, bool) {
			v, ok := os.LookupEnv(name)
			unset[name] = !ok
			return v, ok
		},
	})
	if err != nil {
		return nil, nil, err
	}
	named, _, err := config.LoadEditor(from, data, config.EditorOptions{
		Workspace:    "/${workspaceFolder}",
		Placeholders: true,
		// The leading / keeps a cwd made of a variable absolute, as
		// the reader requires.
		LookupEnv: func(name string) (string, bool) { return "/${" + name + "}", true },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("capbridge init: reading %s for its variables: %w", from, err)
	}
	out := make([]convertedServer, 0, len(servers))
	for _, s := range servers {
		s = absFileRefs(s)
		if slices.ContainsFunc(serverStrings(s), func(v string) bool { return !utf8.ValidString(v) }) {
			// TOML holds text only: written, the bytes would change.
			warnings = append(warnings, &config.Error{File: s.File, Line: s.Line,
				Msg: fmt.Sprintf("server %s: a value holds bytes that are not UTF-8 (most likely a variable's), which capbridge.toml cannot hold; the server is left out", s.Name),
				Fix: "give the variable a UTF-8 value and run init again, or serve the editor's file with --mcp-config"})
			continue
		}
		j := slices.IndexFunc(named, func(n config.Server) bool { return n.Name == s.Name })
		if j < 0 {
			out = append(out, convertedServer{Server: s})
			continue
		}
		n := named[j]
		if s.Remote != nil && n.Remote != nil {
			var left config.ErrorList
			s, left = remoteCredentials(s, n.Remote)
			warnings = append(warnings, left...)
			if s.Remote == nil {
				continue
			}
			// The variables listed are those of the values written as
			// expanded: not of a header left out, nor of one written as
			// a reference or a template, as it is.
			nr := *n.Remote
			nr.Headers = maps.Clone(nr.Headers)
			maps.DeleteFunc(nr.Headers, func(h, _ string) bool {
				v, kept := s.Remote.Headers[h]
				return !kept || isRef(s, "headers."+h) || strings.Contains(v, "${")
			})
			n.Remote = &nr
		}
		if s.Remote == nil {
			var kept []string
			s, kept, warnings = envCredentials(s, n, workspace, unset, warnings)
			// The variables listed are those of the values written as
			// expanded, not of an env value kept as a reference.
			n.Env = maps.Clone(n.Env)
			for _, k := range kept {
				delete(n.Env, k)
			}
		}
		out = append(out, convertedServer{Server: s})
		i := len(out) - 1
		seen := map[string]bool{}
		for _, f := range serverStrings(n) {
			for _, m := range placeholder.FindAllStringSubmatch(f, -1) {
				if seen[m[1]] {
					continue
				}
				seen[m[1]] = true
				v := "${" + m[1] + "}"
				switch {
				case m[1] == "workspaceFolder":
					v += " = " + workspace
				case unset[m[1]]:
					v += " (not set: its default)"
				}
				out[i].vars = append(out[i].vars, v)
			}
		}
	}
	return out, warnings, nil
}

// standIn is a variable as convertEditor's second reading renders it,
// "/${NAME}"; the slash is the reading's, not the file's.
var standIn = regexp.MustCompile(`/(\$\{[A-Za-z_][A-Za-z0-9_]*\})`)

// credentialVars are the variables a field of the second reading uses
// that may hold a credential: all but the workspace and the home
// directory, which are paths.
func credentialVars(rendered string) []string {
	var names []string
	for _, m := range placeholder.FindAllStringSubmatch(rendered, -1) {
		if n := m[1]; n != "workspaceFolder" && n != "HOME" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// envCredentials keeps a variable's value out of a stdio server's env as
// init writes it: an env value that uses a variable that may hold a
// credential (credentialVars) is written as the editor wrote it, a
// template serve resolves from its environment at each boot, as
// capbridge.toml's env values may be, with the workspace and the home
// directory in it expanded (capbridge.toml knows no workspace, and a
// path is no secret; HOME as init sees it, which is what the editor's
// reading expanded). A value whose variable was not set when init ran,
// and so took its default, is written expanded, as before: serve would
// find it unset. n is the server as the second reading renders it; the
// keys of the values kept as templates are returned. A variable used by
// the command, an argument or the working directory, which
// capbridge.toml does not expand, is written expanded, with a warning.
func envCredentials(s, n config.Server, workspace string, unset map[string]bool, warnings config.ErrorList) (config.Server, []string, config.ErrorList) {
	var kept []string
	for _, k := range slices.Sorted(maps.Keys(n.Env)) {
		rendered := n.Env[k]
		names := credentialVars(rendered)
		if len(names) == 0 || isRef(s, "env."+k) || slices.ContainsFunc(names, func(v string) bool { return unset[v] }) {
			continue
		}
		t := standIn.ReplaceAllString(rendered, "$1")
		for _, path := range []struct{ name, value string }{{"workspaceFolder", workspace}, {"HOME", os.Getenv("HOME")}} {
			t = strings.ReplaceAll(t, "${"+path.name+"}", path.value)
		}
		if strings.Count(t, "${") != len(placeholder.FindAllString(t, -1)) {
			continue // a path that itself holds "${": written expanded
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[k] = t
		kept = append(kept, k)
	}
	fields := append([]string{n.Command, n.Cwd}, n.Args...)
	for _, f := range fields {
		if names := credentialVars(f); len(names) > 0 {
			warnings = append(warnings, &config.Error{File: s.File, Line: s.Line,
				Msg: fmt.Sprintf("server %s: its command, an argument or its cwd takes %s, written into the file as it expanded: capbridge.toml expands variables only in env and header values", s.Name, "${"+strings.Join(names, "}, ${")+"}"),
				Fix: "if the server can read it from its environment, pass it in env instead and run init again"})
			break
		}
	}
	return s, kept, warnings
}

// remoteCredentials keeps a variable's value out of what init writes for
// a remote server. The editor reader has made "${VAR}" and
// "Bearer ${VAR}" header values into header_env and bearer_token_env; a
// header that uses a variable any other way ("token ${GH}",
// "session=${S}") is written as the editor wrote it, a template that
// serve resolves from its environment at each boot. A URL cannot take a
// variable so: the whole server is left out when its URL takes one where
// a credential goes (its userinfo, path, query or fragment: the value
// would be written into the URL). A variable that gives the URL's scheme
// and host (a base URL) is expanded as elsewhere. rm is the server as
// the second reading renders it; each thing left out is a warning naming
// the editor's file and line. The returned server has no Remote when it
// is left out.
func remoteCredentials(s config.Server, rm *config.Remote) (config.Server, config.ErrorList) {
	var left config.ErrorList
	warn := func(msg, fix string) {
		left = append(left, &config.Error{File: s.File, Line: s.Line, Msg: msg, Fix: fix})
	}
	if names := credentialVars(rm.URL); len(names) > 0 && !baseURLVars(rm.URL, s.Remote.URL) {
		warn(fmt.Sprintf("server %s: its url takes %s where a credential goes (userinfo, path, query or fragment), and capbridge.toml would hold the value; the server is left out", s.Name, varList(names)),
			fmt.Sprintf("add [mcp.%s] to capbridge.toml yourself, with a URL that holds no credential and the credential in bearer_token_env, header_env or header_file", s.Name))
		s.Remote = nil
		return s, left
	}
	c := *s.Remote
	c.Headers = maps.Clone(c.Headers)
	for _, h := range slices.Sorted(maps.Keys(rm.Headers)) {
		if isRef(s, "headers."+h) {
			continue // a ${file:…} or ${cmd:…} reference, written as it is and resolved at each boot
		}
		if names := credentialVars(rm.Headers[h]); len(names) > 0 {
			c.Headers[h] = standIn.ReplaceAllString(rm.Headers[h], "$1")
		}
	}
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	s.Remote = &c
	return s, left
}

var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// baseURLVars reports whether the variables of a URL, as the second
// reading renders it, give only its scheme and host, and the URL they
// expanded to carries no userinfo, query or fragment a value could have
// brought.
func baseURLVars(rendered, expanded string) bool {
	t := standIn.ReplaceAllString(rendered, "$1")
	t = strings.TrimPrefix(t, urlScheme.FindString(t))
	end := len(t) // where the host ends: the first /, ? or # outside a placeholder
	for i := 0; i < len(t); i++ {
		if strings.HasPrefix(t[i:], "${") {
			k := strings.IndexByte(t[i:], '}')
			if k < 0 {
				return false
			}
			i += k
			continue
		}
		if strings.IndexByte("/?#", t[i]) >= 0 {
			end = i
			break
		}
	}
	if strings.Contains(t[end:], "${") || strings.Contains(t[:end], "@") {
		return false
	}
	u, err := url.Parse(expanded)
	return err == nil && u.User == nil && u.RawQuery == "" && !u.ForceQuery && u.Fragment == ""
}

// fileRef is a ${file:PATH} reference.
var fileRef = regexp.MustCompile(`\$\{file:([^}]*)\}`)

// absFileRefs makes each relative ${file:PATH} of s's references
// absolute: the editor's file resolves it beside itself, and the file
// init writes would resolve it beside that file, elsewhere.
func absFileRefs(s config.Server) config.Server {
	dir, err := filepath.Abs(filepath.Dir(s.File))
	if err != nil {
		return s
	}
	abs := func(v string) string {
		return fileRef.ReplaceAllStringFunc(v, func(m string) string {
			p := m[len("${file:") : len(m)-1]
			if p == "" || filepath.IsAbs(p) {
				return m
			}
			return "${file:" + filepath.Join(dir, p) + "}"
		})
	}
	for _, r := range s.Refs {
		if name, ok := strings.CutPrefix(r.Key, "env."); ok && s.Env != nil {
			s.Env = maps.Clone(s.Env)
			s.Env[name] = abs(s.Env[name])
		}
		if name, ok := strings.CutPrefix(r.Key, "headers."); ok && s.Remote != nil && s.Remote.Headers != nil {
			rm := *s.Remote
			rm.Headers = maps.Clone(rm.Headers)
			rm.Headers[name] = abs(rm.Headers[name])
			s.Remote = &rm
		}
	}
	return s
}

// isRef reports whether the server's field key ("headers.X") holds a
// secret reference, kept as written and resolved at each boot.
func isRef(s config.Server, key string) bool {
	return slices.ContainsFunc(s.Refs, func(r config.Ref) bool { return r.Key == key })
}

func varList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "${" + n + "}"
	}
	return strings.Join(q, ", ")
}

// copiesCredentials reports whether what init writes for a remote server
// holds something of the editor's file that may be a credential: a
// header's value or the URL's query.
func copiesCredentials(rm *config.Remote) bool {
	if rm == nil {
		return false
	}
	u, err := url.Parse(rm.URL)
	return len(rm.Headers) > 0 || err != nil || u.RawQuery != "" || u.User != nil
}

// serverStrings lists the fields the editor formats may put variables in.
func serverStrings(s config.Server) []string {
	f := append([]string{s.Command, s.Cwd}, s.Args...)
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		f = append(f, s.Env[k])
	}
	if rm := s.Remote; rm != nil {
		f = append(f, rm.URL)
		for _, k := range slices.Sorted(maps.Keys(rm.Headers)) {
			f = append(f, rm.Headers[k])
		}
	}
	return f
}

func writeServer(b *strings.Builder, s convertedServer) {
	// A path may hold a line break: raw, it would end the comment and
	// write TOML of its own.
	fmt.Fprintf(b, "\n# From %s.\n", commentText(location(s.File, s.Line)))
	if len(s.vars) > 0 {
		b.WriteString("# Values here are the editor's placeholders as they expanded when this file\n" +
			"# was written, from " + commentText(strings.Join(s.vars, ", ")) + ".\n" +
			"# Edit them here when those change.\n")
	}
	if s.Remote != nil {
		writeRemote(b, s.Name, s.Remote)
	} else {
		fmt.Fprintf(b, "[mcp.%s]\ncommand = %s\n", s.Name, tomlString(s.Command))
	}
	if len(s.Args) > 0 {
		fmt.Fprintf(b, "args    = %s\n", tomlStrings(s.Args))
	}
	if len(s.Env) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			kv = append(kv, k+" = "+tomlString(s.Env[k]))
		}
		fmt.Fprintf(b, "env     = { %s }\n", strings.Join(kv, ", "))
	}
	if s.Cwd != "" {
		fmt.Fprintf(b, "cwd     = %s\n", tomlString(s.Cwd))
	}
	if s.ToolsAllow != nil {
		fmt.Fprintf(b, "tools.allow = %s\n", tomlStrings(s.ToolsAllow))
	}
	if s.ToolsDeny != nil {
		fmt.Fprintf(b, "tools.deny  = %s\n", tomlStrings(s.ToolsDeny))
	}
}

// writeRemote writes a remote server's keys. Credentials the editor took
// from variables stay variables (bearer_token_env, header_env): their
// values are never written into the file.
func writeRemote(b *strings.Builder, name string, rm *config.Remote) {
	fmt.Fprintf(b, "[mcp.%s]\nurl = %s\n", name, tomlString(rm.URL))
	if rm.Transport != config.TransportAuto {
		fmt.Fprintf(b, "transport = %s\n", tomlString(rm.Transport))
	}
	table := func(key string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, tomlString(k)+" = "+tomlString(m[k]))
		}
		fmt.Fprintf(b, "%s = { %s }\n", key, strings.Join(kv, ", "))
	}
	table("headers", rm.Headers)
	table("header_env", rm.HeaderEnv)
	if rm.BearerTokenEnv != "" {
		fmt.Fprintf(b, "bearer_token_env = %s\n", tomlString(rm.BearerTokenEnv))
	}
}

// tomlString quotes s as a TOML basic string. TOML's escapes are a subset
// of Go's (no \x, \a or \v), so strconv.Quote will not do.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// commentText makes text safe inside a # comment: one line per line.
func commentText(text string) string {
	return strings.ReplaceAll(strings.ReplaceAll(text, "\r", ""), "\n", "\n# ")
}

// The file init writes, in order: the header, the [bridge] table with
// every key commented out, a server table with every key commented out,
// then the servers (or how to add one). The keys, their comments and
// their values follow docs/capbridge.sample.toml; the values are the
// defaults where the key has one. A test uncomments every key and checks
// that the result loads and sets every key the sample sets.
const initHeader = `# capbridge.toml: capbridge's configuration.
#
# Check it:  capbridge doctor -c capbridge.toml
# Run it:    capbridge serve -c capbridge.toml
#
# Every key is optional unless marked; a commented-out key shows its default,
# or an example where it has none. capbridge reports a mistake here as
# "file:line: key: problem; fix". An editor with a TOML language server
# (taplo, Even Better TOML) checks the file as you type if its first line is
#   #:schema /path/to/capbridge.schema.json
# naming the schema in capbridge's docs/ directory.
`

const initBridge = `
[bridge]
# The socket handed into jails, and the operator's socket. Default:
# $XDG_RUNTIME_DIR/capbridge/, else /tmp/capbridge-$UID/. Their directory
# must belong to capbridge's user and be writable by nobody else.
# call_socket    = "/run/capbridge/call.sock"
# control_socket = "/run/capbridge/control.sock"

# Who may connect to the call socket. A grant token still guards every call.
# call_socket_mode  = "0600"       # octal; "0660" with call_socket_group hands it to a group; world bits need allowed_uids
# call_socket_group = "sandbox"    # group name or gid; default the process's group
# allowed_uids      = [1000, 1001] # default: any peer the mode lets in

# Bounds.
# max_frame         = "16MiB" # one capwire frame
# max_connections   = 1024    # authenticated connections on the call socket
# max_conns_per_grant = 16    # of which one grant's
# max_conns_per_uid = 512     # of which one peer uid's
# max_conn_inflight = 64      # calls in flight per connection
# procs             = 1       # threads running Go code at once (GOMAXPROCS wins)

# Connections that have not said hello yet have their own budget: when it
# is full the oldest is dropped, so a flood of strangers cannot keep a
# program holding a token out.
# max_unauth_connections = 64
# max_unauth_per_uid     = 16
# hello_timeout     = "3s"    # the hello must arrive within it
# idle_timeout      = "5m"    # an authenticated connection with no call in flight
# frame_timeout     = "10s"   # a frame that has started must be complete within it
# max_partial_bytes = "64MiB" # partial frames held, all connections; beyond it the largest is refused
# max_result_text   = "1MiB"  # text kept per result before truncation
# max_result_data   = "1MiB"  # image, audio and resource bytes carried per result
# write_timeout     = "5s"    # a reader that stalls longer is dropped
# shutdown_grace    = "3s"    # how long SIGTERM waits for calls in flight
# surface_budget    = "64KiB" # size budget of each server's surface

# Logging: JSON lines unless on a terminal; audit_values adds argument and
# result values to the audit trail (off: they may hold secrets). The audit
# trail (one line per connection and per call) goes with the logs unless
# audit_path gives it a file of its own, opened for appending and created
# mode 0600; SIGHUP reopens it.
# log_format   = "auto" # auto | json | console
# log_level    = "info" # debug | info | warn | error
# audit_values = false
# audit_path   = "/var/lib/capbridge/audit.log"

# While the audit trail cannot be written, "closed" refuses calls and "open"
# serves them and counts the lines lost; a grant whose lines reach
# audit_grant_budget bytes is treated the same way.
# audit_fail         = "closed" # closed | open
# audit_grant_budget = "64MiB"

# Prometheus metrics at http://127.0.0.1:9464/metrics; loopback only.
# metrics_listen = "127.0.0.1:9464" # default: no listener ("capbridge metrics" still reads them)

# The approved tool surface, written by "capbridge lock" (docs/lock.md),
# relative to this file: a tool it does not name is absent, one that changed
# is withheld (enforce) or served and reported (warn).
# lock      = "capbridge.lock"
# lock_mode = "enforce" # enforce | warn

# OpenTelemetry traces over OTLP (docs/operating.md, "Traces"): a span per
# call and per MCP request, the server given its traceparent in _meta. Each
# key wins over its OTEL_* variable; off unless an endpoint is set here or
# in OTEL_EXPORTER_OTLP_ENDPOINT.
# [telemetry]
# endpoint         = "http://127.0.0.1:4318" # the collector; grpc: its :4317
# protocol         = "http/protobuf" # http/protobuf | grpc
# service_name     = "capbridge"
# sampler          = "parentbased_traceidratio"
# sampler_arg      = 0.25
# shutdown_timeout = "5s"
`

const initServerKeys = `
# One table per MCP server. The name (letters, digits, _ and -) is what
# grants, "capbridge call" and the façade's package use. A server's table
# takes these keys:
#
# [mcp.memory]
# command = "npx"                                       # required: argv[0], never a shell string
# args    = ["-y", "@modelcontextprotocol/server-memory"]
# env     = { MEMORY_FILE_PATH = "/var/lib/capbridge/memory.jsonl" }
# inherit_env = ["PATH", "HOME", "LANG"] # passed through from capbridge's environment; default PATH, HOME, LANG and the like
# cwd     = "/var/lib/capbridge"
#
# startup_timeout  = "2m"  # spawn, handshake and tools/list, each attempt
# restart          = "on-failure" # never | on-failure | always
# restart_backoff  = "1s"  # first wait before a restart; doubles, with jitter
# restart_max      = "1m"  # longest wait; serving this long resets it
# call_timeout     = "60s" # idle: progress renews it, up to max_call_timeout
# max_call_timeout = "10m" # the most a caller may ask for
# cancel_grace     = "5s"  # a cancelled call keeps its slot until answered, this long at most
# max_inflight     = 32    # concurrent calls sent to this server
# max_queue        = 64    # calls waiting beyond that; more are refused "overloaded"
# max_inflight_per_grant = 16 # one grant's share of max_inflight; default half, at least 1
# max_queue_per_grant    = 32 # one grant's share of max_queue; default half
#
# Only the allowed tools are generated and callable; denied ones are absent.
# An entry that names no tool of the server is a warning at boot (an error
# under serve --strict).
# tools.allow = ["read_graph", "search_nodes"]
# tools.deny  = ["delete_entities"]
#
# A failing server's stderr reaches the operator (status, logs), not the
# programs calling it, unless this is true; then their denials carry its last
# 2 KiB, with the values of env replaced by [redacted:NAME].
# stderr_to_caller = false
#
# Policy, enforced before a call leaves capbridge (docs/lock.md): destructive
# tools only for grants that name them or --allow-destructive (a tool the
# server marks destructiveHint: true is destructive too, unless named in
# not_destructive); argument guards by JSON Pointer (values, prefix,
# pattern, min, max, optional; "/paths/*" guards every element).
# destructive     = ["delete_observations", "delete_relations"]
# not_destructive = ["delete_entities"]
# restrict.search_nodes = { "/query" = { pattern = "[^\\n]{1,200}" } }
#
# Each grant's quotas on this server's calls, and on one tool's, over the
# [quota] defaults (rate, burst, calls, bytes_in, bytes_out, time); a call
# beyond one is denied quota_exceeded.
# quota.rate  = 5
# quota.calls = 1000
# quota.tools.create_entities.calls = 100
#
# A remote server has url instead of command (docs/remote.md): Streamable
# HTTP, falling back to the legacy HTTP+SSE transport; credentials from
# outside this file (bearer_token_env / header_env name variables,
# bearer_token_file / header_file name files); ca_file, client_cert and
# client_key for TLS; plain http only to loopback unless allow_http = true.
# Every key above that is not about a process applies to it too.
#
# [mcp.github]
# url               = "https://api.githubcopilot.com/mcp/"
# transport         = "auto" # auto | streamable-http | sse
# headers           = { "X-MCP-Toolsets" = "repos,issues" }
# bearer_token_file = "/run/secrets/github-mcp-token"
`

const initNoServers = `
# No servers yet: add an [mcp.NAME] table like the one above, or convert an
# editor's servers with  capbridge init --from ~/.cursor/mcp.json --force
`
