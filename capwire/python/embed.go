// Package python embeds capwire's Python client (the package capwire in
// this directory), so that capbridge gen can lay it beside a Python
// façade and `import capwire` resolves with nothing installed.
package python

import "embed"

// Client is the capwire package: capwire/*.py and its py.typed marker.
//
//go:embed capwire/*.py capwire/py.typed
var Client embed.FS
