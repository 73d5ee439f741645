package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/capbridge/capbridge/codemode"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
	"github.com/capbridge/capbridge/jail"
)

func TestMain(m *testing.M) {
	jail.MaybeInit(codemode.StripTypes)
	rawecho.MaybeServe()
	os.Exit(m.Run())
}

// TestQuickRun runs the harness once in -quick mode for TypeScript and
// Python, cold and warm, and checks that every row has its numbers and
// every warm run took a warm jail. It asserts nothing about the numbers'
// size: the machine decides those.
func TestQuickRun(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-quick", "-langs", "typescript,python", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want TypeScript and Python, cold and warm:\n%s", len(rows), b)
	}
	for _, r := range rows {
		if len(r.FirstMS) != 3 || r.FirstP50 <= 0 || r.WholeP50 < r.FirstP50 || r.WarmMissed != 0 {
			t.Errorf("row %+v", r)
		}
	}
}
