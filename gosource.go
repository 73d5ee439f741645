// Package capbridge carries the source of the Go capwire client, with the
// module's go.mod and go.sum, into the capbridge binary: a Go program
// that capbridge runs builds its façades against it, inside the jail,
// without a checkout or the network.
package capbridge

import "embed"

// GoClient holds capwire's Go source and the module's internal packages
// it imports (non-test files are what a build reads; test files ride
// along and are left out by the reader), go.mod and go.sum.
// TestGoClientComplete in codemode keeps the list what capwire imports.
//
//go:embed go.mod go.sum capwire/*.go internal/bound/*.go internal/framewrite/*.go internal/msgpk/*.go
//go:embed internal/pointer/*.go internal/readside/*.go internal/unixconn/*.go
var GoClient embed.FS
