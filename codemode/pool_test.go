package codemode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/need"
)

// With a pool, a run takes a warm jail (its runtime started, the client
// loaded, before the program existed) and behaves as a cold one: the
// façade's call, the printed output, the returned value, the accounting.
// A jail runs one program: the next run gets another. A syntax error
// found in a warm jail is the program's, as in a cold one. Close ends the
// jails still waiting.
func TestRunWarm(t *testing.T) {
	defer leakcheck.Check(t)()
	r, srv := newRunner(t, func(c *Config) { c.Warm = 1 })
	defer srv.Close()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.Prewarm(ctx); err != nil {
		t.Fatal(err)
	}
	progs := map[string]string{
		TypeScript: `import * as t from "./t.js";
const r = await t.echo({ text: "warm ts" });
console.log(r.text());
export default { echoed: r.text() };`,
		Python: `import t
r = await t.echo(text="warm python")
print(r.text())
{"echoed": r.text()}`,
	}
	bad := map[string]string{TypeScript: "const x: = 1;", Python: "def f(:\n"}
	for _, lang := range r.Languages() {
		t.Run(lang, func(t *testing.T) {
			ready := func() bool { return len(r.pools[lang].ready) == 1 }
			for i := range 2 {
				eventually(t, "a warm "+lang+" jail", ready)
				res, err := r.Run(ctx, Request{Language: lang, Code: progs[lang], Timeout: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				want := `{"echoed":"warm ` + map[string]string{TypeScript: "ts", Python: "python"}[lang] + `"}`
				if !res.Warm || !res.OK() || string(res.Value) != want || res.Calls != 1 || !strings.HasPrefix(res.Stdout, "warm ") {
					t.Fatalf("warm run %d: %+v", i, res)
				}
			}
			eventually(t, "a warm "+lang+" jail", ready)
			res, err := r.Run(ctx, Request{Language: lang, Code: bad[lang], Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Warm || res.OK() || !strings.Contains(res.Stderr, "main") {
				t.Errorf("a syntax error, warm: %+v", res)
			}
		})
	}
}

// A program that signals its warm jail's init runs once: init stays, the
// run is warm, its one call is made once, and its output and value are
// its own. (Had init died, the run would have been retried cold, its
// calls made again.)
func TestRunWarmSignalsInit(t *testing.T) {
	defer leakcheck.Check(t)()
	need.Command(t, "python3", "the README names Python >= 3.10")
	r, srv := newRunner(t, func(c *Config) { c.Warm = 1; c.Languages = []string{Python} })
	defer srv.Close()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.Prewarm(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a warm python jail", func() bool { return len(r.pools[Python].ready) == 1 })
	// The signal is taken once it is pending at init no more.
	res, err := r.Run(ctx, Request{Language: Python, Timeout: 30 * time.Second, Code: `import os, signal, t
r = await t.echo(text="once")
print(r.text())
os.kill(1, signal.SIGTERM)
def pending():
    for l in open("/proc/1/status"):
        if l.startswith(("SigPnd:", "ShdPnd:")) and int(l.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return True
    return False
while pending():
    os.sched_yield()
r.text()`})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm || !res.OK() || res.Calls != 1 || res.Stdout != "once\n" || string(res.Value) != `"once"` {
		t.Fatalf("a program that signalled its init: warm %v, %d calls, %+v", res.Warm, res.Calls, res)
	}
}
