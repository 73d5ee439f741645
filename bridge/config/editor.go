package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/tailscale/hujson"
)

// EditorOptions say how LoadEditor resolves what an editor's file leaves
// to its surroundings.
type EditorOptions struct {
	// Workspace is what ${workspaceFolder} expands to; "" leaves it
	// undefined, so an entry that uses it is refused.
	Workspace string
	// LookupEnv resolves ${VAR}; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Strict is serve's --strict, carried for the callers that apply it
	// to the servers read (doctor, lock); the reader itself refuses
	// nothing more under it, now that remote entries are served.
	Strict bool
	// Placeholders says LookupEnv renders stand-ins rather than values
	// (init's second reading, which finds the variables each field
	// used): a value that then cannot be checked, a remote server's URL,
	// is not.
	Placeholders bool
}

// LoadEditor reads the stdio servers of an editor's MCP configuration, as
// the editor writes it:
//
//   - {"mcpServers": {name: entry}}: Claude Desktop, Cursor, Windsurf, and
//     Claude Code's .mcp.json (whose entries may also say "type");
//   - {"servers": {name: entry}, "inputs": […]}: VS Code's mcp.json;
//   - a name ending in .toml: Codex's config.toml, [mcp_servers.<name>]
//     tables with command, args, env, cwd, enabled, enabled_tools and
//     disabled_tools (the last two become tools.allow and tools.deny).
//
// JSON files may have comments and trailing commas (JSONC), as the
// editors allow. ${VAR}, ${VAR:-default}, ${env:VAR}, ${HOME} and
// ${workspaceFolder} are expanded in command, args, env values and cwd;
// one that cannot be (unset, or a VS Code ${input:…} prompt) is an error
// naming the entry, the field and the placeholder.
//
// A remote entry (a url or serverUrl, or type http, sse or
// streamable-http; Codex's url with bearer_token_env_var, http_headers and
// env_http_headers) is served over HTTP (remote.go). A disabled entry ("disabled": true, Codex's
// enabled = false) is skipped with a warning too. Keys capbridge has no
// use for (an editor's "autoApprove", Codex's timeouts, …) are ignored,
// since the file belongs to the editor; each server gets the defaults of
// NewServer, since the editor formats have no place for capbridge's
// limits, which is what capbridge.toml is for.
func LoadEditor(name string, data []byte, opts EditorOptions) (servers []Server, warnings ErrorList, err error) {
	if len(data) > maxFileSize {
		return nil, nil, fmt.Errorf("%s: %w", name, ErrTooLarge)
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	l := &editorLoader{file: name, opts: opts, x: expander{lookup: opts.LookupEnv, workspace: opts.Workspace}}
	var entries []*editorEntry
	if strings.EqualFold(filepath.Ext(name), ".toml") {
		entries = l.loadCodex(data)
	} else {
		entries = l.loadJSON(data)
	}
	servers = l.servers(entries)
	if len(l.errs) > 0 {
		slices.SortStableFunc(l.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
		return nil, nil, l.errs
	}
	return servers, l.warns, nil
}

// editorEntry is one server as an editor writes it, whatever the format.
// Fields capbridge cannot honour are kept only so that they can be
// refused or skipped by name.
type editorEntry struct {
	name string
	path string // the key path in messages: "mcpServers.github"
	line int

	Type      string            `json:"type"`
	Command   *string           `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	URL       string            `json:"url"`
	ServerURL string            `json:"serverUrl"` // Windsurf's name for url
	Headers   map[string]string `json:"headers"`
	EnvFile   string            `json:"envFile"`
	Disabled  bool              `json:"disabled"`

	allow, deny []string // Codex's enabled_tools and disabled_tools
	// Codex's bearer_token_env_var and env_http_headers: variables by
	// name, not values.
	bearerEnv  string
	headerVars map[string]string
}

type editorLoader struct {
	file        string
	opts        EditorOptions
	x           expander
	errs, warns ErrorList
}

func (l *editorLoader) fail(line int, key, fix, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix})
}

func (l *editorLoader) warn(line int, key, fix, format string, args ...any) {
	l.warns = append(l.warns, &Error{File: l.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix})
}

// remoteTypes are the transports editors name for servers reached over
// the network (MCP 2025-06-18 "Transports", and the older SSE one).
var remoteTypes = []string{"http", "sse", "streamable-http", "streamableHttp"}

// servers checks and expands every entry, skipping disabled
// ones, and returns the servers sorted by name.
func (l *editorLoader) servers(entries []*editorEntry) []Server {
	var out []Server
	for _, e := range entries {
		url := cmp.Or(e.URL, e.ServerURL)
		switch {
		case e.Disabled:
			l.warn(e.line, e.path, "enable it in the editor's file to have capbridge serve it", "is disabled; skipping it")
			continue
		case url != "" || slices.Contains(remoteTypes, e.Type):
			if s, ok := l.remoteEntry(e, url); ok {
				out = append(out, s)
			}
			continue
		case e.Type != "" && e.Type != "stdio":
			l.fail(e.line, e.path+".type", `use "stdio", "http", "streamable-http" or "sse"`, "unknown transport type %q", e.Type)
			continue
		case e.Disabled:
			l.warn(e.line, e.path, "enable it in the editor's file to have capbridge serve it", "is disabled; skipping it")
			continue
		}
		if s, ok := l.entry(e); ok {
			out = append(out, s)
		}
	}
	if len(out) > maxServers {
		l.fail(0, "", fmt.Sprintf("run at most %d servers per capbridge", maxServers), "%d servers configured", len(out))
		return nil
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// entry checks one stdio entry and expands its placeholders.
func (l *editorLoader) entry(e *editorEntry) (Server, bool) {
	n := len(l.errs)
	if !validName.MatchString(e.name) {
		l.fail(e.line, e.path, nameFix, "bad server name %q", e.name)
	}
	if e.Command == nil || *e.Command == "" {
		l.fail(e.line, e.path, `add "command": "/path/to/server" (arguments go in "args")`, "no command")
	}
	if e.EnvFile != "" {
		l.fail(e.line, e.path+".envFile", `copy the variables into "env"`, "envFile is not supported")
	}
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		if !envName.MatchString(k) {
			l.fail(e.line, e.path+".env", "an environment variable name has letters, digits and '_' and does not start with a digit", "bad variable name %q", k)
		}
	}
	if len(l.errs) > n {
		return Server{}, false
	}
	s := NewServer(e.name, l.expand(e, "command", *e.Command))
	for i, a := range e.Args {
		// A key passed as an argument ("--api-key", "${API_KEY}") is as
		// secret as one in env.
		s.Args = append(s.Args, l.expandSecret(e, fmt.Sprintf("args[%d]", i), a, &s.Secrets, true))
	}
	if e.Env != nil {
		s.Env = make(map[string]string, len(e.Env))
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			if l.deferred(e, "env."+k, e.Env[k], &s.Refs) {
				s.Env[k] = e.Env[k]
				continue
			}
			s.Env[k] = l.expandSecret(e, "env."+k, e.Env[k], &s.Secrets, true)
		}
	}
	if e.Cwd != "" {
		s.Cwd = l.expand(e, "cwd", e.Cwd)
		if len(l.errs) == n && !strings.HasPrefix(s.Cwd, "/") {
			l.fail(e.line, e.path+".cwd", "give an absolute path, starting with / (${workspaceFolder}/sub works)", "%q is not an absolute path", s.Cwd)
		}
	}
	if len(l.errs) == n && s.Command == "" {
		l.fail(e.line, e.path+".command", "set the variable it names, or write the program's path", "is empty once expanded")
	}
	s.ToolsAllow, s.ToolsDeny = e.allow, e.deny
	s.File, s.Line = l.file, e.line
	return s, len(l.errs) == n
}

// deferred reports whether v holds a secret reference (${file:…},
// ${cmd:…}): then it is kept as written, its form checked, for
// ResolveSecrets to expand whole, variables included; a value without one
// is expanded now.
func (l *editorLoader) deferred(e *editorEntry, field, v string, refs *[]Ref) bool {
	if !strings.Contains(v, "${file:") && !strings.Contains(v, "${cmd:") {
		return false
	}
	x := expander{lookup: func(string) (string, bool) { return "", true }, workspace: l.x.workspace, refs: true, dry: true}
	if _, u := x.expand(v); u != nil {
		l.fail(e.line, e.path+"."+field, u.fix, "%s", u.msg)
		return true
	}
	*refs = append(*refs, Ref{Key: field, Template: v, Line: e.line})
	return true
}

// expandSecret is expand for where a token exported for the server
// arrives (an env or header value, an argument, a remote URL): what each
// variable in it resolved to, and with whole the whole value when one
// did, is recorded in *secrets for redaction, as ResolveSecrets records
// what capbridge.toml's references resolve to. The workspace and the
// home directory are paths, not recorded (expander.found).
func (l *editorLoader) expandSecret(e *editorEntry, field, v string, secrets *map[string]string, whole bool) string {
	x := l.x
	recorded := false
	record := func(key, val string) {
		if len(val) >= minSecret {
			if *secrets == nil {
				*secrets = map[string]string{}
			}
			(*secrets)[key] = val
			recorded = true
		}
	}
	x.found = func(ph, val string) { record(field+" "+ph, val) }
	out, u := x.expand(v)
	if u != nil {
		l.fail(e.line, e.path+"."+field, u.fix, "%s", u.msg)
		return out
	}
	if recorded && whole {
		record(field, out)
	}
	return out
}

func (l *editorLoader) expand(e *editorEntry, field, v string) string {
	out, u := l.x.expand(v)
	if u != nil {
		l.fail(e.line, e.path+"."+field, u.fix, "%s", u.msg)
	}
	return out
}

// loadJSON reads a JSONC file. Standardizing replaces comments and
// trailing commas with spaces, so every offset, and so every line, is the
// original file's.
func (l *editorLoader) loadJSON(raw []byte) []*editorEntry {
	raw = bytes.TrimPrefix(raw, utf8BOM)
	if !l.checkDepth(raw) {
		return nil
	}
	data, err := hujson.Standardize(slices.Clone(raw))
	if err != nil {
		line, col := 0, 0
		// hujson reports "hujson: line N, column M: …" and exports no
		// position; without one the message still stands.
		_, _ = fmt.Sscanf(err.Error(), "hujson: line %d, column %d", &line, &col)
		l.fail(line, "", "fix the JSON syntax (comments and trailing commas are fine)", "JSON: %s", JSONCSyntax(err))
		return nil
	}
	j := &jsonFile{l: l, data: data}
	return j.load()
}

type jsonFile struct {
	l    *editorLoader
	data []byte
}

func (j *jsonFile) fail(offset int64, key, fix, format string, args ...any) {
	j.l.fail(lineAt(j.data, offset), key, fix, format, args...)
}

// lineAt converts a byte offset into a 1-based line number.
func lineAt(data []byte, offset int64) int {
	if offset < 0 || offset > int64(len(data)) {
		return 0
	}
	return 1 + bytes.Count(data[:offset], []byte{'\n'})
}

func (j *jsonFile) load() []*editorEntry {
	if at, first, key := duplicateMember(j.data); at >= 0 {
		j.fail(at, "", "keep one of them: JSON readers disagree on which one counts", "%q appears twice in one object (first on line %d)", key, lineAt(j.data, first))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(j.data))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		j.syntax(err, dec.InputOffset())
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		j.fail(dec.InputOffset(), "", "the file must hold exactly one JSON object", "unexpected data after the top-level object")
		return nil
	}
	key := ""
	for _, k := range []string{"mcpServers", "servers"} {
		if _, ok := top[k]; ok {
			if key != "" {
				j.fail(0, "", "keep one of them", "has both \"mcpServers\" and \"servers\"")
				return nil
			}
			key = k
		}
	}
	if key == "" {
		j.fail(0, "", `an editor's MCP config has {"mcpServers": {…}} (Claude Desktop, Claude Code, Cursor, Windsurf) or {"servers": {…}} (VS Code); for Codex give its config.toml`, "no \"mcpServers\" or \"servers\" object")
		return nil
	}
	return j.entries(key)
}

// entries walks the server map with a token decoder, so that each entry's
// errors carry the line where that entry starts.
func (j *jsonFile) entries(key string) []*editorEntry {
	start := j.objectAt(key)
	if start < 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(j.data[start:]))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		j.fail(start, key, "write it as an object mapping server names to entries", "%q must be an object", key)
		return nil
	}
	var out []*editorEntry
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			j.syntax(err, start+dec.InputOffset())
			return nil
		}
		name, _ := t.(string)
		at := start + dec.InputOffset()
		e := &editorEntry{name: name, path: key + "." + name, line: lineAt(j.data, at)}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			j.syntax(err, start+dec.InputOffset())
			return nil
		}
		// raw ends where the decoder is; it starts that much before.
		valueAt := start + dec.InputOffset() - int64(len(raw))
		if !j.exactKeys(e, raw, valueAt) {
			continue
		}
		if err := json.Unmarshal(raw, e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				j.fail(valueAt+te.Offset, e.path+"."+te.Field, "see your editor's MCP documentation for the entry format", "%s must be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
				continue
			}
			j.syntax(err, valueAt)
			return nil
		}
		if seen[name] {
			j.fail(at, e.path, "give each server a different name", "server %q appears twice", name)
			continue
		}
		seen[name] = true
		out = append(out, e)
		if len(out) > maxServers {
			j.fail(at, key, fmt.Sprintf("run at most %d servers per capbridge", maxServers), "too many servers")
			return nil
		}
	}
	return out
}

