// Package bound declares, once, the limits that more than one capbridge
// package enforces, so that a value capwire lets through is one that
// interchange and mcpwire accept too.
//
// A bound that only one package enforces is declared in that package; the
// operator's settings (bridge/config) default to these values and may
// only lower the nesting bound, never raise it.
package bound

// MaxMessage is the default largest message on either wire: a capwire
// frame's payload and an MCP stdio line (newline excluded). 16 MiB holds
// a large tool result with room to spare while keeping one hostile peer's
// cost bounded; the operator's max_frame sets both.
const MaxMessage = 16 << 20

// MaxTools is the most tools capbridge reads from one server's listing,
// and so the most it serves: the MCP client stops reading past it, and
// the generator plans at most this many. Short of it a server is never
// refused for the size of what it exposes: its surface degrades rung by
// rung to a paged index, and calls find their tool by a map. A tool's
// cost is linear (docs/perf/scale.md measures a server of 10 000), so
// 16 384 leaves room above the largest servers known while bounding
// what one listing may cost.
const MaxTools = 16384

// MaxDepth is the deepest nesting of arrays and objects (maps) that any
// decoder in capbridge accepts: a value may sit inside MaxDepth
// containers, and container number MaxDepth+1 is refused. capwire,
// interchange and mcpwire share it so that a value one of them accepts is
// never refused by the next for its depth. 128 is far beyond what tool
// arguments, results or schemas use, and keeps recursion shallow.
const MaxDepth = 128

// InheritEnv returns the names of the variables a server inherits from
// capbridge's environment when its configuration names none: enough for
// npx, uvx and ordinary binaries to find their tools and caches, nothing
// that usually carries a credential. Each call returns a new slice.
func InheritEnv() []string {
	return []string{"HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "TMPDIR", "TZ", "USER"}
}
