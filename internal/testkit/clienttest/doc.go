// Package clienttest runs the TypeScript (capwire/ts) and Python
// (capwire/python) clients' own tests from go test, drives both
// clients end to end against a real bridge, and runs programs that import
// the generated TypeScript and Python façades against one (TestFacades,
// which also needs the pinned npm server-everything). It has no code of its own:
// everything is in its tests.
//
// The TypeScript package is compiled with its pinned tsc into a temporary
// directory, so no build output lands in the checkout; its dependencies
// come from capwire/ts/node_modules, which `make deps` installs with
// `npm ci`. Tests skip only when node or python3 is not installed.
package clienttest
