package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// The c-relay client is the two-hop floor with no runtime in the middle:
// raw's client over a Unix socket (read and written as raw-relay's is) to
// crelay.c, one process with two blocking threads, each a read() then a
// write() of what it returned on one buffer, to a rawecho child's pipes.
// A byte that arrives wakes exactly the thread blocked on it, so what
// raw-relay costs beyond it is the Go runtime's scheduling of a relay that
// does nothing. It is built by the machine's C compiler once per run; on
// a machine without one, its samples are skipped, saying so.

//go:embed crelay/crelay.c
var crelaySource []byte

// cCompilers are tried in order when $CC is unset.
var cCompilers = []string{"cc", "gcc", "clang"}

// findCC returns the C compiler to build crelay with, or "" and why there
// is none.
func findCC() (string, string) {
	if cc := os.Getenv("CC"); cc != "" {
		if path, err := exec.LookPath(cc); err == nil {
			return path, ""
		}
		return "", fmt.Sprintf("$CC (%s) is not an executable on PATH", cc)
	}
	for _, cc := range cCompilers {
		if path, err := exec.LookPath(cc); err == nil {
			return path, ""
		}
	}
	return "", "no C compiler on PATH (tried $CC, cc, gcc, clang)"
}

// buildCRelay compiles crelay.c into dir. It returns the binary's path, or
// "" and the reason the client is skipped when the machine has no C
// compiler; a compiler that fails is an error.
func buildCRelay(ctx context.Context, dir string) (bin, skip string, err error) {
	cc, skip := findCC()
	if cc == "" {
		return "", skip, nil
	}
	src := filepath.Join(dir, "crelay.c")
	if err := os.WriteFile(src, crelaySource, 0o600); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "crelay")
	build := exec.CommandContext(ctx, cc, "-O2", "-pthread", "-o", bin, src)
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building the C relay with %s: %w\n%s", cc, err, out)
	}
	return bin, "", nil
}

func startCRelay(ctx context.Context, e *env, text string, inflight int) (peer, error) {
	if e.crelay == "" {
		return nil, fmt.Errorf("c-relay: not built")
	}
	dir, err := os.MkdirTemp(e.tmp, "crelay")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "relay.sock")
	cmd := exec.Command(e.crelay, append([]string{sock}, e.serverArgv...)...)
	// The child inherits crelay's environment: the server's own.
	cmd.Env = append(withoutVars(os.Environ(), relayEnv, rawecho.Env, sampleEnv), e.serverEnv...)
	return startRelayed(ctx, "c-relay", cmd, dir, sock, text, inflight)
}
