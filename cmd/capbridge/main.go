// Command capbridge lets sandboxed, model-written programs call the tools of
// MCP servers through generated façades, over a Unix socket.
//
// Usage:
//
//	capbridge <command> [flags]
//
// Each command is a thin shell over a package; the logic lives in the
// packages. Run `capbridge help` for the list.
package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"

	"github.com/capbridge/capbridge/codemode"
	"github.com/capbridge/capbridge/jail"
)

// A command runs with its arguments and the process's output streams and
// returns the exit status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// Exit statuses shared by every command.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
)

func commands() map[string]command {
	return map[string]command{
		"call":        {"call a tool through the running capbridge, with operator authority", runCall},
		"completion":  {"print a shell completion script (bash, zsh or fish)", runCompletion},
		"describe":    {"show the full declarations of a server's tools", runDescribe},
		"demo-server": {"serve the built-in demo MCP server on stdio (serve runs it when it has no config)", runDemoServer},
		"doctor":      {"check a config without serving: sockets, each server's boot (timed), a clean stop", runDoctor},
		"gen":         {"write a server's façade and surface (from the running capbridge, or a saved tools/list)", runGen},
		"grant":       {"issue a grant and print its token", runGrant},
		"init":        {"write a commented capbridge.toml, optionally from an editor's MCP config", runInit},
		"listing":     {"print the tools/list JSON a server's façade was generated from", runListing},
		"lock":        {"boot the servers and write the approved tool surface to capbridge.lock", runLock},
		"mcp":         {"serve MCP on stdio for an MCP host: search, describe, and run programs in a jail against the façades", runMCP},
		"login":       {"authorize capbridge at a remote server that needs a person's login (OAuth), and save the tokens", runLogin},
		"logout":      {"forget a remote server's saved login", runLogout},
		"metrics":     {"print the running capbridge's metrics in the Prometheus text format", runMetrics},
		"reload":      {"apply a changed config to the running capbridge without a restart", runReload},
		"resources":   {"list the resources and resource templates a server offers", runResources},
		"revoke":      {"revoke a grant", runRevoke},
		"run":         {"run one TypeScript or Python program in the jail against the façades", runRun},
		"search":      {"find tools by words in their names, descriptions and arguments", runSearch},
		"serve":       {"run the service", runServe},
		"skew":        {"compare the servers' live tools with capbridge.lock (exit 3 on drift)", runSkew},
		"status":      {"show the servers, grants and connections of the running capbridge", runStatus},
		"tools":       {"list the running capbridge's tools and their parameters (--surface: what a model is shown)", runTools},
		"version":     {"print the version of this build", runVersion},
	}
}

func main() {
	// First: this process may be a jail's init, which must build the jail
	// before anything else runs.
	jail.MaybeInit(codemode.StripTypes)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || (args[0] == "help" && len(args) == 1) {
		usage(stdout, cmds)
		return exitOK
	}
	if args[0] == "help" {
		// `capbridge help CMD` is `capbridge CMD --help`.
		args = []string{args[1], "--help"}
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "capbridge: unknown command %q; run `capbridge help` for the list\n", args[0])
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: capbridge <command> [flags] [arguments]\n\ncommands:")
	for _, name := range sortedKeys(cmds) {
		fmt.Fprintf(w, "  %-11s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w, "\nRun `capbridge help COMMAND` for a command's flags. The client commands find the\n"+
		"running capbridge by --control PATH, -c capbridge.toml, $"+envControl+", or serve's default.")
}

func sortedKeys(m map[string]command) []string {
	return slices.Sorted(maps.Keys(m))
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("version", "capbridge version", "Print the version of this build.")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "takes no arguments")
	}
	fmt.Fprintln(stdout, "capbridge", version())
	return exitOK
}

// version is the module version when built from a tagged module, else the
// VCS revision the toolchain stamped, else "devel".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel-" + rev
}
