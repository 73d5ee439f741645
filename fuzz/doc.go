// Package fuzz holds capbridge's cross-package fuzz targets: those that
// drive several packages at once through a live service, where a
// package's own in-package target cannot reach.
//
// The package has no API; its tests are the targets. README.md lists
// every fuzz target in the project with the command that runs it.
package fuzz
