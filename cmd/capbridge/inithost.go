package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/tailscale/hujson"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/regular"
)

// The MCP hosts whose entry `capbridge init --mcp-host` writes, and the key
// each keeps its servers under.
var mcpHosts = map[string]string{
	"claude-code":    "", // a command line: `claude mcp add`
	"claude-desktop": "mcpServers",
	"cursor":         "mcpServers",
	"vscode":         "servers",
}

// hostEntry is the command a host runs: capbridge mcp with the config.
type hostEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Type    string   `json:"type,omitempty"` // VS Code names the transport
}

// mcpHostEntry writes host's entry for `capbridge mcp -c cfg` to stdout
// and, when into is set, adds it to that host config file (created when
// missing; other entries and comments kept, the whole re-indented by
// hujson's formatter; written through a symbolic link; an existing
// "capbridge" entry replaced only with force).
func mcpHostEntry(host, cfg, into string, force bool, stdout io.Writer) error {
	key, ok := mcpHosts[host]
	if !ok {
		return fmt.Errorf("capbridge init: --mcp-host %q: one of claude-code, claude-desktop, cursor, vscode", host)
	}
	// The host starts capbridge with its own environment, often without
	// the user's PATH: both paths are absolute.
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fmt.Errorf("capbridge init: finding this binary: %w", err)
	}
	if cfg, err = filepath.Abs(cfg); err != nil {
		return err
	}
	for _, p := range []string{exe, cfg} {
		if !utf8.ValidString(p) {
			// JSON would write U+FFFD for its bad bytes: a path the host
			// would not find.
			return fmt.Errorf("capbridge init: %q is not UTF-8, which a host's JSON config cannot hold: rename or move it", p)
		}
	}
	if _, err := os.Stat(cfg); err != nil {
		return fmt.Errorf("capbridge init: the config the entry names: %w (write it first: capbridge init --out %s)", err, cfg)
	}
	e := hostEntry{Command: exe, Args: []string{"mcp", "-c", cfg}}
	if host == "claude-code" {
		if into != "" {
			return errors.New("capbridge init: Claude Code keeps its servers itself: run the line below rather than --mcp-host-config")
		}
		fmt.Fprintf(stdout, "claude mcp add capbridge -- %s\n", shellJoin(config.Server{Command: e.Command, Args: e.Args}))
		return nil
	}
	if host == "vscode" {
		e.Type = "stdio"
	}
	entry, _ := json.MarshalIndent(map[string]any{key: map[string]any{"capbridge": e}}, "", "  ")
	if into == "" {
		fmt.Fprintf(stdout, "%s\n", entry)
		return nil
	}
	return addHostEntry(into, key, e, force, stdout)
}

// addHostEntry adds e as key.capbridge in the host config at path.
func addHostEntry(path, key string, e hostEntry, force bool, stdout io.Writer) error {
	data, err := regular.ReadFile(path, maxConfigFile)
	mode := os.FileMode(0o644)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = []byte("{}\n")
	case err != nil:
		return fmt.Errorf("capbridge init: %w", err)
	default:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	if line, deep := config.TooDeep(data); deep {
		return fmt.Errorf("capbridge init: %s:%d: arrays and objects nested more than %d deep; a host's config nests a few levels, check what wrote this file", path, line, bound.MaxDepth)
	}
	v, err := hujson.Parse(data)
	if err != nil {
		return fmt.Errorf("capbridge init: %s is not JSON (with comments): %s", path, config.JSONCSyntax(err))
	}
	// A repeated key: hosts read the last, the patch would change the
	// first, and init would report an entry the host never sees.
	std := v.Clone()
	std.Standardize()
	if line, first, key, ok := config.DuplicateKey(std.Pack()); ok {
		return fmt.Errorf("capbridge init: %s:%d: %q appears twice in one object (first on line %d); keep one of them", path, line, key, first)
	}
	var ops []map[string]any
	if v.Find("/"+key) == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/" + key, "value": map[string]any{}})
	}
	if v.Find("/"+key+"/capbridge") != nil {
		if !force {
			return fmt.Errorf("capbridge init: %s has a capbridge entry already; give --force to replace it", path)
		}
		ops = append(ops, map[string]any{"op": "remove", "path": "/" + key + "/capbridge"})
	}
	ops = append(ops, map[string]any{"op": "add", "path": "/" + key + "/capbridge", "value": e})
	patch, _ := json.Marshal(ops)
	if err := v.Patch(patch); err != nil {
		return fmt.Errorf("capbridge init: adding the entry to %s: %w", path, err)
	}
	v.Format()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := replaceUserFile(path, v.Pack(), mode); err != nil {
		return fmt.Errorf("capbridge init: %w", err)
	}
	fmt.Fprintf(stdout, "added capbridge to %s; the host starts it as: %s\n", path, shellJoin(config.Server{Command: e.Command, Args: e.Args}))
	return nil
}