// entryKeys are the member names of an entry capbridge reads, as the
// editors spell them.
var entryKeys = func() []string {
	var keys []string
	t := reflect.TypeFor[editorEntry]()
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}()

// exactKeys refuses an entry with a member whose name is one capbridge
// reads but spelled in another case ("URL", "Command"). encoding/json
// matches member names regardless of case, the editors (JavaScript) only
// exactly: beside "url", "URL" could win and send the entry's token to
// another server, and alone it is a key the editor ignores. at is the
// offset of raw, the entry, in the file.
func (j *jsonFile) exactKeys(e *editorEntry, raw json.RawMessage, at int64) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return true // not an object: Unmarshal says so
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return true
		}
		k, _ := t.(string)
		if i := slices.IndexFunc(entryKeys, func(n string) bool { return strings.EqualFold(n, k) }); i >= 0 && entryKeys[i] != k {
			j.fail(at+dec.InputOffset(), e.path+"."+k, fmt.Sprintf("write %q, as the editors read it, and keep one such key", entryKeys[i]),
				"%q is %q in another case, which editors do not read", k, entryKeys[i])
			return false
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return true
		}
	}
	return true
}

// objectAt finds the offset of the value of the top-level key, or -1.
func (j *jsonFile) objectAt(key string) int64 {
	dec := json.NewDecoder(bytes.NewReader(j.data))
	if _, err := dec.Token(); err != nil {
		return -1
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return -1
		}
		if t == key {
			// InputOffset is just past the key; the value starts after
			// the colon and any white space.
			off := dec.InputOffset()
			for off < int64(len(j.data)) && (j.data[off] == ':' || j.data[off] == ' ' || j.data[off] == '\t' || j.data[off] == '\n' || j.data[off] == '\r') {
				off++
			}
			return off
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
	}
	return -1
}

