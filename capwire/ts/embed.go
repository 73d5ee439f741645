// Package ts carries the TypeScript capwire client's source into Go
// binaries: capbridge compiles it for the programs it runs, so an
// installed binary needs no checkout of this directory.
package ts

import "embed"

// Source holds src/*.ts, the client as written.
//
//go:embed src/*.ts
var Source embed.FS
