package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment variables of the re-exec protocol between Command and
// MaybeServe.
const (
	// ScenarioEnv carries the scenario, as JSON, to the child.
	ScenarioEnv = "MCPTEST_SCENARIO"
	// grandchildEnv marks the process Scenario.Grandchild spawns.
	grandchildEnv = "MCPTEST_GRANDCHILD"
	// grandchildSetsid is grandchildEnv's value for the grandchild of
	// Scenario.GrandchildSetsid.
	grandchildSetsid = "setsid"
	// maxEnvString is Linux's MAX_ARG_STRLEN: one environment string
	// longer than this makes execve fail with E2BIG.
	maxEnvString = 128 << 10
)

// GrandchildLife is how long the grandchild of Scenario.Grandchild holds
// stdout before it exits on its own.
const GrandchildLife = MaxWait

// Command returns the argv and the extra environment that start a server
// for sc as a child process by re-executing the current binary (the test
// binary). The child runs MaybeServe from its TestMain.
//
// argv is the executable's path plus -test.run=^$ and -test.bench=^$: if
// a package forgot MaybeServe, the child runs no tests (and prints its
// "no tests" noise) instead of recursively running the suite. env holds
// ScenarioEnv and GORACE (the caller's GORACE plus atexit_sleep_ms=0: a
// race-enabled binary otherwise sleeps a second at every clean exit, which
// would dominate every test that stops a server); the caller appends env
// to whatever else the child should see, and exec's last-one-wins rule for
// duplicate keys keeps these.
// Command panics if sc cannot be encoded (a Tools entry that is not JSON)
// or does not fit one environment string (128 KiB on Linux): both are
// mistakes in the test, not conditions to handle.
func Command(sc Scenario) (argv []string, env []string) {
	b, err := json.Marshal(sc)
	if err != nil {
		panic(fmt.Sprintf("mcptest: encoding the scenario: %v", err))
	}
	kv := ScenarioEnv + "=" + string(b)
	if len(kv) >= maxEnvString {
		panic(fmt.Sprintf("mcptest: the scenario is %d bytes; one environment string holds at most %d", len(kv), maxEnvString-1))
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return []string{exe, "-test.run=^$", "-test.bench=^$"}, []string{kv, "GORACE=" + gorace}
}

// TOML renders Command(sc) as the command, args and env keys of a
// capbridge.toml [mcp.NAME] table, one line each; extraEnv are more
// "KEY = value" pairs for its env table, written as given (a secret
// reference, say).
func TOML(sc Scenario, extraEnv ...string) string {
	argv, env := Command(sc)
	args := make([]string, len(argv)-1)
	for i, a := range argv[1:] {
		args[i] = strconv.Quote(a)
	}
	pairs := make([]string, 0, len(env)+len(extraEnv))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		pairs = append(pairs, k+" = "+strconv.Quote(v))
	}
	pairs = append(pairs, extraEnv...)
	return "command = " + strconv.Quote(argv[0]) + "\nargs = [" + strings.Join(args, ", ") + "]\nenv = { " + strings.Join(pairs, ", ") + " }\n"
}

// MaybeServe must be the first call in TestMain of every package that uses
// Command: when the environment carries a scenario (MCPTEST_SCENARIO=<json>),
// it serves on stdin/stdout/stderr and exits the process; otherwise it
// returns at once. It also runs the grandchild of Scenario.Grandchild,
// which is the same binary re-executed. A scenario that does not parse is
// reported on stderr and exits with status 2.
func MaybeServe() {
	if v := os.Getenv(grandchildEnv); v != "" {
		if v == grandchildSetsid {
			signal.Ignore(syscall.SIGTERM)
		}
		time.Sleep(GrandchildLife)
		os.Exit(0)
	}
	raw, ok := os.LookupEnv(ScenarioEnv)
	if !ok {
		return
	}
	sc, err := ParseScenario([]byte(raw))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	Main(sc)
}

// ParseScenario decodes a scenario strictly: unknown fields and trailing
// data are errors, so a misspelt misbehaviour cannot pass unnoticed.
func ParseScenario(data []byte) (Scenario, error) {
	var sc Scenario
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return Scenario{}, fmt.Errorf("mcptest: scenario: %w", err)
	}
	if dec.More() {
		return Scenario{}, fmt.Errorf("mcptest: scenario: trailing data after the JSON object")
	}
	return sc, nil
}

// Main serves sc as this process on stdin/stdout/stderr and exits it:
// status 0 after stdin EOF (or the IgnoreStdinEOF linger), 3 for
// ExitBeforeHandshake, 1 for the crash tool, SIGKILL for the kill tool,
// 4 if the grandchild cannot be started, 2 for any other failure. It
// never returns.
func Main(sc Scenario) {
	if sc.IgnoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	if sc.Grandchild {
		if err := spawnGrandchild(sc.GrandchildSetsid); err != nil {
			fmt.Fprintf(os.Stderr, "mcptest: starting the grandchild: %v\n", err)
			os.Exit(4)
		}
	}
	if err := serve(context.Background(), os.Stdin, os.Stdout, os.Stderr, sc, osProc{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// spawnGrandchild starts this binary again as a process that only holds
// stdout for GrandchildLife. By default it stays in the server's process
// group (no Setpgid) so the group kill a careful client sends reaches it;
// with setsid it leaves for a session of its own, ignores SIGTERM and
// keeps the server's environment, as a detached browser does. It never
// has a Pdeathsig: outliving the server is its whole point.
func spawnGrandchild(setsid bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{grandchildEnv + "=1"}
	if setsid {
		cmd.Env = append(os.Environ(), grandchildEnv+"="+grandchildSetsid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	cmd.Stdout = os.Stdout // an *os.File: inherited as fd 1, no copying goroutine
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mcptest: grandchild pid %d holds stdout\n", cmd.Process.Pid)
	go func() { _ = cmd.Wait() }() // reap it should it end before the server
	return nil
}

// osProc performs the process-level exits for Main.
type osProc struct{}

func (osProc) exit(code int) { os.Exit(code) }

func (osProc) killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// Not reached: a SIGKILL sent to oneself is delivered before kill(2)
	// returns. Exit anyway rather than serve on as if nothing happened.
	os.Exit(1)
}
