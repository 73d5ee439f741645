package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/capbridge/capbridge/internal/inert"
	"github.com/capbridge/capbridge/internal/lock"
)

// Exit statuses of lock and skew, documented in docs/lock.md. Drift has
// 3 because scripts and CI test for it; configuration errors, which
// serve reports as 3, are 4 here.
const (
	exitDrift         = 3 // skew: the live surface differs from the lock
	exitSurfaceConfig = 4 // the config or the lock file cannot be read or is wrong
)

// skewReport is skew --json's output.
type skewReport struct {
	Lock    string       `json:"lock"`
	Clean   bool         `json:"clean"`
	Drift   []lock.Drift `json:"drift"`
	Servers int          `json:"servers"`
	Tools   int          `json:"tools"`
	// Down is each server that did not boot, with why; its surface
	// could not be compared.
	Down map[string]string `json:"down,omitempty"`
}

func runSkew(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("skew", "capbridge skew [-c capbridge.toml | --mcp-config EDITOR-CONFIG] [--running] [--lock capbridge.lock] [--json]", `
Compare the live tool surface with the lock: boot the configured servers as
capbridge lock does (or with --running ask the capbridge serving them), and
report every difference by class: tool_added, tool_removed,
input_schema_widened, input_schema_narrowed, input_schema_changed,
output_schema_changed, description_changed, annotations_changed,
icons_changed, execution_changed, meta_changed, server_not_locked,
server_not_configured.
Exit status: 0 no drift, 1 a server did not boot (its surface could not be
compared), 2 bad command line, 3 drift, 4 the configuration or the lock file
cannot be read or is invalid.`)
	sf := addSurfaceFlags(fs)
	lockFlag := fs.String("lock", "", "the lock to compare with (default: the config's [bridge] lock, else "+defaultLockFile+")")
	asJSON := fs.Bool("json", false, "print the report as JSON, for scripts")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "unexpected argument %q; skew takes only flags", pos[0])
	}
	if msg := sf.misused(); msg != "" {
		return fs.usageError(stderr, "%s", msg)
	}
	cfg, err := sf.load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitSurfaceConfig
	}
	path := lockPath(*lockFlag, cfg)
	locked, err := readLock(path)
	if err != nil {
		fmt.Fprintln(stderr, "capbridge skew:", err)
		return exitSurfaceConfig
	}
	live, down, dropped, err := sf.surface(cfg, surfaceLog(stderr, cfg))
	if err != nil {
		fmt.Fprintln(stderr, "capbridge skew:", err)
		return exitError
	}
	// A server that did not boot is reported as down, not as removed:
	// its tools may be exactly the locked ones.
	compared := locked
	if len(down) > 0 {
		kept := maps.Clone(locked.Servers)
		for name := range down {
			delete(kept, name)
		}
		compared = &lock.File{Servers: kept}
	}
	r := skewReport{Lock: path, Drift: lock.Compare(compared, live), Servers: len(live.Servers)}
	if r.Drift == nil {
		r.Drift = []lock.Drift{}
	}
	// A tool the server still lists but capbridge dropped (its
	// declaration breaks the revision) is removed as far as the lock can
	// tell; the report says it was dropped, and why.
	for i, d := range r.Drift {
		if why, ok := dropped[d.Server][d.Tool]; ok && d.Class == lock.ToolRemoved {
			r.Drift[i].Detail = "dropped by capbridge, though the server lists it: " + why
		}
	}
	for _, s := range live.Servers {
		r.Tools += len(s.Tools)
	}
	r.Clean = len(r.Drift) == 0 && len(down) == 0
	for name, err := range down {
		if r.Down == nil {
			r.Down = map[string]string{}
		}
		r.Down[name] = err.Error()
	}
	if *asJSON {
		out, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		printSkew(stdout, r)
	}
	switch {
	case len(r.Drift) > 0:
		return exitDrift
	case len(down) > 0:
		return exitError
	}
	return exitOK
}

func printSkew(w io.Writer, r skewReport) {
	for _, d := range r.Drift {
		// The tool's name and the detail are the server's words.
		where := d.Server
		if d.Tool != "" {
			where += "." + inert.Line(d.Tool)
		}
		if d.Detail != "" {
			fmt.Fprintf(w, "%s: %s: %s\n", where, d.Class, inert.Line(d.Detail))
		} else {
			fmt.Fprintf(w, "%s: %s\n", where, d.Class)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Down)) {
		fmt.Fprintf(w, "%s: not compared: %s\n", name, inert.Line(r.Down[name]))
	}
	switch {
	case len(r.Drift) > 0:
		fmt.Fprintf(w, "%d differences from %s; review them, then run capbridge lock to approve the new surface\n", len(r.Drift), r.Lock)
	case r.Clean:
		fmt.Fprintf(w, "no drift: %s, %s match %s\n", plural(r.Servers, "server"), plural(r.Tools, "tool"), r.Lock)
	}
}
