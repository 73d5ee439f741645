// Package python carries capwire's Python client (the package capwire in
// this directory) into Go binaries: capbridge gen lays it beside a Python
// façade, and capbridge mcp gives it to the programs it runs, so `import
// capwire` resolves with nothing installed and an installed binary needs
// no checkout of this directory.
package python

import "embed"

// Client is the capwire package, as written: capwire/*.py and its py.typed
// marker.
//
//go:embed capwire/*.py capwire/py.typed
var Client embed.FS
