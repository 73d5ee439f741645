package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// sampleEnv makes the harness binary measure one client in one cell and
// print the sample as JSON (see maybeSample). Each sample runs in a
// process of its own because the client side of every client is "this
// process": measured in one long-lived harness, a client inherited the
// heap, goroutines and timers the clients before it left behind (after
// go-sdk's cell, the next client's CPU per call rose by a third), so the
// order of the clients, not only the clients, decided the numbers.
const sampleEnv = "CAPBRIDGE_PEERS_SAMPLE"

// sampleJob is what a sample process is told.
type sampleJob struct {
	Client    string `json:"client"`
	Cell      cell   `json:"cell"`
	Small     int    `json:"small"`
	Large     int    `json:"large"`
	Warm      int    `json:"warm"`
	CapNS     int64  `json:"cap_ns"`
	Capbridge string `json:"capbridge"`
	CRelay    string `json:"crelay"`
	Tmp       string `json:"tmp"`
	Profile   string `json:"profile,omitempty"`
}

// maybeSample runs this process as one sample and exits when sampleEnv is
// set; otherwise it returns at once. The sample goes to stdout as JSON,
// its failure (if any) in its Err; a child left running is a failure, and
// is killed.
func maybeSample() {
	spec := os.Getenv(sampleEnv)
	if spec == "" {
		return
	}
	var job sampleJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, "peers sample:", err)
		os.Exit(2)
	}
	s := sample{Cell: job.Cell, Client: job.Client}
	cl, ok := clientNamed(job.Client)
	if !ok {
		s.Err = "no client named " + job.Client
	} else {
		argv, senv := rawecho.Command()
		hargv, henv := rawecho.HTTPCommand()
		_, h25env := rawecho.HTTP2025Command()
		e := &env{serverArgv: argv, serverEnv: senv, httpArgv: hargv, httpEnv: henv, http2025Env: h25env, capbridge: job.Capbridge, crelay: job.CRelay, tmp: job.Tmp, profile: job.Profile}
		p := plan{small: job.Small, large: job.Large, warm: job.Warm, cap: time.Duration(job.CapNS)}
		s = measure(context.Background(), e, cl, job.Cell, p)
	}
	if left := stray(); len(left) > 0 {
		for _, pid := range left {
			if proc, err := os.FindProcess(pid); err == nil {
				_ = proc.Kill()
			}
		}
		s.Err += fmt.Sprintf("; child processes left behind: %v", left)
	}
	if err := json.NewEncoder(os.Stdout).Encode(&s); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

func clientNamed(name string) (client, bool) {
	for _, c := range clients {
		if c.name == name {
			return c, true
		}
	}
	return client{}, false
}

// profileName is the prefix of the profiles -profile collects of client's
// capbridge in cell c, in run run.
func profileName(client string, c cell, run int) string {
	return fmt.Sprintf("%s-%s-run%d", client, strings.ReplaceAll(c.flagName(), "/", "-"), run)
}

// measureApart measures cl in c in a fresh process (this binary with
// sampleEnv set), bounded like an in-process measure, and returns its
// sample.
func measureApart(ctx context.Context, e *env, cl client, c cell, p plan, run int) sample {
	fail := func(err error) sample { return sample{Cell: c, Client: cl.name, Err: err.Error()} }
	if isCRelay(cl.name) && e.crelaySkip != "" {
		return sample{Cell: c, Client: cl.name, Skipped: e.crelaySkip}
	}
	job := sampleJob{Client: cl.name, Cell: c, Small: p.small, Large: p.large, Warm: p.warm, CapNS: int64(p.cap), Capbridge: e.capbridge, CRelay: e.crelay, Tmp: e.tmp}
	if e.profileDir != "" {
		job.Profile = filepath.Join(e.profileDir, profileName(cl.name, c, run))
	}
	spec, err := json.Marshal(job)
	if err != nil {
		return fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cap+2*lifetimeSlack)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(withoutVars(os.Environ(), sampleEnv, relayEnv, rawecho.Env), sampleEnv+"="+string(spec))
	var out bytes.Buffer
	var errTail tail
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(&errTail, os.Stderr)
	if err := cmd.Run(); err != nil {
		return fail(fmt.Errorf("sample process: %w: %s", err, errTail.b))
	}
	var s sample
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return fail(fmt.Errorf("sample process printed %q: %w", clip(out.Bytes()), err))
	}
	return s
}

// tailMax bounds what is kept of a sample process's stderr for an error
// message; all of it goes on to the harness's own stderr.
const tailMax = 2000

// tail keeps the last tailMax bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = clip(append(t.b, clip(p)...))
	return len(p), nil
}

// clip returns the end of b, at most tailMax bytes of it.
func clip(b []byte) []byte {
	if len(b) > tailMax {
		return b[len(b)-tailMax:]
	}
	return b
}