func (j *jsonFile) syntax(err error, offset int64) {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
	}
	j.fail(offset, "", "fix the JSON syntax", "JSON: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "a string"
	case "slice":
		return "an array of strings"
	case "map":
		return "an object of strings"
	default:
		return "a " + goKind
	}
}

// loadCodex reads Codex's config.toml, whose [mcp_servers.<name>] tables
// are the servers; the rest of the file is Codex's and is not looked at.
func (l *editorLoader) loadCodex(data []byte) []*editorEntry {
	data = bytes.TrimPrefix(data, utf8BOM)
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		line := 0
		if errors.As(err, &de) {
			line, _ = de.Position()
		}
		l.fail(line, "", "see https://toml.io for the syntax", "TOML syntax: %v", err)
		return nil
	}
	r := &reader{file: l.file, pos: indexPositions(data)}
	defer func() { l.errs = append(l.errs, r.errs...) }()
	v, ok := doc["mcp_servers"]
	if !ok {
		r.fail("", `Codex lists servers as [mcp_servers.NAME] tables with command = "…"`, "no [mcp_servers] table")
		return nil
	}
	t, ok := r.table("mcp_servers", v)
	if !ok {
		return nil
	}
	var out []*editorEntry
	for _, name := range slices.Sorted(maps.Keys(t)) {
		path := "mcp_servers." + name
		st, ok := r.table(path, t[name])
		if !ok {
			continue
		}
		e := &editorEntry{name: name, path: path, line: r.pos.line(path)}
		for _, k := range slices.Sorted(maps.Keys(st)) {
			v, key := st[k], path+"."+k
			switch k {
			case "command":
				var c string
				if r.str(key, v, &c) {
					e.Command = &c
				}
			case "args":
				r.strs(key, v, &e.Args)
			case "env":
				r.env(key, v, &e.Env)
			case "cwd":
				r.str(key, v, &e.Cwd)
			case "url":
				r.str(key, v, &e.URL)
			case "bearer_token_env_var":
				r.str(key, v, &e.bearerEnv)
			case "http_headers":
				r.headers(key, v, &e.Headers)
			case "env_http_headers":
				r.headers(key, v, &e.headerVars)
			case "enabled":
				var enabled bool
				r.boolean(key, v, &enabled)
				e.Disabled = !enabled
			case "enabled_tools":
				r.strs(key, v, &e.allow)
				if e.allow == nil {
					e.allow = []string{} // an empty list enables nothing
				}
			case "disabled_tools":
				r.strs(key, v, &e.deny)
			}
		}
		out = append(out, e)
	}
	return out
}

// Merge adds servers from an editor's config to cfg. A name defined in
// both is an error naming both places: capbridge never guesses which of
// two definitions the operator meant.
func Merge(cfg *Config, servers []Server) error {
	var errs ErrorList
	for _, s := range servers {
		if i := slices.IndexFunc(cfg.Servers, func(t Server) bool { return t.Name == s.Name }); i >= 0 {
			t := cfg.Servers[i]
			errs = append(errs, &Error{File: s.File, Line: s.Line, Key: s.Name, Msg: fmt.Sprintf("server %q is also defined at %s:%d", s.Name, t.File, t.Line), Fix: "rename one of them or remove one"})
			continue
		}
		cfg.Servers = append(cfg.Servers, s)
	}
	if len(cfg.Servers) > maxServers {
		errs = append(errs, &Error{File: servers[0].File, Msg: fmt.Sprintf("%d servers configured", len(cfg.Servers)), Fix: fmt.Sprintf("run at most %d servers per capbridge", maxServers)})
	}
	if len(errs) > 0 {
		return errs
	}
	slices.SortFunc(cfg.Servers, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return nil
}
