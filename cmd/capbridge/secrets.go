package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/internal/truncate"
)

// systemSecrets are the secrets of this machine: capbridge's environment,
// its files, and the commands it may run (config.ResolveSecrets).
func systemSecrets() config.SecretSources {
	return config.SecretSources{LookupEnv: os.LookupEnv, ReadFile: config.ReadSecretFile, Run: runSecretCommand}
}

// runSecretCommand runs argv without a shell, in a process group of its
// own, with capbridge's environment and nothing on stdin; what ctx allows
// is all it gets, then its whole group is killed. Its stdout is the
// secret (at most config.MaxSecret+1 bytes are kept); its stderr only
// explains a failure.
func runSecretCommand(ctx context.Context, argv []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errOut capped
	out.max, errOut.max = config.MaxSecret+1, 512
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Whatever it left holding its pipes gets this long once it exits.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err != nil {
		msg := err.Error()
		if ctx.Err() != nil {
			msg = "it did not finish in time"
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(errOut.b.String()), "\n"); first != "" {
			msg += ": " + truncate.Ellipsis(first, 200)
		}
		return nil, errors.New(msg)
	}
	return out.b.Bytes(), nil
}

// capped keeps the first max bytes written to it and drops the rest, so
// a command that prints without end cannot fill memory.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
