package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// The floor of the conns cell is a relay that does nothing a bridge need
// not: the same capwire clients on as many connections, the same rawecho
// server behind it, and in the middle one process that reads each call,
// writes it to the server as a tools/call line and writes the server's
// answer back to the call's connection as a result. No grant, admission,
// budget, timeout, audit or gathering of writes: a goroutine per
// connection reads its calls and writes each to the server at once, and
// one goroutine reads the server's answers and writes each to its
// connection at once. How its calls/s falls from 8 connections to 256 is
// what the clients, the sockets and Go's scheduler cost as connections
// grow, which a bridge cannot do better than.

// floorEnv makes the harness binary the floor relay (maybeFloor): it
// names the socket to listen on.
const floorEnv = "CAPBRIDGE_SCALE_FLOOR"

// maybeFloor runs this process as the floor relay and exits when floorEnv
// is set; otherwise it returns at once.
func maybeFloor() {
	sock := os.Getenv(floorEnv)
	if sock == "" {
		return
	}
	// One thread runs Go code, as in capbridge serve by default.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if err := floorRelay(sock); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// floorRelay listens on sock, starts a rawecho child, writes "ready
// PID\n" (the child's) to stdout and relays until stdin ends (the
// harness stops it by closing it), then closes the child's stdin, which
// ends rawecho, and reaps it.
func floorRelay(sock string) error {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	cmd, stdin, stdout, err := rawecho.Start(floorEnv)
	if err != nil {
		return err
	}
	f := &floor{stdin: stdin, waiting: map[uint64]floorCall{}}
	go f.answers(stdout)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(nc)
		}
	}()
	fmt.Printf("ready %d\n", cmd.Process.Pid)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stdin.Close()
	return cmd.Wait()
}

// floor is the relay's state: the server's stdin, written one call at a
// time, and the calls waiting for the server's answer by the id the relay
// gave them.
type floor struct {
	mu      sync.Mutex
	stdin   io.Writer
	next    uint64
	waiting map[uint64]floorCall
	line    []byte
}

type floorCall struct {
	nc net.Conn
	id uint64 // the client's
}

// serve answers the hello of one connection and relays its calls.
func (f *floor) serve(nc net.Conn) {
	defer nc.Close()
	fr := capwire.NewFrameReader(nc, 0)
	var in []byte
	var err error
	if in, err = fr.ReadFrame(in[:0]); err != nil {
		return
	}
	if m, err := capwire.Decode(in); err != nil || m.Type() != "hello" {
		return
	}
	w, err := capwire.AppendFrame(nil, &capwire.WelcomeMsg{V: capwire.Version, Servers: []string{"s0"}}, 0)
	if err != nil {
		return
	}
	if _, err := nc.Write(w); err != nil {
		return
	}
	var args struct {
		Text string `msgpack:"text"`
	}
	for {
		if in, err = fr.ReadFrame(in[:0]); err != nil {
			return
		}
		m, err := capwire.Decode(in)
		if err != nil {
			return
		}
		c, ok := m.(*capwire.CallMsg)
		if !ok {
			continue
		}
		if err := msgpack.Unmarshal(c.Args, &args); err != nil {
			return
		}
		text, _ := json.Marshal(args.Text)
		f.mu.Lock()
		f.next++
		f.waiting[f.next] = floorCall{nc: nc, id: c.ID}
		f.line = strconv.AppendUint(append(f.line[:0], `{"jsonrpc":"2.0","id":`...), f.next, 10)
		f.line = append(append(append(f.line, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":`...), text...), "}}}\n"...)
		_, err = f.stdin.Write(f.line)
		f.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// answers reads the server's answers and writes each to its call's
// connection as a result.
func (f *floor) answers(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		id := gjson.GetBytes(line, "id").Uint()
		f.mu.Lock()
		c, ok := f.waiting[id]
		delete(f.waiting, id)
		f.mu.Unlock()
		if !ok {
			continue
		}
		res := &capwire.ResultMsg{ID: c.id, Result: capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: gjson.GetBytes(line, "result.content.0.text").String()}}}}
		if out, err = capwire.AppendFrame(out[:0], res, 0); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
		_, _ = c.nc.Write(out)
	}
}

// floorProc is a running floor relay.
type floorProc struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	sock      string
	serverPID int
}

// startFloor starts the floor relay in a directory under tmp.
func startFloor(ctx context.Context, tmp string) (*floorProc, error) {
	dir, err := os.MkdirTemp(tmp, "floor")
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &floorProc{sock: filepath.Join(dir, "floor.sock")}
	// Under go test this binary is the test binary, whose TestMain runs
	// maybeFloor too; the flags make one that does not run no test
	// instead of every test again.
	p.cmd = exec.Command(exe, "-test.run=^$", "-test.bench=^$")
	p.cmd.Env = append(os.Environ(), floorEnv+"="+p.sock)
	p.cmd.Stderr = os.Stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t := time.NewTimer(serveTimeout)
	defer t.Stop()
	select {
	case line := <-lines:
		pid, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
		if p.serverPID, err = strconv.Atoi(pid); !ok || err != nil {
			return nil, errors.Join(fmt.Errorf("the floor printed %q instead of its ready line", line), p.stop())
		}
	case <-t.C:
		return nil, errors.Join(fmt.Errorf("the floor was not ready within %v", serveTimeout), p.stop())
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), p.stop())
	}
	return p, nil
}

// stop closes the floor's stdin, which ends it and its server, and waits
// for it to exit 0.
func (p *floorProc) stop() error {
	defer os.RemoveAll(filepath.Dir(p.sock))
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	return reap(p.cmd.Process, done, "the floor, its stdin closed")
}
