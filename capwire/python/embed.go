// Package python carries the Python capwire client into Go binaries:
// capbridge gives it to the programs it runs, so an installed binary needs
// no checkout of this directory.
package python

import "embed"

// Package holds the capwire package (capwire/*.py and py.typed), as
// written.
//
//go:embed capwire/*.py capwire/py.typed
var Package embed.FS
