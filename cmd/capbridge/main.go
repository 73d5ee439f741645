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
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

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
		"version":     {"print this build's version and commit (also --version)", runVersion},
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
	if args[0] == "--version" || args[0] == "-version" {
		// What other tools answer --version with; `capbridge version`.
		args = []string{"version"}
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
	fs := newCmdFlags("version", "capbridge version", `
Print this build's module version, the commit it was built from (marked
modified when the checkout had uncommitted changes) and that commit's
time, and the Go toolchain and platform, all from the build info the Go
toolchain stamps. capbridge --version prints the same.`)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError(stderr, "takes no arguments")
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprint(stdout, versionText(bi, ok))
	return exitOK
}

// versionText is what version prints for the build info bi (ok=false: the
// binary carries none). A tagged go install has the tag as its module
// version and no VCS settings (it was built from the module proxy's zip);
// a go build in a checkout has a version the toolchain derived from the
// commit and its tags, and the commit itself.
func versionText(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "capbridge devel (this binary carries no build info)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "capbridge %s\n", version1(bi))
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if rev := set["vcs.revision"]; rev != "" {
		if set["vcs.modified"] == "true" {
			rev += " (modified: built with uncommitted changes)"
		}
		fmt.Fprintf(&b, "commit    %s\n", rev)
	}
	if t := set["vcs.time"]; t != "" {
		fmt.Fprintf(&b, "committed %s\n", t)
	}
	if bi.Main.Sum != "" {
		fmt.Fprintf(&b, "module    %s %s %s\n", bi.Main.Path, bi.Main.Version, bi.Main.Sum)
	}
	platform := set["GOOS"] + "/" + set["GOARCH"]
	if platform == "/" {
		platform = runtime.GOOS + "/" + runtime.GOARCH
	}
	fmt.Fprintf(&b, "built by  %s for %s\n", bi.GoVersion, platform)
	return b.String()
}

// version is this build's version in one word, for an MCP clientInfo or
// serverInfo: the module version when the toolchain stamped one, else
// "devel" with the commit.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return version1(bi)
}

func version1(bi *debug.BuildInfo) string {
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
