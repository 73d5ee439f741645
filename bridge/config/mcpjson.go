package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// LoadMCPJSON reads the server list of an editor's MCP configuration:
// {"mcpServers": {name: entry}} as Claude Desktop and Cursor write it, or
// {"servers": {name: entry}} as VS Code does. Only stdio entries can be
// run by capbridge; a remote (url) entry, an envFile or a ${input:…}
// placeholder is refused with a message saying what to do instead. Keys
// capbridge has no use for (an editor's "disabled", "autoApprove", …) are
// ignored, since the file belongs to the editor.
//
// Each server gets the defaults of NewServer; the editor formats have no
// place for capbridge's limits, which is what capbridge.toml is for.
func LoadMCPJSON(name string, data []byte) ([]Server, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: %w", name, ErrTooLarge)
	}
	l := &jsonLoader{file: name, data: data}
	servers := l.load()
	if len(l.errs) > 0 {
		return nil, l.errs
	}
	return servers, nil
}

type jsonLoader struct {
	file string
	data []byte
	errs ErrorList
}

func (l *jsonLoader) fail(offset int64, key, fix, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: lineAt(l.data, offset), Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix})
}

// lineAt converts a byte offset into a 1-based line number.
func lineAt(data []byte, offset int64) int {
	if offset < 0 || offset > int64(len(data)) {
		return 0
	}
	return 1 + bytes.Count(data[:offset], []byte{'\n'})
}

// editorEntry is one server as editors write it. Fields capbridge cannot
// honour are decoded only so that they can be refused by name.
type editorEntry struct {
	Type    string            `json:"type"`
	Command *string           `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Cwd     string            `json:"cwd"`
	URL     string            `json:"url"`
	EnvFile string            `json:"envFile"`
}

func (l *jsonLoader) load() []Server {
	dec := json.NewDecoder(bytes.NewReader(l.data))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		l.syntax(err, dec.InputOffset())
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		l.fail(dec.InputOffset(), "", "the file must hold exactly one JSON object", "unexpected data after the top-level object")
		return nil
	}
	key := ""
	for _, k := range []string{"mcpServers", "servers"} {
		if _, ok := top[k]; ok {
			if key != "" {
				l.fail(0, "", "keep one of them", "has both \"mcpServers\" and \"servers\"")
				return nil
			}
			key = k
		}
	}
	if key == "" {
		l.fail(0, "", `an editor's MCP config has {"mcpServers": {…}} (Claude Desktop, Cursor) or {"servers": {…}} (VS Code)`, "no \"mcpServers\" or \"servers\" object")
		return nil
	}
	return l.entries(key)
}

// entries walks the server map with a token decoder, so that each entry's
// errors carry the line where that entry starts.
func (l *jsonLoader) entries(key string) []Server {
	start := l.objectAt(key)
	if start < 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(l.data[start:]))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		l.fail(start, key, "write it as an object mapping server names to entries", "%q must be an object", key)
		return nil
	}
	var out []Server
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			l.syntax(err, start+dec.InputOffset())
			return nil
		}
		name, _ := t.(string)
		at := start + dec.InputOffset()
		path := key + "." + name
		var e editorEntry
		if err := dec.Decode(&e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				l.fail(start+te.Offset, path+"."+te.Field, "see your editor's MCP documentation for the entry format", "%s must be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
				continue
			}
			l.syntax(err, start+dec.InputOffset())
			return nil
		}
		if seen[name] {
			l.fail(at, path, "give each server a different name", "server %q appears twice", name)
			continue
		}
		seen[name] = true
		if s, ok := l.entry(at, path, name, e); ok {
			out = append(out, s)
		}
		if len(out) > maxServers {
			l.fail(at, key, fmt.Sprintf("run at most %d servers per capbridge", maxServers), "too many servers")
			return nil
		}
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (l *jsonLoader) entry(at int64, path, name string, e editorEntry) (Server, bool) {
	n := len(l.errs)
	if !validName.MatchString(name) {
		l.fail(at, path, nameFix, "bad server name %q", name)
	}
	switch {
	case e.URL != "" || (e.Type != "" && e.Type != "stdio"):
		l.fail(at, path, "capbridge runs stdio servers only; run this one behind a stdio proxy, or leave it out of the file given to capbridge", "is a remote server (type %q, url %q)", e.Type, e.URL)
	case e.Command == nil || *e.Command == "":
		l.fail(at, path, `add "command": "/path/to/server" (arguments go in "args")`, "no command")
	}
	if e.EnvFile != "" {
		l.fail(at, path+".envFile", `copy the variables into "env"`, "envFile is not supported")
	}
	for _, v := range append(slices.Clone(e.Args), mapValues(e.Env)...) {
		if strings.Contains(v, "${input:") {
			l.fail(at, path, `replace the placeholder with its value in "env" or "args"`, "uses a VS Code ${input:…} prompt, which capbridge cannot answer")
			break
		}
	}
	for k := range e.Env {
		if !envName.MatchString(k) {
			l.fail(at, path+".env", "an environment variable name has letters, digits and '_' and does not start with a digit", "bad variable name %q", k)
		}
	}
	if e.Cwd != "" && !strings.HasPrefix(e.Cwd, "/") {
		l.fail(at, path+".cwd", "give an absolute path, starting with /", "%q is not an absolute path", e.Cwd)
	}
	if len(l.errs) > n {
		return Server{}, false
	}
	s := NewServer(name, *e.Command)
	s.Args, s.Env, s.Cwd = e.Args, e.Env, e.Cwd
	s.File, s.Line = l.file, lineAt(l.data, at)
	return s, true
}

// objectAt finds the offset of the value of the top-level key, or -1.
func (l *jsonLoader) objectAt(key string) int64 {
	dec := json.NewDecoder(bytes.NewReader(l.data))
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
			for off < int64(len(l.data)) && (l.data[off] == ':' || l.data[off] == ' ' || l.data[off] == '\t' || l.data[off] == '\n' || l.data[off] == '\r') {
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

func (l *jsonLoader) syntax(err error, offset int64) {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
	}
	l.fail(offset, "", "fix the JSON syntax (a trailing comma or a comment is the usual culprit)", "JSON: %v", err)
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

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
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
