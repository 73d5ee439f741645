package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// launchHandshake is what the launcher says to each server: the least a
// client of the MCP lifecycle must (initialize, then
// notifications/initialized), and the tools/list that tells it what the
// server offers. capbridge also probes server/discover first, a round
// trip more, which rawecho refuses.
var launchHandshake = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"launch","version":"1"}}}` + "\n",
	`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n",
}

// launch is the floor of the servers cell: this process, and nothing
// else, starting n rawecho servers at once (one goroutine each, os/exec,
// no custody) and handshaking each, until every one has answered
// tools/list. It returns how long that took, then ends them (stdin
// closed, waited for) before returning.
func launch(ctx context.Context, n int) (time.Duration, error) {
	argv, env := rawecho.Command()
	env = append(os.Environ(), env...)
	ctx, cancel := context.WithTimeout(ctx, serveTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	type child struct {
		cmd *exec.Cmd
		in  *os.File
	}
	children := make([]child, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range children {
		wg.Go(func() {
			inR, inW, err := os.Pipe()
			if err != nil {
				errs[i] = err
				return
			}
			outR, outW, err := os.Pipe()
			if err != nil {
				inR.Close()
				inW.Close()
				errs[i] = err
				return
			}
			defer outR.Close()
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env, cmd.Stdin, cmd.Stdout = env, inR, outW
			err = cmd.Start()
			inR.Close()
			outW.Close()
			if err != nil {
				inW.Close()
				errs[i] = err
				return
			}
			children[i] = child{cmd, inW}
			errs[i] = handshake(inW, outR, deadline)
		})
	}
	wg.Wait()
	took := time.Since(start)
	for _, c := range children {
		if c.cmd == nil {
			continue
		}
		c.in.Close() // rawecho exits at the end of its input
		if err := waitBounded(c.cmd, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return took, errors.Join(errs...)
}

// handshake writes each of launchHandshake's requests and reads a reply
// to each, by deadline.
func handshake(in, out *os.File, deadline time.Time) error {
	if err := out.SetReadDeadline(deadline); err != nil {
		return err
	}
	r := bufio.NewReader(out)
	for _, req := range launchHandshake {
		if _, err := in.WriteString(req); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("launch: reading the reply to %.40q: %w", req, err)
		}
		if !strings.Contains(line, `"result"`) {
			return fmt.Errorf("launch: %.40q answered %.200q", req, line)
		}
	}
	return nil
}

// waitBounded waits for cmd to exit, killing it at deadline.
func waitBounded(cmd *exec.Cmd, deadline time.Time) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("launch: server %d did not exit at the end of its input", cmd.Process.Pid)
	}
}
